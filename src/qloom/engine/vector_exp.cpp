#include "qloom/engine/vector_exp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "qloom/core/convert.h"

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
#endif

namespace qloom::engine {
namespace {

constexpr float kLo = -104.0f, kHi = 89.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693147182464599609375f;    // float(ln 2)
constexpr float kLn2Lo = -1.904654323148236e-09f;     // ln 2 - kLn2Hi
// Cephes expf's minimax P (r² coefficients of exp(r) - 1 - r).
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

float pow2(int32_t k) {  // 2^k for -126 <= k <= 127
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

#if defined(__x86_64__)
#define QLOOM_EXP_AVX2 __attribute__((target("avx2,fma")))
#define QLOOM_EXP_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))

QLOOM_EXP_AVX2 void exp_avx2(const float* x, float* y, int64_t n) {
  const __m256 lo = _mm256_set1_ps(kLo), hi = _mm256_set1_ps(kHi), l2e = _mm256_set1_ps(kLog2e);
  const __m256 nl2hi = _mm256_set1_ps(-kLn2Hi), nl2lo = _mm256_set1_ps(-kLn2Lo), one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 c = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(c, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(k, nl2hi, c);
    r = _mm256_fmadd_ps(k, nl2lo, r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kP0), r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), one);
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(e, v, nan));
  }
  if (i < n) {  // the tail through the same body, padded with zeros
    alignas(32) float t[8] = {};
    std::copy(x + i, x + n, t);
    exp_avx2(t, t, 8);
    std::copy(t, t + (n - i), y + i);
  }
}

QLOOM_EXP_AVX512 void exp_avx512(const float* x, float* y, int64_t n) {
  const __m512 lo = _mm512_set1_ps(kLo), hi = _mm512_set1_ps(kHi), l2e = _mm512_set1_ps(kLog2e);
  const __m512 nl2hi = _mm512_set1_ps(-kLn2Hi), nl2lo = _mm512_set1_ps(-kLn2Lo), one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    // The tail lanes are masked off (loaded as 0, not stored): every lane
    // computes what the scalar path does.
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    const __m512 c = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(c, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(k, nl2hi, c);
    r = _mm512_fmadd_ps(k, nl2lo, r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kP0), r, _mm512_set1_ps(kP1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), one);
    const __m512i ki = _mm512_cvtps_epi32(k);
    const __m512i k1 = _mm512_srai_epi32(ki, 1), k2 = _mm512_sub_epi32(ki, k1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
    const __m512 e = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    _mm512_mask_storeu_ps(y + i, live, _mm512_mask_blend_ps(nan, e, v));
  }
}
#endif

}  // namespace

float exp_f32_scalar(float x) {
  if (std::isnan(x)) return x;
  const float c = std::min(std::max(x, kLo), kHi);
  const float k = std::nearbyint(c * kLog2e);
  float r = std::fma(k, -kLn2Hi, c);
  r = std::fma(k, -kLn2Lo, r);
  float p = std::fma(kP0, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  p = std::fma(p, r * r, r) + 1.0f;
  const int32_t ki = static_cast<int32_t>(k);
  const int32_t k1 = ki >> 1, k2 = ki - k1;  // arithmetic shift: floor(k / 2)
  return (p * pow2(k1)) * pow2(k2);
}

void exp_f32(const float* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (isa_supported(Isa::kAvx512)) return exp_avx512(x, y, n);
  if (isa_supported(Isa::kAvx2)) return exp_avx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32_scalar(x[i]);
}

}  // namespace qloom::engine
