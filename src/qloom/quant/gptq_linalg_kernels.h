// Internal: the SIMD kernel sets behind gptq_linalg.h. Each set is compiled
// for its ISA with per-function target attributes (gptq_linalg_avx2.cpp,
// gptq_linalg_avx512.cpp share gptq_linalg_kernels.inc; the scalar set, in
// gptq_linalg.cpp, uses std::fma). Every kernel computes each output element
// as one FMA chain in increasing k, so all sets give the same bits.
#pragma once

#include <cstdint>

#include "qloom/core/convert.h"

namespace qloom::quant::linalg::detail {

template <class T>
struct ChainKernels {
  const char* name;
  int64_t mr, nr;  // register tile: rows x columns of C
  // For i < mr, j < nr: acc = c[i*ldc + j]; for k < kc:
  //   acc = fma(±ap[k*mr + i], bp[k*nr + j], acc)  (add: +, sub: -);
  // c[i*ldc + j] = acc. ap, bp: packed A rows / B columns of the tile.
  void (*micro_add)(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc);
  void (*micro_sub)(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc);
  // y[i] = fma(x[i], alpha, y[i]) for i < n.
  void (*axpy)(int64_t n, T alpha, const T* x, T* y);
  // dst[k*nr + j] = b[k*ldb + j] for k < kc, j < nr (a B panel, packed).
  void (*pack)(int64_t kc, const T* b, int64_t ldb, T* dst);
};

// nullptr when the build is not x86-64 (callers check isa_supported first).
const ChainKernels<double>* chain_kernels_f64_avx2();
const ChainKernels<float>* chain_kernels_f32_avx2();
const ChainKernels<double>* chain_kernels_f64_avx512();
const ChainKernels<float>* chain_kernels_f32_avx512();

// For tests: while alive, the optimized functions called on this thread use
// `isa`'s kernels (throws Error(kUnsupported) when the CPU or QLOOM_MAX_ISA
// does not allow it) instead of the best allowed.
class IsaOverride {
 public:
  explicit IsaOverride(Isa isa);
  ~IsaOverride();
  IsaOverride(const IsaOverride&) = delete;
  IsaOverride& operator=(const IsaOverride&) = delete;

 private:
  int saved_;
};

}  // namespace qloom::quant::linalg::detail
