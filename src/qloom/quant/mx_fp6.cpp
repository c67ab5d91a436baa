#include "qloom/quant/mx_fp6.h"

#include <bit>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
#define QLOOM_MX6_AVX2 __attribute__((target("avx2")))
#define QLOOM_MX6_HAVE_AVX2 1
#endif

namespace qloom::quant {
namespace {

constexpr MxElement kFp4{QDtype::kFp4, 2, 1, 2, 1, 6.0f, 0x08};
constexpr MxElement kE2M3{QDtype::kFp6E2M3, 2, 3, 2, 1, 7.5f, 0x20};
constexpr MxElement kE3M2{QDtype::kFp6E3M2, 3, 2, 4, 3, 28.0f, 0x20};

#ifdef QLOOM_MX6_HAVE_AVX2
// RNE of |q| on the format's grid, as a multiple of the binade's quantum
// 2^(max(e, 1 - bias) - mbits); saturate; the code is the bit pattern of
// r * 2^(bias - 127) shifted down (Quark's Pack_fp6 trick), exact because r
// has at most mbits + 1 significant bits and the product stays >= 2^-149.
QLOOM_MX6_AVX2 __m256i fp6_codes8(const MxElement& e, __m256 x, __m256 inv) {
  const __m256 q = _mm256_mul_ps(x, inv);
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), q);
  __m256i ef = _mm256_srli_epi32(_mm256_castps_si256(a), 23);
  ef = _mm256_max_epi32(ef, _mm256_set1_epi32(127 + 1 - e.bias));
  const __m256i qf = _mm256_sub_epi32(ef, _mm256_set1_epi32(e.mbits));  // quantum exponent field
  const __m256 quantum = _mm256_castsi256_ps(_mm256_slli_epi32(qf, 23));
  const __m256 inv_quantum =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), qf), 23));
  __m256 r = _mm256_round_ps(_mm256_mul_ps(a, inv_quantum), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_min_ps(_mm256_mul_ps(r, quantum), _mm256_set1_ps(e.max_norm));
  const __m256 shifted = _mm256_mul_ps(r, _mm256_set1_ps(std::ldexp(1.0f, e.bias - 127)));
  const __m256i mag = _mm256_srli_epi32(_mm256_castps_si256(shifted), 23 - e.mbits);
  const __m256i neg = _mm256_srli_epi32(_mm256_castps_si256(q), 31);
  const __m256i nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(mag, _mm256_setzero_si256()), _mm256_set1_epi32(-1));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(neg, nonzero), 5);
  return _mm256_or_si256(mag, sign);
}

QLOOM_MX6_AVX2 void encode_fp6_avx2(const MxElement& e, const float* x, float inv_scale, uint8_t* out, size_t n) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = fp6_codes8(e, _mm256_loadu_ps(x + i), inv);
    const __m256i b = fp6_codes8(e, _mm256_loadu_ps(x + i + 8), inv);
    const __m256i c = fp6_codes8(e, _mm256_loadu_ps(x + i + 16), inv);
    const __m256i d = fp6_codes8(e, _mm256_loadu_ps(x + i + 24), inv);
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packus_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i < n; ++i) out[i] = mx_encode_ref(e, x[i] * inv_scale);
}
#endif

}  // namespace

bool is_mx_element(QDtype d) { return d == QDtype::kFp4 || d == QDtype::kFp6E2M3 || d == QDtype::kFp6E3M2; }

const MxElement& mx_element(QDtype d) {
  switch (d) {
    case QDtype::kFp4: return kFp4;
    case QDtype::kFp6E2M3: return kE2M3;
    case QDtype::kFp6E3M2: return kE3M2;
    default: break;
  }
  throw Error(ErrorKind::kInternal, "", quant_dtype_name(d), "not an OCP MX element format", "");
}

uint8_t mx_encode_ref(const MxElement& e, float q) {
  uint8_t c = 0;
  switch (e.dtype) {
    case QDtype::kFp6E2M3: c = float_to_fp6_e2m3(q); break;
    case QDtype::kFp6E3M2: c = float_to_fp6_e3m2(q); break;
    default: c = float_to_fp4_e2m1(q); break;
  }
  // fake_quantize_element returns +0.0 for a zero mantissa: no negative zero.
  if ((c & static_cast<uint8_t>(e.sign_bit - 1)) == 0) c = 0;
  return c;
}

float mx_decode(const MxElement& e, uint8_t code) {
  switch (e.dtype) {
    case QDtype::kFp6E2M3: return fp6_e2m3_to_float(code);
    case QDtype::kFp6E3M2: return fp6_e3m2_to_float(code);
    default: return fp4_e2m1_to_float(code);
  }
}

void mx_encode_fp6_block(const MxElement& e, const float* x, float inv_scale, uint8_t* out, size_t n, bool avx2) {
#ifdef QLOOM_MX6_HAVE_AVX2
  if (avx2 && e.dtype != QDtype::kFp4) return encode_fp6_avx2(e, x, inv_scale, out, n);
#endif
  (void)avx2;
  for (size_t i = 0; i < n; ++i) out[i] = mx_encode_ref(e, x[i] * inv_scale);
}

}  // namespace qloom::quant
