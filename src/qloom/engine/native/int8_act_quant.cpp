// Int8 activation codes and per-token amax (rules: int8_act_quant.h), scalar,
// AVX2 and AVX-512 forms giving the same bits. No "fma" in the targets: the
// rules round x * inv before anything else.
#include "qloom/engine/native/int8_act_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
#define QLOOM_I8Q_AVX2 __attribute__((target("avx2,f16c")))
#define QLOOM_I8Q_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))
#define QLOOM_I8Q_X86 1
#endif

namespace qloom::engine::native {

// ---- scalar reference: the rules written as quant/ writes them ---------------

namespace {

inline int8_t code_of(float x, float inv) {
  const float r = std::clamp(std::nearbyint(x * inv), -128.0f, 127.0f);
  return static_cast<int8_t>(static_cast<int>(r));
}

}  // namespace

float int8_row_amax_ref(const float* x, int64_t n, bool* nonfinite) {
  float mn = x[0], mx = x[0];
  bool bad = false;
  for (int64_t k = 0; k < n; ++k) {
    if (!std::isfinite(x[k])) bad = true;
    mn = std::min(mn, x[k]);
    mx = std::max(mx, x[k]);
  }
  *nonfinite = bad;
  return std::max(-std::min(mn, 0.0f), std::max(mx, 0.0f));
}

bool int8_quantize_row_ref(const float* x, int64_t n, float inv, int8_t* codes) {
  bool nan = false;
  for (int64_t k = 0; k < n; ++k) {
    if (std::isnan(x[k])) {
      nan = true;
      codes[k] = 0;
      continue;
    }
    codes[k] = code_of(x[k], inv);
  }
  return nan;
}

// ---- SIMD forms ---------------------------------------------------------------
// amax as the largest |x| bit pattern: for non-negative floats the unsigned
// order of the bits is the numeric order, and a pattern above 0x7F7FFFFF
// (the largest finite) is inf or NaN.

#ifdef QLOOM_I8Q_X86
namespace {

constexpr uint32_t kMaxFiniteBits = 0x7F7FFFFFu;

float amax_from_bits(uint32_t bits, bool* nonfinite) {
  *nonfinite = bits > kMaxFiniteBits;
  return std::bit_cast<float>(bits);
}

QLOOM_I8Q_AVX2 float row_amax_avx2(const float* x, int64_t n, bool* nonfinite) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i acc = _mm256_setzero_si256();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k));
    acc = _mm256_max_epu32(acc, _mm256_and_si256(v, abs_mask));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  uint32_t bits = 0;
  for (uint32_t l : lanes) bits = std::max(bits, l);
  for (; k < n; ++k) bits = std::max(bits, std::bit_cast<uint32_t>(x[k]) & 0x7FFFFFFFu);
  return amax_from_bits(bits, nonfinite);
}

QLOOM_I8Q_AVX2 inline __m256i codes8_avx2(__m256 x, __m256 inv, __m256 lo, __m256 hi) {
  const __m256 t = _mm256_mul_ps(x, inv);
  const __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
}

QLOOM_I8Q_AVX2 bool quantize_row_avx2(const float* x, int64_t n, float inv, int8_t* codes) {
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
  __m256 nan = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    __m256 v[4];
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + k + 8 * j);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
      q[j] = codes8_avx2(v[j], vinv, lo, hi);
    }
    // int32 -> int8 (values are in range, so the saturating packs are exact);
    // the packs work per 128-bit lane, the permute restores the order.
    const __m256i ab = _mm256_packs_epi32(q[0], q[1]), cd = _mm256_packs_epi32(q[2], q[3]);
    const __m256i abcd = _mm256_packs_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + k),
                        _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  bool any_nan = _mm256_movemask_ps(nan) != 0;
  if (k < n) any_nan |= int8_quantize_row_ref(x + k, n - k, inv, codes + k);
  return any_nan;
}

QLOOM_I8Q_AVX512 inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

QLOOM_I8Q_AVX512 float row_amax_avx512(const float* x, int64_t n, bool* nonfinite) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __mmask16 all = 0xFFFF;
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  int64_t k = 0;
  for (; k + 64 <= n; k += 64)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      acc[j] = _mm512_maskz_max_epu32(all, acc[j], _mm512_and_si512(_mm512_loadu_si512(x + k + 16 * j), abs_mask));
  for (; k < n; k += 16) {
    const __m512i v = _mm512_maskz_loadu_epi32(tail_mask(n - k), x + k);
    acc[0] = _mm512_maskz_max_epu32(all, acc[0], _mm512_and_si512(v, abs_mask));
  }
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, _mm512_maskz_max_epu32(all, _mm512_maskz_max_epu32(all, acc[0], acc[1]),
                                                   _mm512_maskz_max_epu32(all, acc[2], acc[3])));
  uint32_t bits = 0;
  for (uint32_t l : lanes) bits = std::max(bits, l);
  return amax_from_bits(bits, nonfinite);
}

// clamp(nearbyint(x * inv), -128, 127) as int32 lanes (those of m).
// maskz forms throughout: GCC 12's unmasked forms read an undefined register
// (-Wuninitialized), and masked tails need them anyway.
QLOOM_I8Q_AVX512 inline __m512i codes16(__mmask16 m, __m512 v, __m512 inv) {
  __m512 t = _mm512_maskz_mul_ps(m, v, inv);
  t = _mm512_maskz_roundscale_ps(m, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  t = _mm512_maskz_min_ps(m, _mm512_maskz_max_ps(m, t, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
  return _mm512_maskz_cvtps_epi32(m, t);
}

QLOOM_I8Q_AVX512 bool quantize_row_avx512(const float* x, int64_t n, float inv, int8_t* codes) {
  const __m512 vinv = _mm512_set1_ps(inv);
  // After the two in-lane packs, 128-bit lane L holds dwords a_L b_L c_L d_L
  // (four codes each): this gathers a0-3, b0-3, c0-3, d0-3.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __mmask16 all = 0xFFFF;
  __mmask16 nan = 0;
  int64_t k = 0;
  for (; k + 64 <= n; k += 64) {
    __m512i q[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + k + 16 * j);
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      q[j] = codes16(all, v, vinv);
    }
    // In range already, so the saturating packs are exact.
    const __mmask32 all16 = ~__mmask32{0};  // the packs' masks count int16 lanes
    const __m512i ab = _mm512_maskz_packs_epi32(all16, q[0], q[1]), cd = _mm512_maskz_packs_epi32(all16, q[2], q[3]);
    const __m512i abcd = _mm512_maskz_packs_epi16(~__mmask64{0}, ab, cd);
    _mm512_storeu_si512(codes + k, _mm512_maskz_permutexvar_epi32(all, order, abcd));
  }
  for (; k < n; k += 16) {
    const __mmask16 m = tail_mask(n - k);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
    _mm_mask_storeu_epi8(codes + k, m, _mm512_maskz_cvtepi32_epi8(m, codes16(m, v, vinv)));
  }
  return nan != 0;
}

}  // namespace
#endif  // QLOOM_I8Q_X86

float int8_row_amax(Isa isa, const float* x, int64_t n, bool* nonfinite) {
#ifdef QLOOM_I8Q_X86
  if (isa == Isa::kAvx512) return row_amax_avx512(x, n, nonfinite);
  if (isa == Isa::kAvx2) return row_amax_avx2(x, n, nonfinite);
#endif
  (void)isa;
  return int8_row_amax_ref(x, n, nonfinite);
}

bool int8_quantize_row(Isa isa, const float* x, int64_t n, float inv, int8_t* codes) {
#ifdef QLOOM_I8Q_X86
  if (isa == Isa::kAvx512) return quantize_row_avx512(x, n, inv, codes);
  if (isa == Isa::kAvx2) return quantize_row_avx2(x, n, inv, codes);
#endif
  (void)isa;
  return int8_quantize_row_ref(x, n, inv, codes);
}

}  // namespace qloom::engine::native
