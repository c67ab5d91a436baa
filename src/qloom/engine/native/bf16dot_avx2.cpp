// AVX2 + FMA kernel of the bf16 dot-product family, for CPUs without
// AVX512_BF16: the canonical order of bf16dot_kernels.h with fp32 FMAs. A
// packed pair dword holds w[2p] in its low and w[2p+1] in its high half, so
// the odd element widened is the dword & 0xFFFF0000 and the even one the
// dword << 16. Per lane: acc = fma(w_odd, x_odd, acc); acc = fma(w_even,
// x_even, acc), under MXCSR FTZ + DAZ, which is what vdpbf16ps does (x86
// detects tininess after rounding in both; measured identical, see the test).
// Tiles: up to 4 rows x 1 panel, 2 x 2 or 1 x 4 (8 ymm accumulators); fp8 W
// is widened to bf16 per panel group into a per-thread buffer.
#include "qloom/engine/native/bf16dot_kernels.h"

#if defined(__x86_64__)

#include <array>
#include <vector>

#include "qloom/core/x86_intrinsics.h"

#define QLOOM_BF16DOT_AVX2 __attribute__((target("avx2,fma")))

namespace qloom::engine::native::bf16dot {
namespace {

constexpr unsigned kFtzDaz = 0x8040u;
constexpr int kMr = 4;  // rows per tile

QLOOM_BF16DOT_AVX2 inline __m256 odd(__m256i pairs) {
  return _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}
QLOOM_BF16DOT_AVX2 inline __m256 even(__m256i pairs) { return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)); }

// The epilogue of bf16dot_kernels.h for 8 outputs of one row.
QLOOM_BF16DOT_AVX2 inline void store8(const Args& a, int64_t row, int64_t o, __m256 acc) {
  const __m256 s = _mm256_mul_ps(_mm256_set1_ps(a.sx[row]), _mm256_loadu_ps(a.sw + o));
  const int64_t left = a.out - o;
  if (left <= 0) return;
  alignas(32) float b[8] = {};
  if (a.bias)
    for (int64_t i = 0; i < 8 && i < left; ++i) b[i] = a.bias[o + i];
  __m256 y = a.bias ? _mm256_fmadd_ps(acc, s, _mm256_load_ps(b)) : _mm256_mul_ps(acc, s);
  y = _mm256_blendv_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
  float* dst = a.y + row * a.out + o;
  if (left >= 8) {
    _mm256_storeu_ps(dst, y);
    return;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, y);
  for (int64_t i = 0; i < left; ++i) dst[i] = t[i];
}

// 16 fp8 e4m3 codes (never NaN, see Args) -> their bf16 patterns: normal
// magnitudes shifted into place and rebiased (+120 << 7), subnormals from a
// table split in low and high bytes, the sign moved to bit 15.
QLOOM_BF16DOT_AVX2 inline __m256i widen_fp8(const uint8_t* p) {
  const __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i m7 = _mm256_and_si256(c, _mm256_set1_epi16(0x7F));
  __m256i r = _mm256_add_epi16(_mm256_slli_epi16(m7, 4), _mm256_set1_epi16(0x3C00));
  const __m256i lo = _mm256_setr_epi8(0, 0, static_cast<char>(0x80), static_cast<char>(0xC0), 0, 0x20, 0x40, 0x60, 0, 0,
                                      0, 0, 0, 0, 0, 0, 0, 0, static_cast<char>(0x80), static_cast<char>(0xC0), 0, 0x20,
                                      0x40, 0x60, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i hi = _mm256_setr_epi8(0, 0x3B, 0x3B, 0x3B, 0x3C, 0x3C, 0x3C, 0x3C, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                      0, 0x3B, 0x3B, 0x3B, 0x3C, 0x3C, 0x3C, 0x3C, 0, 0, 0, 0, 0, 0, 0, 0);
  // m7's high byte is 0: each word looks up table[m7 & 15] in its low byte, table[0] = 0 in its high byte.
  const __m256i sub = _mm256_or_si256(_mm256_shuffle_epi8(lo, m7), _mm256_slli_epi16(_mm256_shuffle_epi8(hi, m7), 8));
  r = _mm256_blendv_epi8(r, sub, _mm256_cmpgt_epi16(_mm256_set1_epi16(8), m7));
  return _mm256_or_si256(r, _mm256_and_si256(_mm256_slli_epi16(c, 8), _mm256_set1_epi16(static_cast<short>(0x8000))));
}

// Panels [q, q + n) of fp8 W widened into dst (the bf16 panel layout).
QLOOM_BF16DOT_AVX2 void widen_panels(const Args& a, int64_t q, int64_t n, uint32_t* dst) {
  const uint8_t* src = a.w8 + q * a.pairs * 2 * kPanel;
  for (int64_t i = 0; i < n * a.pairs * 2; ++i)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * 8), widen_fp8(src + i * 16));
}

// Rows row0 .. row0+R-1 x panels q .. q+NP-1, W from w (panel q's base).
// 2·R·NP chains of two dependent FMAs per pair: R·NP >= 4 keeps both FMA
// pipes busy (hence 4 panels for one row, 2 for two).
template <int R, int NP>
QLOOM_BF16DOT_AVX2 void tile(const Args& a, const uint32_t* w, int64_t q, int64_t row0) {
  const int64_t pairs = a.pairs;
  const uint16_t* x[R];
  for (int r = 0; r < R; ++r) x[r] = a.xq + (row0 + r) * 2 * pairs;
  __m256 acc[R][2 * NP];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * NP; ++h) acc[r][h] = _mm256_setzero_ps();
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | kFtzDaz);
  __asm__ volatile("" ::: "memory");  // no load (so no FMA) moves above the FTZ switch
  for (int64_t p = 0; p < pairs; ++p) {
    __m256 xo[R], xe[R];
    for (int r = 0; r < R; ++r) {
      const __m256i xb = _mm256_broadcastd_epi32(_mm_loadu_si32(x[r] + 2 * p));
      xo[r] = odd(xb), xe[r] = even(xb);
    }
    for (int h = 0; h < 2 * NP; ++h) {  // 8 outputs each: panel h / 2, half h % 2
      const uint32_t* src = w + ((h / 2) * pairs + p) * kPanel + (h % 2) * 8;
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
      const __m256 wo = odd(wv), we = even(wv);
      for (int r = 0; r < R; ++r) acc[r][h] = _mm256_fmadd_ps(we, xe[r], _mm256_fmadd_ps(wo, xo[r], acc[r][h]));
    }
  }
  // Every FMA result exists before the environment goes back to IEEE, and the
  // epilogue's loads (so its arithmetic) come after.
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * NP; ++h) __asm__ volatile("" : "+x"(acc[r][h]));
  _mm_setcsr(csr);
  __asm__ volatile("" ::: "memory");
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2 * NP; ++h) store8(a, row0 + r, q * kPanel + h * 8, acc[r][h]);
}

using TileFn = void (*)(const Args&, const uint32_t*, int64_t, int64_t);
constexpr int kMaxNP = 4;
// [panels - 1] for one row, two rows; [rows - 1] for one panel.
constexpr std::array<TileFn, kMaxNP> kOneRow = {&tile<1, 1>, &tile<1, 2>, &tile<1, 3>, &tile<1, 4>};
constexpr std::array<TileFn, 2> kTwoRows = {&tile<2, 1>, &tile<2, 2>};
constexpr std::array<TileFn, kMr> kOnePanel = {&tile<1, 1>, &tile<2, 1>, &tile<3, 1>, &tile<4, 1>};

}  // namespace

bool avx2_kernel_built() { return true; }

// Groups of 4 (one row), 2 (two rows) or 1 panel; fp8 W widened per group
// into a per-thread buffer (outside the FTZ section), reused by every row tile.
void run_avx2(const Args& a, int64_t q0, int64_t q1) {
  IeeeEnv env;
  const int64_t group = a.rows == 1 ? 4 : a.rows == 2 ? 2 : 1;
  thread_local std::vector<uint32_t> widened;
  if (a.w8 && widened.size() < static_cast<size_t>(group * a.pairs * kPanel))
    widened.resize(static_cast<size_t>(group * a.pairs * kPanel));
  for (int64_t q = q0; q < q1; q += group) {
    const int64_t n = q1 - q < group ? q1 - q : group;
    if (a.w8) widen_panels(a, q, n, widened.data());
    const uint32_t* w = a.w8 ? widened.data() : a.w + q * a.pairs * kPanel;
    if (a.rows <= 2) {
      (a.rows == 1 ? kOneRow[static_cast<size_t>(n - 1)] : kTwoRows[static_cast<size_t>(n - 1)])(a, w, q, 0);
      continue;
    }
    for (int64_t r = 0; r < a.rows; r += kMr) {
      const int64_t rt = a.rows - r < kMr ? a.rows - r : kMr;
      kOnePanel[static_cast<size_t>(rt - 1)](a, w, q, r);
    }
  }
}

}  // namespace qloom::engine::native::bf16dot

#else

namespace qloom::engine::native::bf16dot {
bool avx2_kernel_built() { return false; }
void run_avx2(const Args&, int64_t, int64_t) {}
}  // namespace qloom::engine::native::bf16dot

#endif
