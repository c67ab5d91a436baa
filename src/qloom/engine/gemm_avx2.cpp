// AVX2+FMA instantiation of the GEMM/GEMV kernels (gemm_kernels.inc): the
// portable-SIMD fallback for x86-64 CPUs without AVX-512. 6 x 16 register
// tiles (12 ymm accumulators), GEMV over 1 W row x up to 4 x rows (2 ymm of
// partial sums each: the same 16-lane order as AVX-512).
// Contract: gemm_kernels.h.
#include "qloom/engine/gemm_kernels.h"

#if defined(__x86_64__)

#include "qloom/core/x86_intrinsics.h"
#include "qloom/engine/gemm_hsum.h"

#define QLOOM_GEMM_TARGET __attribute__((target("avx2,f16c,fma")))

namespace qloom::engine::detail {
namespace {

struct V {
  using R = __m256;
  static constexpr int kW = 8;
  static constexpr int kMR = 6;
  static constexpr int kGemvOuts = 1;  // 4 x rows x 2 registers of partial sums
  static constexpr int kSplit = 2;
  static constexpr bool kTransposeBlock = false;
  template <class E>
  static void transpose_block(const E*, int64_t, float*, int64_t) {}
  QLOOM_GEMM_TARGET static R zero() { return _mm256_setzero_ps(); }
  QLOOM_GEMM_TARGET static R load(const float* p) { return _mm256_loadu_ps(p); }
  QLOOM_GEMM_TARGET static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  QLOOM_GEMM_TARGET static R bcast(const float* p) { return _mm256_broadcast_ss(p); }
  QLOOM_GEMM_TARGET static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  QLOOM_GEMM_TARGET static R add(R a, R b) { return _mm256_add_ps(a, b); }
  QLOOM_GEMM_TARGET static R load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // The canonical tree's last steps (gemm_kernels.inc, gemv_tile).
  QLOOM_GEMM_TARGET static float hsum(R v) { return canonical_hsum8(v); }
};

#include "qloom/engine/gemm_kernels.inc"

}  // namespace

const GemmKernelSet* gemm_kernels_avx2() {
  static const GemmKernelSet set{"avx2", 2 * V::kW, V::kMR, kKC, kMC, gemm_entry, gemv_entry, pack_entry,
                                 gemm_panels_entry};
  return &set;
}

}  // namespace qloom::engine::detail

#else

namespace qloom::engine::detail {
const GemmKernelSet* gemm_kernels_avx2() { return nullptr; }
}  // namespace qloom::engine::detail

#endif
