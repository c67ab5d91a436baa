// AVX-512 (F+BW+VL+DQ) instantiation of the GEMM/GEMV kernels
// (gemm_kernels.inc): 12 x 32 register tiles (24 zmm accumulators), GEMV over
// 4 W rows x up to 4 x rows. Contract: gemm_kernels.h.
#include "qloom/engine/gemm_kernels.h"

#if defined(__x86_64__)

#include "qloom/core/x86_intrinsics.h"
#include "qloom/engine/gemm_hsum.h"

#define QLOOM_GEMM_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c,fma")))

namespace qloom::engine::detail {
namespace {

struct V {
  using R = __m512;
  static constexpr int kW = 16;
  static constexpr int kMR = 12;
  static constexpr int kGemvOuts = 4;
  static constexpr int kSplit = 1;
  static constexpr bool kTransposeBlock = true;
  QLOOM_GEMM_TARGET static R zero() { return _mm512_setzero_ps(); }
  QLOOM_GEMM_TARGET static R load(const float* p) { return _mm512_loadu_ps(p); }
  QLOOM_GEMM_TARGET static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  QLOOM_GEMM_TARGET static R bcast(const float* p) { return _mm512_set1_ps(*p); }
  QLOOM_GEMM_TARGET static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  QLOOM_GEMM_TARGET static R add(R a, R b) { return _mm512_add_ps(a, b); }
  QLOOM_GEMM_TARGET static R load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
  }
  QLOOM_GEMM_TARGET static R load_row(const float* p) { return load(p); }
  QLOOM_GEMM_TARGET static R load_row(const uint16_t* p) { return load_bf16(p); }
  // dst[kk * ld + j] = src[j * in + kk] for j, kk < 16 (16 W rows x 16 k,
  // widened, transposed in registers). maskz forms throughout: see gemm_hsum.h.
  template <class E>
  QLOOM_GEMM_TARGET static void transpose_block(const E* src, int64_t in, float* dst, int64_t ld) {
    R r[16], a[16];
    for (int i = 0; i < 16; ++i) r[i] = load_row(src + i * in);
    for (int i = 0; i < 8; ++i) {
      a[2 * i] = _mm512_maskz_unpacklo_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // r[4i + c]: lane l = rows 4i..4i+3 of column 4l + c
      const __m512d x0 = _mm512_castps_pd(a[4 * i]), x1 = _mm512_castps_pd(a[4 * i + 1]);
      const __m512d x2 = _mm512_castps_pd(a[4 * i + 2]), x3 = _mm512_castps_pd(a[4 * i + 3]);
      r[4 * i] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, x0, x2));
      r[4 * i + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, x0, x2));
      r[4 * i + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xFF, x1, x3));
      r[4 * i + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xFF, x1, x3));
    }
    for (int c = 0; c < 4; ++c) {
      const R u0 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[c], r[4 + c], 0x88);
      const R u1 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[c], r[4 + c], 0xDD);
      const R v0 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[8 + c], r[12 + c], 0x88);
      const R v1 = _mm512_maskz_shuffle_f32x4(0xFFFF, r[8 + c], r[12 + c], 0xDD);
      store(dst + (c)*ld, _mm512_maskz_shuffle_f32x4(0xFFFF, u0, v0, 0x88));
      store(dst + (4 + c) * ld, _mm512_maskz_shuffle_f32x4(0xFFFF, u1, v1, 0x88));
      store(dst + (8 + c) * ld, _mm512_maskz_shuffle_f32x4(0xFFFF, u0, v0, 0xDD));
      store(dst + (12 + c) * ld, _mm512_maskz_shuffle_f32x4(0xFFFF, u1, v1, 0xDD));
    }
  }
  // maskz forms: GCC 12's unmasked shuffle/extract (and so
  // _mm512_reduce_add_ps) read an undefined register and trip -Wuninitialized.
  QLOOM_GEMM_TARGET static float hsum(R v) { return canonical_hsum16(v); }
};

#include "qloom/engine/gemm_kernels.inc"

}  // namespace

const GemmKernelSet* gemm_kernels_avx512() {
  static const GemmKernelSet set{"avx512", 2 * V::kW, V::kMR, kKC, kMC, gemm_entry, gemv_entry, pack_entry,
                                 gemm_panels_entry};
  return &set;
}

}  // namespace qloom::engine::detail

#else

namespace qloom::engine::detail {
const GemmKernelSet* gemm_kernels_avx512() { return nullptr; }
}  // namespace qloom::engine::detail

#endif
