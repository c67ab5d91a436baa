// AVX512_BF16 kernel of the bf16 dot-product family: vdpbf16ps on register
// tiles of up to 6 rows x 4 panels (64 outputs; 24 zmm accumulators), W
// panels streamed once per row tile, the activation pair of each row
// broadcast from memory. One vdpbf16ps per (row, panel, k pair) is exactly
// the canonical order of bf16dot_kernels.h: each lane is one output's chain.
#include "qloom/engine/native/bf16dot_kernels.h"

#if defined(__x86_64__)

#include <array>

#include "qloom/core/x86_intrinsics.h"

#define QLOOM_BF16DOT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))

namespace qloom::engine::native::bf16dot {
namespace {

constexpr int kMaxN = 4;  // panels per tile

// Writes one row's 16 outputs of panel q: y = fma(acc, sx * sw, bias) (or
// acc * (sx * sw)), NaN made canonical; lanes past `out` are not stored.
QLOOM_BF16DOT_AVX512 inline void store_outputs(const Args& a, int64_t row, int64_t q, __m512 acc) {
  const int64_t o = q * kPanel;
  const int64_t left = a.out - o;
  const __mmask16 k = left >= kPanel ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  const __m512 s = _mm512_mul_ps(_mm512_set1_ps(a.sx[row]), _mm512_loadu_ps(a.sw + o));
  __m512 y = a.bias ? _mm512_fmadd_ps(acc, s, _mm512_maskz_loadu_ps(k, a.bias + o)) : _mm512_mul_ps(acc, s);
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  _mm512_mask_storeu_ps(a.y + row * a.out + o, k, y);
}

// Rows of row tile t (R of them) x panels q .. q+N-1, over every k pair.
template <int R, int N>
QLOOM_BF16DOT_AVX512 void tile(const Args& a, int64_t q, int64_t t) {
  const int64_t pairs = a.pairs;
  const uint32_t* x = a.xq + t * a.mr * pairs;
  const uint32_t* w = a.w + q * pairs * kPanel;
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh wv[N];
    for (int n = 0; n < N; ++n)
      wv[n] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + (n * pairs + p) * kPanel));
    for (int r = 0; r < R; ++r) {
      const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(x[p * R + r])));
      for (int n = 0; n < N; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], wv[n], xb);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) store_outputs(a, t * a.mr + r, q + n, acc[r][n]);
}

using TileFn = void (*)(const Args&, int64_t, int64_t);

template <int R>
constexpr std::array<TileFn, kMaxN> row_of_tiles() {
  return {&tile<R, 1>, &tile<R, 2>, &tile<R, 3>, &tile<R, 4>};
}

constexpr std::array<std::array<TileFn, kMaxN>, kMrAvx512> kTiles = {
    row_of_tiles<1>(), row_of_tiles<2>(), row_of_tiles<3>(), row_of_tiles<4>(), row_of_tiles<5>(), row_of_tiles<6>()};

}  // namespace

bool avx512bf16_kernel_built() { return true; }

void run_avx512bf16(const Args& a, int64_t q0, int64_t q1) {
  IeeeEnv env;
  const int64_t tiles = (a.rows + a.mr - 1) / a.mr;
  for (int64_t q = q0; q < q1; q += kMaxN) {
    const int64_t n = q1 - q < kMaxN ? q1 - q : kMaxN;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t rt = a.rows - t * a.mr < a.mr ? a.rows - t * a.mr : a.mr;
      kTiles[static_cast<size_t>(rt - 1)][static_cast<size_t>(n - 1)](a, q, t);
    }
  }
}

}  // namespace qloom::engine::native::bf16dot

#else

namespace qloom::engine::native::bf16dot {
bool avx512bf16_kernel_built() { return false; }
void run_avx512bf16(const Args&, int64_t, int64_t) {}
}  // namespace qloom::engine::native::bf16dot

#endif
