// IeeeFpEnv: for its lifetime, the IEEE default floating-point environment
// (round to nearest even; on x86 also no flush-to-zero / denormals-are-zero
// in MXCSR, exception masks and flags kept), restored afterwards. The
// quantizers' rules and the native kernels' epilogues assume it, whatever
// environment the caller runs in; ThreadPool workers inherit it.
#pragma once

namespace qloom {

class IeeeFpEnv {
 public:
  IeeeFpEnv();
  ~IeeeFpEnv();
  IeeeFpEnv(const IeeeFpEnv&) = delete;
  IeeeFpEnv& operator=(const IeeeFpEnv&) = delete;

 private:
  unsigned saved_csr_ = 0;
  int saved_round_ = 0;
};

}  // namespace qloom
