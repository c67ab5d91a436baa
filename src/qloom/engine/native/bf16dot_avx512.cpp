// AVX512_BF16 kernel of the bf16 dot-product family: vdpbf16ps on register
// tiles of up to 6 rows x 4 panels (64 outputs; 24 zmm accumulators), W
// panels streamed once per row tile, the activation pair of each row
// broadcast. One vdpbf16ps per (row, panel, k pair) is exactly the canonical
// order of bf16dot_kernels.h: each lane is one output's chain. fp8 W is
// widened to bf16 in registers (one row tile) or once per group of panels.
#include "qloom/engine/native/bf16dot_kernels.h"

#if defined(__x86_64__)

#include <array>
#include <utility>
#include <vector>

#include "qloom/core/x86_intrinsics.h"

#define QLOOM_BF16DOT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))

namespace qloom::engine::native::bf16dot {
namespace {

constexpr int kMr = 6;          // rows per tile
constexpr int kMaxN = 4;        // panels per tile
constexpr int kMaxNDecode = 8;  // panels per tile of one (bf16: or two) rows

// 32 fp8 e4m3 codes (never NaN: make() moves NaN codes into the scales)
// -> bf16 patterns of their values times 2^8 (exact), in 6 operations: the
// code sign-extended to 16 bits and shifted left 4 holds the sign in bit 15
// and the 7 magnitude bits in 10..4; or-ing in 0x4000 makes the exponent
// field e + 128 = e - 7 + 127 + 8 (e4m3 bias 7, bf16 bias 127, the 2^8). For
// subnormal codes (e = 0: value m·2^-9, scaled m/2) an 8-entry table takes
// over, and the sign goes back in. The epilogue multiplies the 2^8 back out,
// exactly: every product and partial sum is a multiple of 2^-10 below 2^40,
// so scaling by a power of two commutes with every rounding and no FTZ ever
// applies; the result is bit for bit the unscaled chain's.
QLOOM_BF16DOT_AVX512 inline __m512i widen_fp8(const uint8_t* p) {
  const __m512i c = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  __m512i r = _mm512_ternarylogic_epi32(_mm512_slli_epi16(c, 4), _mm512_set1_epi16(static_cast<short>(0x87F0)),
                                        _mm512_set1_epi16(0x4000), 0xEA);  // (A & B) | C
  const __m512i sub = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                       0x4060, 0x4040, 0x4020, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0);
  r = _mm512_mask_permutexvar_epi16(r, _mm512_testn_epi16_mask(c, _mm512_set1_epi16(0x78)), c, sub);
  return _mm512_ternarylogic_epi32(r, c, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);  // A | (B & C)
}

// Pair row i (= panel offset * pairs + p) of W from a panel's base.
template <bool kFp8>
QLOOM_BF16DOT_AVX512 inline __m512bh load_w(const void* wq, int64_t i) {
  if constexpr (kFp8) return reinterpret_cast<__m512bh>(widen_fp8(static_cast<const uint8_t*>(wq) + i * 2 * kPanel));
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(static_cast<const uint32_t*>(wq) + i * kPanel));
}

// Writes one row's 16 outputs of panel q: y = fma(acc, sx * sw, bias) (or
// acc * (sx * sw)), NaN made canonical; lanes past `out` are not stored.
QLOOM_BF16DOT_AVX512 inline void store_outputs(const Args& a, int64_t row, int64_t q, __m512 acc) {
  const int64_t o = q * kPanel;
  const int64_t left = a.out - o;
  const __mmask16 k = left >= kPanel ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  if (a.w8) acc = _mm512_mul_ps(acc, _mm512_set1_ps(0x1p-8f));  // widen_fp8's 2^8 (exact)
  const __m512 s = _mm512_mul_ps(_mm512_set1_ps(a.sx[row]), _mm512_loadu_ps(a.sw + o));
  __m512 y = a.bias ? _mm512_fmadd_ps(acc, s, _mm512_maskz_loadu_ps(k, a.bias + o)) : _mm512_mul_ps(acc, s);
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  _mm512_mask_storeu_ps(a.y + row * a.out + o, k, y);
}

// Rows row0 .. row0+R-1 x panels q .. q+N-1 (W from wq, panel q's base),
// over every k pair.
template <int R, int N, bool kFp8>
QLOOM_BF16DOT_AVX512 void tile(const Args& a, const void* wq, int64_t q, int64_t row0) {
  const int64_t pairs = a.pairs;
  const uint16_t* x[R];
  for (int r = 0; r < R; ++r) x[r] = a.xq + (row0 + r) * 2 * pairs;
  __m512 acc[R][N];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh wv[N];
    for (int n = 0; n < N; ++n) wv[n] = load_w<kFp8>(wq, n * pairs + p);
    for (int r = 0; r < R; ++r) {
      const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_broadcastd_epi32(_mm_loadu_si32(x[r] + 2 * p)));
      for (int n = 0; n < N; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], wv[n], xb);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < N; ++n) store_outputs(a, row0 + r, q + n, acc[r][n]);
}

using TileFn = void (*)(const Args&, const void*, int64_t, int64_t);

template <int R, bool kFp8, size_t... Ns>
constexpr std::array<TileFn, sizeof...(Ns)> tiles_of(std::index_sequence<Ns...>) {
  return {&tile<R, static_cast<int>(Ns) + 1, kFp8>...};
}
template <int R, bool kFp8>
constexpr auto kN4 = tiles_of<R, kFp8>(std::make_index_sequence<kMaxN>());
template <int R, bool kFp8>
constexpr auto kN8 = tiles_of<R, kFp8>(std::make_index_sequence<kMaxNDecode>());

// [rows - 1][panels - 1]: up to 6 rows x 4 panels, bf16 W / fp8 W.
constexpr std::array<std::array<TileFn, kMaxN>, kMr> kTiles = {
    kN4<1, false>, kN4<2, false>, kN4<3, false>, kN4<4, false>, kN4<5, false>, kN4<6, false>};
constexpr std::array<std::array<TileFn, kMaxN>, kMr> kTilesFp8 = {
    kN4<1, true>, kN4<2, true>, kN4<3, true>, kN4<4, true>, kN4<5, true>, kN4<6, true>};
// Decode: 8 panels, so 8 (16) independent chains hide vdpbf16ps's ~6-cycle
// latency while W streams; fp8 only for one row (the widening's registers).
constexpr std::array<std::array<TileFn, kMaxNDecode>, 2> kDecode = {kN8<1, false>, kN8<2, false>};
constexpr std::array<TileFn, kMaxNDecode> kDecodeFp8 = kN8<1, true>;

const void* panel_base(const Args& a, int64_t q) {
  if (a.w8) return a.w8 + q * a.pairs * 2 * kPanel;
  return a.w + q * a.pairs * kPanel;
}

// One row tile: every panel's W streams once, fp8 widened in registers.
void run_single_tile(const Args& a, int64_t q0, int64_t q1) {
  const size_t r = static_cast<size_t>(a.rows - 1);
  const bool fp8 = a.w8 != nullptr;
  const int64_t group = a.rows == 1 || (a.rows == 2 && !fp8) ? kMaxNDecode : kMaxN;
  for (int64_t q = q0; q < q1; q += group) {
    const size_t n = static_cast<size_t>((q1 - q < group ? q1 - q : group) - 1);
    const TileFn f = group == kMaxN ? (fp8 ? kTilesFp8[r][n] : kTiles[r][n]) : (fp8 ? kDecodeFp8[n] : kDecode[r][n]);
    f(a, panel_base(a, q), q, 0);
  }
}

// Panels [q, q + n) of fp8 W widened into dst (the bf16 panel layout).
QLOOM_BF16DOT_AVX512 void widen_panels(const Args& a, int64_t q, int64_t n, uint32_t* dst) {
  const uint8_t* src = a.w8 + q * a.pairs * 2 * kPanel;
  for (int64_t i = 0; i < n * a.pairs; ++i) _mm512_storeu_si512(dst + i * kPanel, widen_fp8(src + i * 2 * kPanel));
}

}  // namespace

bool avx512bf16_kernel_built() { return true; }

// Groups of 4 panels; for each, every row tile streams the group's W (from
// L2), fp8 W widened once per group into a per-thread buffer.
void run_avx512bf16(const Args& a, int64_t q0, int64_t q1) {
  IeeeEnv env;
  if (a.rows <= kMr) return run_single_tile(a, q0, q1);
  thread_local std::vector<uint32_t> widened;
  if (a.w8 && widened.size() < static_cast<size_t>(kMaxN * a.pairs * kPanel))
    widened.resize(static_cast<size_t>(kMaxN * a.pairs * kPanel));
  for (int64_t q = q0; q < q1; q += kMaxN) {
    const int64_t n = q1 - q < kMaxN ? q1 - q : kMaxN;
    if (a.w8) widen_panels(a, q, n, widened.data());
    const void* wq = a.w8 ? static_cast<const void*>(widened.data()) : panel_base(a, q);
    for (int64_t r = 0; r < a.rows; r += kMr) {
      const int64_t rt = a.rows - r < kMr ? a.rows - r : kMr;
      kTiles[static_cast<size_t>(rt - 1)][static_cast<size_t>(n - 1)](a, wq, q, r);
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
