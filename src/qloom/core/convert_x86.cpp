// x86-64 SIMD kernels for convert.h. Nothing here is compiled with global
// -m flags: each function carries its own target attribute and is called only
// when the CPU supports it (see convert.cpp). Every kernel is an exact
// re-implementation of the scalar reference in float_codec.h using integer
// operations (or F16C, whose rounding and NaN handling match the reference),
// so the result never depends on the MXCSR rounding / DAZ / FTZ state.
// Tails shorter than a vector go through the scalar reference (AVX2) or masked
// loads and stores (AVX-512).
#include "qloom/core/convert_x86.h"

#if defined(__x86_64__)

#include "qloom/core/x86_intrinsics.h"

#include <array>
#include <bit>
#include <cstring>

#include "qloom/core/float_codec.h"

#define QLOOM_TARGET_AVX2 __attribute__((target("avx2,f16c,fma")))
#define QLOOM_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c,fma")))

namespace qloom::detail {
namespace {

inline uint16_t load_u16(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_u16(unsigned char* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

// f32 bit patterns of the e4m3 subnormals 0..7 (code = mantissa), indexed by
// the low 3 bits of the code.
constexpr std::array<int, 8> kE4M3Subnormals = [] {
  std::array<int, 8> t{};
  for (uint8_t k = 0; k < 8; ++k) t[k] = std::bit_cast<int>(fp8_e4m3_to_float(k));
  return t;
}();

constexpr int kAbsMask = 0x7FFFFFFF;
constexpr int kInfBits = 0x7F800000;
constexpr int kQuietBit = 0x00400000;
constexpr int kCanonicalNan = 0x7FC00000;

// ============================== AVX2 =========================================

// bf16 bits already shifted into the top half of each lane -> quiet NaNs.
QLOOM_TARGET_AVX2 inline __m256i quiet_nans_avx2(__m256i v) {
  const __m256i abs = _mm256_and_si256(v, _mm256_set1_epi32(kAbsMask));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(kInfBits));
  return _mm256_or_si256(v, _mm256_and_si256(nan, _mm256_set1_epi32(kQuietBit)));
}

// f32 bits -> bf16 code in the low 16 bits of each lane (upper bits zero).
QLOOM_TARGET_AVX2 inline __m256i round_to_bf16_avx2(__m256i v) {
  const __m256i abs = _mm256_and_si256(v, _mm256_set1_epi32(kAbsMask));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(kInfBits));
  const __m256i hi = _mm256_srli_epi32(v, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  // Ties to even: add 0x7FFF plus the lowest kept bit, then truncate. The sum
  // cannot carry out of bit 31 (|x| <= 0x7F800000 here).
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(v, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, qnan, nan);
}

// Vector form of encode_minifloat for e4m3fn (saturating); the lane's code in
// bits 0-7, upper bits zero.
QLOOM_TARGET_AVX2 inline __m256i encode_e4m3_avx2(__m256i v) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i abs = _mm256_and_si256(v, _mm256_set1_epi32(kAbsMask));
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(v, 24), _mm256_set1_epi32(0x80));
  const __m256i fexp = _mm256_max_epi32(_mm256_srli_epi32(abs, 23), one);  // denormals: E = -126
  // Significand with the implicit bit (fexp - 1 removes the exponent field
  // except for one unit, which is the implicit bit; denormals keep theirs).
  const __m256i mant = _mm256_sub_epi32(abs, _mm256_slli_epi32(_mm256_sub_epi32(fexp, one), 23));
  // dexp = E - emin with emin = -6, i.e. fexp - 121.
  const __m256i dexp = _mm256_sub_epi32(fexp, _mm256_set1_epi32(121));
  const __m256i et_off = _mm256_max_epi32(dexp, _mm256_setzero_si256());
  // shift = 23 - man_bits + (et - E) = 20 + et_off - dexp, capped at 31.
  const __m256i shift = _mm256_min_epi32(
      _mm256_add_epi32(_mm256_set1_epi32(20), _mm256_sub_epi32(et_off, dexp)),
      _mm256_set1_epi32(31));
  __m256i r = _mm256_srlv_epi32(mant, shift);
  const __m256i rem =
      _mm256_and_si256(mant, _mm256_sub_epi32(_mm256_sllv_epi32(one, shift), one));
  const __m256i half = _mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one));
  const __m256i up = _mm256_or_si256(
      _mm256_cmpgt_epi32(rem, half),
      _mm256_and_si256(_mm256_cmpeq_epi32(rem, half),
                       _mm256_cmpeq_epi32(_mm256_and_si256(r, one), one)));
  r = _mm256_sub_epi32(r, up);  // up is all-ones (-1) where rounding up
  __m256i code = _mm256_add_epi32(_mm256_slli_epi32(et_off, 3), r);
  code = _mm256_min_epi32(code, _mm256_set1_epi32(0x7E));  // saturate, incl. inf
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(kInfBits));
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7F), nan);
  return _mm256_or_si256(code, sign);
}

// e4m3 codes (zero-extended to 32 bits) -> f32 bits.
QLOOM_TARGET_AVX2 inline __m256i decode_e4m3_avx2(__m256i c) {
  const __m256i sub_lut = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kE4M3Subnormals.data()));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
  const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7F));
  // Normal: exponent field e -> e - 7 + 127, i.e. add 120 to the exponent.
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23));
  const __m256i sub = _mm256_permutevar8x32_epi32(sub_lut, mag);  // uses mag & 7
  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag);
  __m256i r = _mm256_blendv_epi8(normal, sub, is_sub);
  const __m256i is_nan = _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(kCanonicalNan), is_nan);
  return _mm256_or_si256(r, sign);
}

}  // namespace

QLOOM_TARGET_AVX2 void bf16_to_f32_avx2(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
    const __m256i lo = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16);
    const __m256i hi = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), quiet_nans_avx2(lo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 8), quiet_nans_avx2(hi));
  }
  for (; i < n; ++i) out[i] = bf16_to_float(load_u16(p + 2 * i));
}

QLOOM_TARGET_AVX2 void f32_to_bf16_avx2(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = round_to_bf16_avx2(_mm256_castps_si256(_mm256_loadu_ps(in + i)));
    const __m256i b = round_to_bf16_avx2(_mm256_castps_si256(_mm256_loadu_ps(in + i + 8)));
    // packus works per 128-bit lane: [a0..3 b0..3 | a4..7 b4..7]; fix the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 2 * i), packed);
  }
  for (; i < n; ++i) store_u16(q + 2 * i, float_to_bf16(in[i]));
}

QLOOM_TARGET_AVX2 void f16_to_f32_avx2(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i + 16));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h0));
    _mm256_storeu_ps(out + i + 8, _mm256_cvtph_ps(h1));
  }
  for (; i < n; ++i) out[i] = f16_to_float(load_u16(p + 2 * i));
}

QLOOM_TARGET_AVX2 void f32_to_f16_avx2(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(in + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 2 * i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 2 * i + 16), b);
  }
  for (; i < n; ++i) store_u16(q + 2 * i, float_to_f16(in[i]));
}

QLOOM_TARGET_AVX2 void fp8_e4m3_to_f32_avx2(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m256i lo = decode_e4m3_avx2(_mm256_cvtepu8_epi32(b));
    const __m256i hi = decode_e4m3_avx2(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 8), hi);
  }
  for (; i < n; ++i) out[i] = fp8_e4m3_to_float(p[i]);
}

QLOOM_TARGET_AVX2 void f32_to_fp8_e4m3_avx2(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i c0 = encode_e4m3_avx2(_mm256_castps_si256(_mm256_loadu_ps(in + i)));
    const __m256i c1 = encode_e4m3_avx2(_mm256_castps_si256(_mm256_loadu_ps(in + i + 8)));
    const __m256i c2 = encode_e4m3_avx2(_mm256_castps_si256(_mm256_loadu_ps(in + i + 16)));
    const __m256i c3 = encode_e4m3_avx2(_mm256_castps_si256(_mm256_loadu_ps(in + i + 24)));
    // Codes are 0..255, so the saturating packs are plain narrowing. After
    // the two per-lane packs the dwords hold [c0l c1l c2l c3l | c0h c1h c2h c3h].
    const __m256i w01 = _mm256_packs_epi32(c0, c1);
    const __m256i w23 = _mm256_packs_epi32(c2, c3);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), bytes);
  }
  for (; i < n; ++i) q[i] = float_to_fp8_e4m3(in[i]);
}

// ============================= AVX-512 =======================================

namespace {

QLOOM_TARGET_AVX512 inline __mmask16 tail_mask(size_t rem) {
  return static_cast<__mmask16>((1u << rem) - 1u);  // rem < 16
}

QLOOM_TARGET_AVX512 inline __m512i quiet_nans_avx512(__m512i v) {
  const __m512i abs = _mm512_and_si512(v, _mm512_set1_epi32(kAbsMask));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(kInfBits));
  return _mm512_mask_or_epi32(v, nan, v, _mm512_set1_epi32(kQuietBit));
}

QLOOM_TARGET_AVX512 inline __m512i round_to_bf16_avx512(__m512i v) {
  const __m512i abs = _mm512_and_si512(v, _mm512_set1_epi32(kAbsMask));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(kInfBits));
  const __m512i hi = _mm512_srli_epi32(v, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(v, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_or_epi32(rounded, nan, hi, _mm512_set1_epi32(0x40));
}

QLOOM_TARGET_AVX512 inline __m512i encode_e4m3_avx512(__m512i v) {
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i abs = _mm512_and_si512(v, _mm512_set1_epi32(kAbsMask));
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(v, 24), _mm512_set1_epi32(0x80));
  const __m512i fexp = _mm512_max_epi32(_mm512_srli_epi32(abs, 23), one);
  const __m512i mant = _mm512_sub_epi32(abs, _mm512_slli_epi32(_mm512_sub_epi32(fexp, one), 23));
  const __m512i dexp = _mm512_sub_epi32(fexp, _mm512_set1_epi32(121));
  const __m512i et_off = _mm512_max_epi32(dexp, _mm512_setzero_si512());
  const __m512i shift = _mm512_min_epi32(
      _mm512_add_epi32(_mm512_set1_epi32(20), _mm512_sub_epi32(et_off, dexp)),
      _mm512_set1_epi32(31));
  __m512i r = _mm512_srlv_epi32(mant, shift);
  const __m512i rem =
      _mm512_and_si512(mant, _mm512_sub_epi32(_mm512_sllv_epi32(one, shift), one));
  const __m512i half = _mm512_sllv_epi32(one, _mm512_sub_epi32(shift, one));
  const __mmask16 odd = _mm512_test_epi32_mask(r, one);
  const __mmask16 up = _mm512_cmpgt_epi32_mask(rem, half) |
                       (_mm512_cmpeq_epi32_mask(rem, half) & odd);
  r = _mm512_mask_add_epi32(r, up, r, one);
  __m512i code = _mm512_add_epi32(_mm512_slli_epi32(et_off, 3), r);
  code = _mm512_min_epi32(code, _mm512_set1_epi32(0x7E));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(kInfBits));
  code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7F));
  return _mm512_or_si512(code, sign);
}

QLOOM_TARGET_AVX512 inline __m512i decode_e4m3_avx512(__m512i c) {
  const __m512i sub_lut = _mm512_castsi256_si512(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kE4M3Subnormals.data())));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
  const __m512i mag = _mm512_and_si512(c, _mm512_set1_epi32(0x7F));
  __m512i r = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23));
  const __mmask16 is_sub = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8));
  r = _mm512_mask_permutexvar_epi32(r, is_sub, mag, sub_lut);  // mag < 8 in those lanes
  const __mmask16 is_nan = _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F));
  r = _mm512_mask_mov_epi32(r, is_nan, _mm512_set1_epi32(kCanonicalNan));
  return _mm512_or_si512(r, sign);
}

}  // namespace

QLOOM_TARGET_AVX512 void bf16_to_f32_avx512(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
    const __m512i v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    _mm512_storeu_si512(out + i, quiet_nans_avx512(v));
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(k, p + 2 * i);
    const __m512i v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    _mm512_mask_storeu_epi32(out + i, k, quiet_nans_avx512(v));
  }
}

QLOOM_TARGET_AVX512 void f32_to_bf16_avx512(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i r = round_to_bf16_avx512(_mm512_castps_si512(_mm512_loadu_ps(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 2 * i), _mm512_cvtepi32_epi16(r));
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m512i r = round_to_bf16_avx512(_mm512_castps_si512(_mm512_maskz_loadu_ps(k, in + i)));
    _mm512_mask_cvtepi32_storeu_epi16(q + 2 * i, k, r);
  }
}

QLOOM_TARGET_AVX512 void f16_to_f32_avx512(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(k, p + 2 * i);
    _mm512_mask_storeu_ps(out + i, k, _mm512_cvtph_ps(h));
  }
}

QLOOM_TARGET_AVX512 void f32_to_f16_avx512(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 2 * i), h);
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(q + 2 * i, k, h);
  }
}

QLOOM_TARGET_AVX512 void fp8_e4m3_to_f32_avx512(const void* in, float* out, size_t n) {
  const auto* p = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    _mm512_storeu_si512(out + i, decode_e4m3_avx512(_mm512_cvtepu8_epi32(b)));
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m128i b = _mm_maskz_loadu_epi8(k, p + i);
    _mm512_mask_storeu_epi32(out + i, k, decode_e4m3_avx512(_mm512_cvtepu8_epi32(b)));
  }
}

QLOOM_TARGET_AVX512 void f32_to_fp8_e4m3_avx512(const float* in, void* out, size_t n) {
  auto* q = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i c = encode_e4m3_avx512(_mm512_castps_si512(_mm512_loadu_ps(in + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(c));
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m512i c = encode_e4m3_avx512(_mm512_castps_si512(_mm512_maskz_loadu_ps(k, in + i)));
    _mm512_mask_cvtepi32_storeu_epi8(q + i, k, c);
  }
}

}  // namespace qloom::detail

#endif  // __x86_64__
