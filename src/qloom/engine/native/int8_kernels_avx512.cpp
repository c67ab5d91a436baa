// AVX-512 VNNI tile kernel of the native int8 linear (contract and layouts:
// int8_kernels.h): an MR x NB register tile of vpdpbusd accumulators (up to
// 8 rows x 3 zmm = 8 x 48 outputs: 24 accumulators + 3 weight vectors + 1
// broadcast of the 32 zmm). Per quad of k it loads NB 64-byte weight lines
// (16 outputs x 4 k, s8) and, per row, broadcasts the row's four u8 codes
// (q_x + 128); vpdpbusd adds the four u8 x s8 products into each output's
// int32 lane. The epilogue subtracts wsum = 128 · Σ_k q_w, converts and scales
// with maskz (builtin, never contracted to FMA) operations in int8_epilogue's
// order. (#pragma GCC unroll everywhere: without it GCC 12 keeps the
// accumulator array in memory and copies it every iteration.)
#include "qloom/engine/native/int8_kernels.h"

#if defined(__x86_64__)

#include <cstring>

#include "qloom/core/x86_intrinsics.h"

#define QLOOM_I8K_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,f16c")))

namespace qloom::engine::native {
namespace {

QLOOM_I8K_VNNI inline __mmask16 lane_mask(int left) {
  if (left <= 0) return 0;
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// Output block j of row i: y = ((float)(acc - wsum) · sx) · sw (+ bias).
QLOOM_I8K_VNNI inline void store_block(const Int8Tile& t, int i, int j, __m512i acc) {
  const __mmask16 m = lane_mask(t.n - 16 * j);
  if (m == 0) return;
  const __m512i ws = _mm512_loadu_si512(t.wsum + 16 * j);
  __m512 v = _mm512_maskz_cvtepi32_ps(m, _mm512_sub_epi32(acc, ws));
  v = _mm512_maskz_mul_ps(m, v, _mm512_set1_ps(t.sx[i]));
  v = _mm512_maskz_mul_ps(m, v, _mm512_loadu_ps(t.sw + 16 * j));
  if (t.bias) v = _mm512_maskz_add_ps(m, v, _mm512_maskz_loadu_ps(m, t.bias + 16 * j));
  _mm512_mask_storeu_ps(t.y + i * t.ldy + 16 * j, m, v);
}

template <int MR, int NB>
QLOOM_I8K_VNNI void vnni_tile(const Int8Tile& t) {
  const bool resume = t.part && !t.first, pause = t.part && !t.last;
  __m512i acc[MR][NB];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < NB; ++j)
      acc[i][j] = resume ? _mm512_loadu_si512(t.part + i * kInt8PanelOuts + 16 * j) : _mm512_setzero_si512();
  const uint8_t* a[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) a[i] = t.act + i * t.act_ld;
  const int8_t* w = t.w;
  for (int64_t q = 0; q < t.kq; ++q, w += 64 * NB) {
    __m512i wv[NB];
#pragma GCC unroll 3
    for (int j = 0; j < NB; ++j) wv[j] = _mm512_loadu_si512(w + 64 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      int32_t quad;
      std::memcpy(&quad, a[i] + 4 * q, 4);
      const __m512i b = _mm512_set1_epi32(quad);
#pragma GCC unroll 3
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], b, wv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 3
    for (int j = 0; j < NB; ++j) {
      if (pause) {
        _mm512_storeu_si512(t.part + i * kInt8PanelOuts + 16 * j, acc[i][j]);
      } else {
        store_block(t, i, j, acc[i][j]);
      }
    }
}

using TileFn = void (*)(const Int8Tile&);

template <int MR>
constexpr TileFn pick(int nb) {
  return nb == 1 ? &vnni_tile<MR, 1> : nb == 2 ? &vnni_tile<MR, 2> : &vnni_tile<MR, 3>;
}

static_assert(kInt8PanelBlocks == 3 && kInt8RowBlock == 8, "the dispatch below covers 8 x 3");

}  // namespace

void int8_tile_avx512_vnni(const Int8Tile& t) {
  TileFn f = nullptr;
  switch (t.mr) {
    case 1: f = pick<1>(t.nb); break;
    case 2: f = pick<2>(t.nb); break;
    case 3: f = pick<3>(t.nb); break;
    case 4: f = pick<4>(t.nb); break;
    case 5: f = pick<5>(t.nb); break;
    case 6: f = pick<6>(t.nb); break;
    case 7: f = pick<7>(t.nb); break;
    default: f = pick<8>(t.nb); break;
  }
  f(t);
}

}  // namespace qloom::engine::native

#else

namespace qloom::engine::native {
// Never selected off x86-64 (cpu_has_avx512_vnni() is false there).
void int8_tile_avx512_vnni(const Int8Tile&) {}
}  // namespace qloom::engine::native

#endif
