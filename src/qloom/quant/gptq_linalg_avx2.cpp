// AVX2+FMA instantiation of the chain kernels (gptq_linalg_kernels.inc):
// 6 x 8 double / 6 x 16 float register tiles (12 ymm accumulators).
#include "qloom/quant/gptq_linalg_kernels.h"

#if defined(__x86_64__)

#include "qloom/core/x86_intrinsics.h"

#define QLOOM_LA_TARGET __attribute__((target("avx2,fma")))

namespace qloom::quant::linalg::detail {
namespace {

struct F64 {
  using E = double;
  using R = __m256d;
  static constexpr int kW = 4, kMR = 6;
  QLOOM_LA_TARGET static R load(const E* p) { return _mm256_loadu_pd(p); }
  QLOOM_LA_TARGET static void store(E* p, R v) { _mm256_storeu_pd(p, v); }
  QLOOM_LA_TARGET static R set1(E v) { return _mm256_set1_pd(v); }
  QLOOM_LA_TARGET static R fmadd(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  QLOOM_LA_TARGET static R fnmadd(R a, R b, R c) { return _mm256_fnmadd_pd(a, b, c); }
  QLOOM_LA_TARGET static E fma1(E a, E b, E c) { return __builtin_fma(a, b, c); }
};

struct F32 {
  using E = float;
  using R = __m256;
  static constexpr int kW = 8, kMR = 6;
  QLOOM_LA_TARGET static R load(const E* p) { return _mm256_loadu_ps(p); }
  QLOOM_LA_TARGET static void store(E* p, R v) { _mm256_storeu_ps(p, v); }
  QLOOM_LA_TARGET static R set1(E v) { return _mm256_set1_ps(v); }
  QLOOM_LA_TARGET static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  QLOOM_LA_TARGET static R fnmadd(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }
  QLOOM_LA_TARGET static E fma1(E a, E b, E c) { return __builtin_fmaf(a, b, c); }
};

#include "qloom/quant/gptq_linalg_kernels.inc"

}  // namespace

const ChainKernels<double>* chain_kernels_f64_avx2() { return chain_set<F64>("avx2"); }
const ChainKernels<float>* chain_kernels_f32_avx2() { return chain_set<F32>("avx2"); }

}  // namespace qloom::quant::linalg::detail

#else

namespace qloom::quant::linalg::detail {
const ChainKernels<double>* chain_kernels_f64_avx2() { return nullptr; }
const ChainKernels<float>* chain_kernels_f32_avx2() { return nullptr; }
}  // namespace qloom::quant::linalg::detail

#endif
