#include "qloom/core/fp_env.h"

#include <cfenv>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace qloom {

IeeeFpEnv::IeeeFpEnv() {
  saved_round_ = std::fegetround();
  if (saved_round_ != FE_TONEAREST) std::fesetround(FE_TONEAREST);
#if defined(__x86_64__)
  saved_csr_ = _mm_getcsr();
  // Clear FTZ (bit 15), DAZ (bit 6) and the rounding control (bits 13-14 = 00:
  // nearest even); keep the exception masks and flags.
  const unsigned want = saved_csr_ & ~(0x8000u | 0x0040u | 0x6000u);
  if (want != saved_csr_) _mm_setcsr(want);
#endif
}

IeeeFpEnv::~IeeeFpEnv() {
#if defined(__x86_64__)
  if (_mm_getcsr() != saved_csr_) _mm_setcsr(saved_csr_);
#endif
  if (std::fegetround() != saved_round_) std::fesetround(saved_round_);
}

}  // namespace qloom
