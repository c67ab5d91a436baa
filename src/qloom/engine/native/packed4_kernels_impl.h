// Generic packed 4-bit kernels, included by packed4_avx512.cpp and
// packed4_avx2.cpp inside an anonymous namespace after they define
// QLOOM_P4_TARGET (the per-function target attribute) and a traits struct `V`:
//   R     16 fp32 lanes (one zmm, or two ymm), lane l = k mod 16;
//   Tab   a 16-entry fp32 table (one scale group of one W row);
//   zero, load (16 x values), load_part (the first n, zeros after), fma,
//   keep (zeroes lanes >= n), load_tab (16 floats), table (base · s),
//   decode (one 16-byte
//   chunk -> its low-nibble and high-nibble 16 lanes), hsum (the canonical
//   tree of gemm_dispatch.h over the 16 lanes), store (16 floats).
// Layout and contract: packed4_kernels.h. Internal linkage throughout.

#define T QLOOM_P4_TARGET

// RR rows of x times G consecutive W rows from o, in the canonical GEMV
// order: lane l of acc takes k = l, l + 16, ... in order; the last 16-k step
// (when in % 16 != 0) runs on every lane with x and w zeroed past `in`, so the
// padded lanes take fma(0, 0, p) exactly like the fp32 kernels; a 16-k step
// starting at or past `in` does not run. y = bias + tree.
template <int RR, int G, bool kZp>
T void gemv_tile(const Packed4View& w, const float* x, int64_t o, const float* bias, float* y) {
  using R = typename V::R;
  using Tab = typename V::Tab;
  const int64_t in = w.in, full = in / 32, chunks = w.chunks;
  R acc[RR][G];
#pragma GCC unroll 16
  for (int i = 0; i < RR; ++i)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[i][g] = V::zero();
  const uint8_t* c[G];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) c[g] = w.row(o + g);
  const Tab base0 = V::load_tab(w.basez);  // zero point 0
  for (int64_t grp = 0; grp < w.groups; ++grp) {
    Tab tab[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const Tab base = kZp ? V::load_tab(w.basez + 16 * w.zps[w.group_index(o + g, grp)]) : base0;
      tab[g] = V::table(base, w.scale(o + g, grp));
    }
    const int64_t c0 = grp * w.chunks_per_group;
    const int64_t c1 = c0 + w.chunks_per_group < full ? c0 + w.chunks_per_group : full;
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t k = ch * 32;
      R xl[RR], xh[RR];
#pragma GCC unroll 16
      for (int i = 0; i < RR; ++i) xl[i] = V::load(x + i * in + k), xh[i] = V::load(x + i * in + k + 16);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) {
        R wl, wh;
        V::decode(c[g] + ch * kChunkStride, tab[g], wl, wh);
#pragma GCC unroll 16
        for (int i = 0; i < RR; ++i) acc[i][g] = V::fma(xl[i], wl, acc[i][g]);
#pragma GCC unroll 16
        for (int i = 0; i < RR; ++i) acc[i][g] = V::fma(xh[i], wh, acc[i][g]);
      }
    }
    if (grp == w.groups - 1 && full < chunks) {  // the partial last chunk (one group per row then)
      const int64_t k = full * 32, nl = in - k < 16 ? in - k : 16, nh = in - k - 16;
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) {
        R wl, wh;
        V::decode(c[g] + full * kChunkStride, tab[g], wl, wh);
        wl = V::keep(wl, nl);
#pragma GCC unroll 16
        for (int i = 0; i < RR; ++i) acc[i][g] = V::fma(V::load_part(x + i * in + k, nl), wl, acc[i][g]);
        if (nh > 0) {
          wh = V::keep(wh, nh);
#pragma GCC unroll 16
          for (int i = 0; i < RR; ++i) acc[i][g] = V::fma(V::load_part(x + i * in + k + 16, nh), wh, acc[i][g]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < RR; ++i)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) y[i * w.out + o + g] = (bias ? bias[o + g] : 0.0f) + V::hsum(acc[i][g]);
}

template <int RR, bool kZp>
T void gemv_rows(const Packed4View& w, const float* x, int64_t n0, int64_t n1, const float* bias, float* y) {
  constexpr int G = RR == 1 ? V::kOutsOneRow : V::kOuts;
  int64_t o = n0;
  for (; o + G <= n1; o += G) gemv_tile<RR, G, kZp>(w, x, o, bias, y);
  for (; o < n1; ++o) gemv_tile<RR, 1, kZp>(w, x, o, bias, y);
}

template <bool kZp>
T void gemv_impl(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
                 float* y) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) gemv_rows<4, kZp>(w, x + r * w.in, n0, n1, bias, y + r * w.out);
  switch (rows - r) {
    case 3: gemv_rows<3, kZp>(w, x + r * w.in, n0, n1, bias, y + r * w.out); break;
    case 2: gemv_rows<2, kZp>(w, x + r * w.in, n0, n1, bias, y + r * w.out); break;
    case 1: gemv_rows<1, kZp>(w, x + r * w.in, n0, n1, bias, y + r * w.out); break;
    default: break;
  }
}

// Packed4Kernels::gemv: 4 x rows per pass over the packed W.
T void gemv_entry(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
                  float* y) {
  if (w.zps) gemv_impl<true>(w, x, rows, bias, n0, n1, y);
  else gemv_impl<false>(w, x, rows, bias, n0, n1, y);
}

// W[o, k0 .. k0 + kc) into dst (whole 32-k chunks: up to 31 floats past kc
// are written too). k0 is a multiple of 32.
T void decode_row(const Packed4View& w, int64_t o, int64_t k0, int64_t kc, float* dst) {
  const uint8_t* row = w.row(o);
  int64_t grp = -1;
  typename V::Tab tab{};
  for (int64_t ch = k0 / 32; ch * 32 < k0 + kc; ++ch) {
    if (ch / w.chunks_per_group != grp) {
      grp = ch / w.chunks_per_group;
      tab = V::table(V::load_tab(w.base_row(o, grp)), w.scale(o, grp));
    }
    typename V::R lo, hi;
    V::decode(row + ch * kChunkStride, tab, lo, hi);
    V::store(dst + ch * 32 - k0, lo);
    V::store(dst + ch * 32 - k0 + 16, hi);
  }
}

// Packed4Kernels::dequant_panels: bp[p][kk][j] = W[n0 + p·nr + j, k0 + kk].
T void dequant_panels_entry(const Packed4View& w, int64_t n0, int64_t ncols, int64_t k0, int64_t kc, int64_t nr,
                            float* bp, float* tmp) {
  const int64_t panels = (ncols + nr - 1) / nr;
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = bp + p * nr * kc;
    for (int64_t j = 0; j < nr; ++j) {
      const int64_t col = p * nr + j;
      if (col < ncols) {
        decode_row(w, n0 + col, k0, kc, tmp);
        for (int64_t kk = 0; kk < kc; ++kk) panel[kk * nr + j] = tmp[kk];
      } else {
        for (int64_t kk = 0; kk < kc; ++kk) panel[kk * nr + j] = 0.0f;
      }
    }
  }
}

#undef T
