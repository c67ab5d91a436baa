// Activation quantizers of the bf16 dot-product family (contract:
// bf16dot_act.h): a scalar reference and AVX2 / AVX-512 versions giving the
// same bits. The SIMD versions round to the e4m3 grid directly in fp32:
// |v| >= 2^-6 (e4m3 normals) keeps 3 mantissa bits, round to nearest even on
// the bit pattern; |v| < 2^-6 (e4m3 subnormals, quantum 2^-9) is rounded by
// adding and subtracting 2^14, whose float quantum is 2^-9 (RNE, as the
// environment is the IEEE default). |v| <= 448 after the clamp, so nothing
// rounds past the largest code.
#include "qloom/engine/native/bf16dot_act.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "qloom/core/float_codec.h"

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
#define QLOOM_ACT_AVX2 __attribute__((target("avx2")))
#define QLOOM_ACT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2")))
#endif

namespace qloom::engine::native::bf16dot {

uint16_t bf16_code(float x) { return float_to_bf16(x); }

uint16_t fp8_code_bf16(float x, float scale) {
  const float v = std::clamp(x / scale, -kFp8Max, kFp8Max);  // NaN passes through
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(fp8_e4m3_to_float(float_to_fp8_e4m3(v))) >> 16);
}

float fp8_dynamic_scale(float amax) {
  const float s = amax / kFp8Max;
  return s == 0.0f ? kDynamicScaleEps : s;
}

namespace {

// Row max |x|; false when the row holds NaN or inf.
bool amax_scalar(const float* x, int64_t n, float* amax) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
    m = std::max(m, std::fabs(x[i]));
  }
  *amax = m;
  return true;
}

void encode_scalar(ActCode kind, const float* x, int64_t n, float s, uint16_t* codes, int64_t from) {
  for (int64_t i = from; i < n; ++i) codes[i] = kind == ActCode::kBf16 ? bf16_code(x[i]) : fp8_code_bf16(x[i], s);
}

#if defined(__x86_64__)

// ---- AVX-512 ----------------------------------------------------------------------

QLOOM_ACT_AVX512 inline __m512i fp8_lanes512(__m512 x, __m512 s) {
  const __m512 v = _mm512_max_ps(_mm512_set1_ps(-kFp8Max), _mm512_min_ps(_mm512_set1_ps(kFp8Max), _mm512_div_ps(x, s)));
  const __m512i vb = _mm512_castps_si512(v);
  const __m512i ab = _mm512_and_si512(vb, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512 a = _mm512_castsi512_ps(ab);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(ab, 20), _mm512_set1_epi32(1));
  const __m512i normal = _mm512_and_si512(_mm512_add_epi32(ab, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF), lsb)),
                                          _mm512_set1_epi32(static_cast<int>(0xFFF00000u)));
  const __m512 sub = _mm512_sub_ps(_mm512_add_ps(a, _mm512_set1_ps(0x1p14f)), _mm512_set1_ps(0x1p14f));
  __m512i r = _mm512_mask_mov_epi32(normal, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p-6f), _CMP_LT_OQ),
                                    _mm512_castps_si512(sub));
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC00000));
  r = _mm512_or_si512(r, _mm512_and_si512(vb, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  return _mm512_srli_epi32(r, 16);
}

QLOOM_ACT_AVX512 inline __m512i bf16_lanes512(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
  const __m512i quiet = _mm512_srli_epi32(_mm512_or_si512(b, _mm512_set1_epi32(0x400000)), 16);
  const __m512i ab = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
  return _mm512_mask_mov_epi32(rounded, _mm512_cmpgt_epi32_mask(ab, _mm512_set1_epi32(0x7F800000)), quiet);
}

QLOOM_ACT_AVX512 bool amax_avx512(const float* x, int64_t n, float* amax) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), max_finite = _mm512_set1_epi32(0x7F7FFFFF);
  __m512 m = _mm512_setzero_ps();
  __mmask16 bad = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(k, x + i)), abs_mask);
    bad |= _mm512_cmpgt_epi32_mask(a, max_finite);
    m = _mm512_max_ps(m, _mm512_castsi512_ps(a));
  }
  if (bad) return false;
  alignas(64) float t[16];
  _mm512_store_ps(t, m);
  *amax = *std::max_element(t, t + 16);
  return true;
}

QLOOM_ACT_AVX512 void encode_avx512(ActCode kind, const float* x, int64_t n, float s, uint16_t* codes) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    const __m512i c = kind == ActCode::kBf16 ? bf16_lanes512(v) : fp8_lanes512(v, sv);
    _mm512_mask_cvtepi32_storeu_epi16(codes + i, k, c);
  }
}

// ---- AVX2 -------------------------------------------------------------------------

QLOOM_ACT_AVX2 inline __m256i fp8_lanes256(__m256 x, __m256 s) {
  const __m256 v = _mm256_max_ps(_mm256_set1_ps(-kFp8Max), _mm256_min_ps(_mm256_set1_ps(kFp8Max), _mm256_div_ps(x, s)));
  const __m256i vb = _mm256_castps_si256(v);
  const __m256i ab = _mm256_and_si256(vb, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256 a = _mm256_castsi256_ps(ab);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(ab, 20), _mm256_set1_epi32(1));
  const __m256i normal = _mm256_and_si256(_mm256_add_epi32(ab, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), lsb)),
                                          _mm256_set1_epi32(static_cast<int>(0xFFF00000u)));
  const __m256 sub = _mm256_sub_ps(_mm256_add_ps(a, _mm256_set1_ps(0x1p14f)), _mm256_set1_ps(0x1p14f));
  __m256 r = _mm256_blendv_ps(_mm256_castsi256_ps(normal), sub, _mm256_cmp_ps(a, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ));
  r = _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i sign = _mm256_and_si256(vb, _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_srli_epi32(_mm256_or_si256(_mm256_castps_si256(r), sign), 16);
}

QLOOM_ACT_AVX2 inline __m256i bf16_lanes256(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), 16);
  const __m256i quiet = _mm256_srli_epi32(_mm256_or_si256(b, _mm256_set1_epi32(0x400000)), 16);
  const __m256i ab = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

QLOOM_ACT_AVX2 bool amax_avx2(const float* x, int64_t n, float* amax) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), max_finite = _mm256_set1_epi32(0x7F7FFFFF);
  __m256 m = _mm256_setzero_ps();
  __m256i bad = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x + i)), abs_mask);
    bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(a, max_finite));
    m = _mm256_max_ps(m, _mm256_castsi256_ps(a));
  }
  if (!_mm256_testz_si256(bad, bad)) return false;
  alignas(32) float t[8];
  _mm256_store_ps(t, m);
  float tail = 0.0f;
  if (!amax_scalar(x + i, n - i, &tail)) return false;
  *amax = std::max(*std::max_element(t, t + 8), tail);
  return true;
}

QLOOM_ACT_AVX2 void encode_avx2(ActCode kind, const float* x, int64_t n, float s, uint16_t* codes) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i c = kind == ActCode::kBf16 ? bf16_lanes256(v) : fp8_lanes256(v, sv);
    // Lanes hold 0..0xFFFF, so the unsigned saturating pack is exact.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(c, c), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm256_castsi256_si128(packed));
  }
  encode_scalar(kind, x, n, s, codes, i);
}

#endif  // __x86_64__

}  // namespace

bool quantize_row(Isa isa, ActCode kind, const float* x, int64_t n, float static_scale, uint16_t* codes,
                  float* scale) {
  float s = kind == ActCode::kBf16 ? 1.0f : static_scale;
  if (n % 2) codes[n] = 0;
  if (kind == ActCode::kFp8Dynamic) {
    float amax = 0.0f;
    bool ok;
#if defined(__x86_64__)
    if (isa == Isa::kAvx512) ok = amax_avx512(x, n, &amax);
    else if (isa == Isa::kAvx2) ok = amax_avx2(x, n, &amax);
    else
#endif
      ok = amax_scalar(x, n, &amax);
    if (!ok) return false;
    s = fp8_dynamic_scale(amax);
  }
  *scale = s;
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return encode_avx512(kind, x, n, s, codes), true;
  if (isa == Isa::kAvx2) return encode_avx2(kind, x, n, s, codes), true;
#endif
  (void)isa;
  encode_scalar(kind, x, n, s, codes, 0);
  return true;
}

}  // namespace qloom::engine::native::bf16dot
