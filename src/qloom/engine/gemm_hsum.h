// The last steps of the canonical GEMV summation tree (gemm_dispatch.h):
// 16 (or 8) lane partial sums reduced in one fixed order, shared by the fp32
// GEMM kernels (gemm_avx2.cpp, gemm_avx512.cpp) and the packed 4-bit native
// kernels, whose results must equal theirs bit for bit. Include only under
// `#if defined(__x86_64__)`, after core/x86_intrinsics.h.
#pragma once

namespace qloom::engine::detail {

// s[i] = v[i] + v[i+4], then (s0 + s2) + (s1 + s3).
__attribute__((target("avx2,fma"))) inline float canonical_hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// t[i] = v[i] + v[i+8], then canonical_hsum8(t). maskz forms: GCC 12's
// unmasked intrinsics read an undefined register (core/x86_intrinsics.h).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) inline float canonical_hsum16(__m512 v) {
  const __m512 s = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(0xFFFF, v, v, 0x4E));
  const __m256 h = _mm512_maskz_extractf32x8_ps(0xFF, s, 0);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

}  // namespace qloom::engine::detail
