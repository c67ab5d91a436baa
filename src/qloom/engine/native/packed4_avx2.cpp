// AVX2+FMA instantiation of the packed 4-bit kernels
// (packed4_kernels_impl.h): 16 lanes as two ymm (lanes 0-7, 8-15: the
// canonical order's kSplit 2 of gemm_avx2.cpp), the 16-entry table as two
// 8-entry halves; an index picks its half with bit 3 (vblendvps reads the
// sign bit, so the index shifted left by 28). Contract: packed4_kernels.h.
#include "qloom/engine/native/packed4_kernels.h"

#include <algorithm>

#if defined(__x86_64__)

#include "qloom/core/x86_intrinsics.h"
#include "qloom/engine/gemm_hsum.h"
#include "qloom/engine/gemm_kernels.h"

#define QLOOM_P4_TARGET __attribute__((target("avx2,fma")))

namespace qloom::engine::native::packed4 {
namespace {

struct V {
  struct R {
    __m256 a, b;
  };
  struct Ri {
    __m256i a, b;
  };
  struct Tab {
    __m256 lo, hi;
  };
  static constexpr int kOuts = 1;
  static constexpr int kOutsOneRow = 2;
  QLOOM_P4_TARGET static R zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  QLOOM_P4_TARGET static R load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  // All-ones lanes for lane < n (n in 0..16), for each half.
  QLOOM_P4_TARGET static __m256i mask(int64_t n, int first_lane) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n) - first_lane), lane);
  }
  QLOOM_P4_TARGET static R load_part(const float* p, int64_t n) {
    return {_mm256_maskload_ps(p, mask(n, 0)), _mm256_maskload_ps(p + 8, mask(n, 8))};
  }
  QLOOM_P4_TARGET static void store(float* p, R v) { _mm256_storeu_ps(p, v.a), _mm256_storeu_ps(p + 8, v.b); }
  QLOOM_P4_TARGET static R fma(R x, R w, R c) {
    return {_mm256_fmadd_ps(x.a, w.a, c.a), _mm256_fmadd_ps(x.b, w.b, c.b)};
  }
  QLOOM_P4_TARGET static R keep(R v, int64_t n) {
    return {_mm256_and_ps(v.a, _mm256_castsi256_ps(mask(n, 0))), _mm256_and_ps(v.b, _mm256_castsi256_ps(mask(n, 8)))};
  }
  QLOOM_P4_TARGET static Tab load_tab(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  QLOOM_P4_TARGET static Tab table(const Tab& base, float s) {
    const __m256 sv = _mm256_set1_ps(s);
    return {_mm256_mul_ps(base.lo, sv), _mm256_mul_ps(base.hi, sv)};
  }
  QLOOM_P4_TARGET static Ri load_codes(const uint8_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
  }
  QLOOM_P4_TARGET static Ri load_tail(const uint8_t* p, int64_t bpl) {
    if (bpl == 1)
      return {_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
              _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))};
    if (bpl == 2)
      return {_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
              _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
    return load_codes(p);
  }
  // table[idx & 15] per lane: the low 3 bits index both halves, bit 3 picks
  // one (shifted to the sign bit that vblendvps reads).
  QLOOM_P4_TARGET static __m256 lut8(const Tab& t, __m256i idx) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t.lo, idx), _mm256_permutevar8x32_ps(t.hi, idx),
                            _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  QLOOM_P4_TARGET static R lut(const Tab& t, const Ri& v) { return {lut8(t, v.a), lut8(t, v.b)}; }
  QLOOM_P4_TARGET static Ri shr4(const Ri& v) { return {_mm256_srli_epi32(v.a, 4), _mm256_srli_epi32(v.b, 4)}; }
  static constexpr bool kTranspose = false;  // panels are filled element by element
  static void transpose16(R*) {}
  // t = lanes 0-7 + lanes 8-15, then the rest of the canonical tree, as
  // gemm_avx2.cpp's hsum (gemm_hsum.h).
  QLOOM_P4_TARGET static float hsum(R v) { return detail::canonical_hsum8(_mm256_add_ps(v.a, v.b)); }
};

#include "qloom/engine/native/packed4_kernels_impl.h"

}  // namespace

const Packed4Kernels* packed4_kernels_avx2() {
  static const Packed4Kernels set{"avx2", gemv_entry, dequant_panels_entry, detail::gemm_kernels_avx2()};
  return &set;
}

}  // namespace qloom::engine::native::packed4

#else

namespace qloom::engine::native::packed4 {
const Packed4Kernels* packed4_kernels_avx2() { return nullptr; }
}  // namespace qloom::engine::native::packed4

#endif
