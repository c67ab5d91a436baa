// AVX-512 (F+BW+VL+DQ) instantiation of the packed 4-bit kernels
// (packed4_kernels_impl.h): a 16-entry table per scale group in one zmm; per
// 16 weights one vpsrld and one vpermps (it reads the low 4 bits of each
// lane: the nibble of the current step) feed the FMA. Contract:
// packed4_kernels.h.
#include "qloom/engine/native/packed4_kernels.h"

#include <algorithm>

#if defined(__x86_64__)

#include "qloom/core/x86_intrinsics.h"
#include "qloom/engine/gemm_hsum.h"
#include "qloom/engine/gemm_kernels.h"

#define QLOOM_P4_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

namespace qloom::engine::native::packed4 {
namespace {

struct V {
  using R = __m512;
  using Ri = __m512i;
  using Tab = __m512;
  static constexpr int kOuts = 4;        // W rows per GEMV tile for 2..4 x rows
  // ... for one x row (decode): 8 rows measured ~10% faster on W hot in L2
  // but 2.5x slower streaming a model's W from DRAM (two code tiles at once).
  static constexpr int kOutsOneRow = 4;
  QLOOM_P4_TARGET static R zero() { return _mm512_setzero_ps(); }
  QLOOM_P4_TARGET static R load(const float* p) { return _mm512_loadu_ps(p); }
  QLOOM_P4_TARGET static __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  QLOOM_P4_TARGET static R load_part(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(first(n), p); }
  QLOOM_P4_TARGET static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  QLOOM_P4_TARGET static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  QLOOM_P4_TARGET static R keep(R v, int64_t n) { return _mm512_maskz_mov_ps(first(n), v); }
  QLOOM_P4_TARGET static Tab load_tab(const float* p) { return _mm512_loadu_ps(p); }
  QLOOM_P4_TARGET static Tab table(Tab base, float s) { return _mm512_mul_ps(base, _mm512_set1_ps(s)); }
  QLOOM_P4_TARGET static Ri load_codes(const uint8_t* p) { return _mm512_loadu_si512(p); }
  QLOOM_P4_TARGET static Ri load_tail(const uint8_t* p, int64_t bpl) {
    if (bpl == 1) return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if (bpl == 2) return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return load_codes(p);
  }
  QLOOM_P4_TARGET static R lut(Tab t, Ri v) { return _mm512_permutexvar_ps(v, t); }
  QLOOM_P4_TARGET static Ri shr4(Ri v) { return _mm512_srli_epi32(v, 4); }
  static constexpr bool kTranspose = true;
  // r[c][j] = old r[j][c] for a 16 x 16 block (moves bits only). maskz
  // forms throughout, like gemm_avx512.cpp (GCC 12 warnings).
  QLOOM_P4_TARGET static void transpose16(R* r) {
    R t[16], u[16];
    for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved
      t[2 * i] = _mm512_maskz_unpacklo_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_maskz_unpackhi_ps(0xFFFF, r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // u[4i + c], 128-bit lane L: rows 4i..4i+3 of column 4L + c
      u[4 * i] = _mm512_maskz_shuffle_ps(0xFFFF, t[4 * i], t[4 * i + 2], 0x44);
      u[4 * i + 1] = _mm512_maskz_shuffle_ps(0xFFFF, t[4 * i], t[4 * i + 2], 0xEE);
      u[4 * i + 2] = _mm512_maskz_shuffle_ps(0xFFFF, t[4 * i + 1], t[4 * i + 3], 0x44);
      u[4 * i + 3] = _mm512_maskz_shuffle_ps(0xFFFF, t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {  // gather lane L of u[c], u[4 + c], u[8 + c], u[12 + c]
      const R v0 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[c], u[4 + c], 0x88);
      const R v1 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[c], u[4 + c], 0xDD);
      const R w0 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[8 + c], u[12 + c], 0x88);
      const R w1 = _mm512_maskz_shuffle_f32x4(0xFFFF, u[8 + c], u[12 + c], 0xDD);
      r[c] = _mm512_maskz_shuffle_f32x4(0xFFFF, v0, w0, 0x88);
      r[4 + c] = _mm512_maskz_shuffle_f32x4(0xFFFF, v1, w1, 0x88);
      r[8 + c] = _mm512_maskz_shuffle_f32x4(0xFFFF, v0, w0, 0xDD);
      r[12 + c] = _mm512_maskz_shuffle_f32x4(0xFFFF, v1, w1, 0xDD);
    }
  }
  // The canonical tree (gemm_dispatch.h): t[i] = p[i] + p[i+8],
  // q[i] = t[i] + t[i+4], (q0 + q2) + (q1 + q3); what gemm_avx512.cpp's hsum
  // computes (maskz forms for GCC 12, see there).
  QLOOM_P4_TARGET static float hsum(R v) { return detail::canonical_hsum16(v); }
};

#include "qloom/engine/native/packed4_kernels_impl.h"

}  // namespace

const Packed4Kernels* packed4_kernels_avx512() {
  static const Packed4Kernels set{"avx512", gemv_entry, dequant_panels_entry, detail::gemm_kernels_avx512()};
  return &set;
}

}  // namespace qloom::engine::native::packed4

#else

namespace qloom::engine::native::packed4 {
const Packed4Kernels* packed4_kernels_avx512() { return nullptr; }
}  // namespace qloom::engine::native::packed4

#endif
