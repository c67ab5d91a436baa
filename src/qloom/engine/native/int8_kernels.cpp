// Scalar and AVX2 tile kernels of the native int8 linear (contract and
// layouts: int8_kernels.h). Both take int8 activation codes.
#include "qloom/engine/native/int8_kernels.h"

#include <cstring>

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
// No "fma": the epilogue's multiply and add must round separately.
#define QLOOM_I8K_AVX2 __attribute__((target("avx2,f16c")))
#define QLOOM_I8K_X86 1
#endif

namespace qloom::engine::native {

void int8_tile_scalar(const Int8Tile& t) {
  const int width = t.nb * 16;  // outputs (4-byte groups) per quad
  for (int i = 0; i < t.mr; ++i) {
    const int8_t* a = reinterpret_cast<const int8_t*>(t.act + i * t.act_ld);
    int32_t acc[kInt8PanelOuts] = {};
    for (int64_t q = 0; q < t.kq; ++q) {
      const int8_t* aq = a + 4 * q;
      const int8_t* wq = t.w + q * width * 4;
      for (int j = 0; j < width; ++j)
        acc[j] += aq[0] * wq[4 * j] + aq[1] * wq[4 * j + 1] + aq[2] * wq[4 * j + 2] + aq[3] * wq[4 * j + 3];
    }
    for (int j = 0; j < t.n; ++j) t.y[i * t.ldy + j] = int8_epilogue(acc[j], t.sx[i], t.sw[j], t.bias, j);
  }
}

#ifdef QLOOM_I8K_X86
namespace {

// R rows (1 or 2) x G groups of 4 outputs (G <= 4: 2·4 accumulators, 2 row
// vectors, a weight vector and products fit the 16 ymm; with 6 GCC spills). Per quad, a group's 16
// bytes (4 outputs x 4 k) widen to 16 int16 and vpmaddwd multiplies them with
// the row's four codes repeated, summing pairs into int32 lanes: lane 2c + h
// holds output c's products at k = 4q + 2h, 4q + 2h + 1. Exact: every pair
// sum is at most 2·128·128 in magnitude (vpmaddubsw, which saturates to
// int16, is not used).
template <int R, int G>
QLOOM_I8K_AVX2 void avx2_chunk(const Int8Tile& t, int i0, int g0) {
  const int8_t* w = t.w + 16 * g0;
  const int64_t stride = int64_t{t.nb} * 64;
  __m256i acc[R][G];  // (#pragma GCC unroll keeps it in registers, as in the VNNI kernel)
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_si256();
  for (int64_t q = 0; q < t.kq; ++q) {
    __m256i b[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, t.act + (i0 + r) * t.act_ld + 4 * q, 4);
      b[r] = _mm256_cvtepi8_epi16(_mm_set1_epi32(quad));
    }
    const int8_t* wq = w + q * stride;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wq + 16 * g)));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][g] = _mm256_add_epi32(acc[r][g], _mm256_madd_epi16(wv, b[r]));
    }
  }
  for (int r = 0; r < R; ++r) {
    const int i = i0 + r;
    for (int g = 0; g < G; ++g) {
      alignas(32) int32_t lane[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane), acc[r][g]);
      for (int c = 0; c < 4; ++c) {
        const int j = 4 * (g0 + g) + c;
        if (j < t.n) t.y[i * t.ldy + j] = int8_epilogue(lane[2 * c] + lane[2 * c + 1], t.sx[i], t.sw[j], t.bias, j);
      }
    }
  }
}

template <int R>
QLOOM_I8K_AVX2 void avx2_rows(const Int8Tile& t, int i0) {
  const int groups = (t.n + 3) / 4;
  for (int g0 = 0; g0 < groups; g0 += 4) {
    switch (groups - g0 >= 4 ? 4 : groups - g0) {
      case 1: avx2_chunk<R, 1>(t, i0, g0); break;
      case 2: avx2_chunk<R, 2>(t, i0, g0); break;
      case 3: avx2_chunk<R, 3>(t, i0, g0); break;
      default: avx2_chunk<R, 4>(t, i0, g0); break;
    }
  }
}

}  // namespace

void int8_tile_avx2(const Int8Tile& t) {
  int i = 0;
  for (; i + 2 <= t.mr; i += 2) avx2_rows<2>(t, i);
  if (i < t.mr) avx2_rows<1>(t, i);
}

#else

void int8_tile_avx2(const Int8Tile& t) { int8_tile_scalar(t); }

#endif  // QLOOM_I8K_X86

}  // namespace qloom::engine::native
