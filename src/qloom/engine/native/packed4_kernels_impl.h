// Generic packed 4-bit kernels, included by packed4_avx512.cpp and
// packed4_avx2.cpp inside an anonymous namespace after they define
// QLOOM_P4_TARGET (the per-function target attribute) and a traits struct `V`:
//   R     16 fp32 lanes (one zmm, or two ymm), lane l = k mod 16;
//   Ri    16 dword lanes of packed indices; Tab: a 16-entry fp32 table;
//   zero, load (16 x values), load_part (the first n, zeros after), store,
//   fma, keep (zeroes lanes >= n), load_tab, table (base · s), load_codes
//   (a full superchunk), load_tail (a tail of 1, 2 or 4 bytes per lane),
//   lut (table[low 4 bits] per lane), shr4, hsum (the canonical tree of
//   gemm_dispatch.h over the 16 lanes); kOuts / kOutsOneRow: W rows per
//   GEMV tile for 2..4 / 1 x rows; kTranspose, transpose16: a 16 x 16
//   register transpose (or none).
// Layout and contract: packed4_kernels.h. Internal linkage throughout.

#define T QLOOM_P4_TARGET

// tab[g] = the table of group grp of W row o + g; sp[g] / zp[g]: the row's
// group-0 scale / zero point (groups are kTileRows entries apart).
template <int G, bool kZp>
T inline void tables(const Packed4View& w, const float* const* sp, const uint8_t* const* zp, int64_t grp,
                     typename V::Tab base0, typename V::Tab* tab) {
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
    tab[g] = V::table(kZp ? V::load_tab(w.basez + 16 * zp[g][grp * kTileRows]) : base0, sp[g][grp * kTileRows]);
}

// One 16-k step at k for RR x rows (stride in) and G W rows: w = the
// table entries of v's low nibbles, acc += x · w per lane, v moves on to the
// next step. n < 16 (the partial last step): x and w are zero past lane n.
template <int RR, int G>
T __attribute__((always_inline)) inline void fma_step(const float* x, int64_t in, int64_t k, int64_t n,
                                                      const typename V::Tab* tab, typename V::Ri* v,
                                                      typename V::R (*acc)[G]) {
  typename V::R xv[RR];
#pragma GCC unroll 16
  for (int i = 0; i < RR; ++i) xv[i] = n < 16 ? V::load_part(x + i * in + k, n) : V::load(x + i * in + k);
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    typename V::R wv = V::lut(tab[g], v[g]);
    if (n < 16) wv = V::keep(wv, n);
    v[g] = V::shr4(v[g]);
#pragma GCC unroll 16
    for (int i = 0; i < RR; ++i) acc[i][g] = V::fma(xv[i], wv, acc[i][g]);
  }
}

// RR rows of x times G consecutive W rows from o, in the canonical GEMV
// order: lane l of acc takes k = l, l + 16, ... in order; the last 16-k step
// (when in % 16 != 0) runs on every lane with x and w zeroed past `in`, so the
// padded lanes take fma(0, 0, p) exactly like the fp32 kernels; no step starts
// at or past `in`. y = bias + tree. kSpg: 16-k steps per scale group when it
// is 2 (group 32) or 4 (64), 8 for groups of whole superchunks, 0 for one
// group per row.
template <int RR, int G, bool kZp, int kSpg>
T void gemv_tile(const Packed4View& w, const float* x, int64_t o, const float* bias, float* y) {
  using R = typename V::R;
  using Ri = typename V::Ri;
  using Tab = typename V::Tab;
  const int64_t in = w.in;
  R acc[RR][G];
#pragma GCC unroll 16
  for (int i = 0; i < RR; ++i)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[i][g] = V::zero();
  const Tab base0 = V::load_tab(w.basez);  // zero point 0
  const float* sp[G];
  const uint8_t* zp[G];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    sp[g] = w.scales + w.group_index(o + g, 0);
    zp[g] = kZp ? w.zps + w.group_index(o + g, 0) : nullptr;
  }
  Tab tab[G];
  if (kSpg == 0) tables<G, kZp>(w, sp, zp, 0, base0, tab);
  for (int64_t s = 0; s < w.nfull; ++s) {
    Ri v[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) v[g] = V::load_codes(w.full(o + g, s));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if (kSpg != 0 && j % kSpg == 0)
        tables<G, kZp>(w, sp, zp, kSpg < 8 ? (s * 8 + j) / kSpg : s * 8 / w.steps_per_group, base0, tab);
      fma_step<RR, G>(x, in, s * 128 + j * 16, 16, tab, v, acc);
    }
  }
  if (w.tail_steps > 0) {
    Ri v[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) v[g] = V::load_tail(w.tail(o + g), w.tail_bpl);
    // A tail exists only with one group per row (kSpg 0) or groups of 32 /
    // 64 (kSpg 2, 4: groups of whole superchunks divide in).
    static_assert(kSpg == 0 || kSpg == 2 || kSpg == 4 || kSpg == 8);
    for (int64_t j = 0; j < w.tail_steps; ++j) {
      const int64_t step = w.nfull * 8 + j, k = step * 16;
      if (kSpg != 0 && kSpg != 8 && step % kSpg == 0) tables<G, kZp>(w, sp, zp, step / kSpg, base0, tab);
      fma_step<RR, G>(x, in, k, in - k < 16 ? in - k : 16, tab, v, acc);  // only the last can be partial
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < RR; ++i)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) y[i * w.out + o + g] = (bias ? bias[o + g] : 0.0f) + V::hsum(acc[i][g]);
}

template <int RR, bool kZp, int kSpg>
T void gemv_rows(const Packed4View& w, const float* x, int64_t n0, int64_t n1, const float* bias, float* y) {
  constexpr int G = RR > 1 ? V::kOuts : V::kOutsOneRow;
  int64_t o = n0;
  for (; o + G <= n1; o += G) gemv_tile<RR, G, kZp, kSpg>(w, x, o, bias, y);
  for (; o < n1; ++o) gemv_tile<RR, 1, kZp, kSpg>(w, x, o, bias, y);
}

// 4 x rows per pass over the packed W.
template <bool kZp, int kSpg>
T void gemv_impl(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
                 float* y) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) gemv_rows<4, kZp, kSpg>(w, x + r * w.in, n0, n1, bias, y + r * w.out);
  switch (rows - r) {
    case 3: gemv_rows<3, kZp, kSpg>(w, x + r * w.in, n0, n1, bias, y + r * w.out); break;
    case 2: gemv_rows<2, kZp, kSpg>(w, x + r * w.in, n0, n1, bias, y + r * w.out); break;
    case 1: gemv_rows<1, kZp, kSpg>(w, x + r * w.in, n0, n1, bias, y + r * w.out); break;
    default: break;
  }
}

template <bool kZp>
T void gemv_spg(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
                float* y) {
  if (w.groups <= 1) return gemv_impl<kZp, 0>(w, x, rows, bias, n0, n1, y);
  if (w.steps_per_group == 2) return gemv_impl<kZp, 2>(w, x, rows, bias, n0, n1, y);
  if (w.steps_per_group == 4) return gemv_impl<kZp, 4>(w, x, rows, bias, n0, n1, y);
  gemv_impl<kZp, 8>(w, x, rows, bias, n0, n1, y);  // whole superchunks per group
}

// Packed4Kernels::gemv.
T void gemv_entry(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
                  float* y) {
  if (w.zps) gemv_spg<true>(w, x, rows, bias, n0, n1, y);
  else gemv_spg<false>(w, x, rows, bias, n0, n1, y);
}

// W[o, k0 .. k0 + kc) into dst, in whole 16-k steps (up to 15 floats past kc
// are written too). k0 is a multiple of 128.
T void decode_row(const Packed4View& w, int64_t o, int64_t k0, int64_t kc, float* dst) {
  int64_t grp = -1;
  typename V::Tab tab{};
  for (int64_t s = k0 / 128; s * 128 < k0 + kc; ++s) {
    const bool is_full = s < w.nfull;
    typename V::Ri v = is_full ? V::load_codes(w.full(o, s)) : V::load_tail(w.tail(o), w.tail_bpl);
    const int64_t steps = is_full ? 8 : w.tail_steps;
    for (int64_t j = 0; j < steps && s * 128 + j * 16 < k0 + kc; ++j) {
      const int64_t step = s * 8 + j;
      if (step / w.steps_per_group != grp) {
        grp = step / w.steps_per_group;
        tab = V::table(V::load_tab(w.base_row(o, grp)), w.scale(o, grp));
      }
      V::store(dst + step * 16 - k0, V::lut(tab, v));
      v = V::shr4(v);
    }
  }
}

// Columns [j0, j0 + 16) of one panel (nr wide) from 16 decoded W rows
// (tmp rows of `ld` floats, kc valid): whole 16-k blocks through
// V::transpose16 when V has it, the rest element by element.
T void transpose_rows(const float* tmp, int64_t ld, int64_t kc, int64_t nr, float* panel) {
  int64_t kk = 0;
  if constexpr (V::kTranspose) {
    for (; kk + 16 <= kc; kk += 16) {
      typename V::R r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) r[j] = V::load(tmp + j * ld + kk);
      V::transpose16(r);
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) V::store(panel + (kk + c) * nr, r[c]);
    }
  }
  for (; kk < kc; ++kk)
    for (int64_t j = 0; j < 16; ++j) panel[kk * nr + j] = tmp[j * ld + kk];
}

// Packed4Kernels::dequant_panels: bp[p][kk][j] = W[n0 + p·nr + j, k0 + kk],
// 16 W rows at a time (nr is a multiple of 16); rows past ncols are zero.
T void dequant_panels_entry(const Packed4View& w, int64_t n0, int64_t ncols, int64_t k0, int64_t kc, int64_t nr,
                            float* bp, float* tmp) {
  const int64_t ld = kc + 16;
  const int64_t panels = (ncols + nr - 1) / nr;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t j0 = 0; j0 < nr; j0 += 16) {
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t col = p * nr + j0 + j;
        if (col < ncols) decode_row(w, n0 + col, k0, kc, tmp + j * ld);
        else std::fill(tmp + j * ld, tmp + j * ld + kc, 0.0f);
      }
      transpose_rows(tmp, ld, kc, nr, bp + p * nr * kc + j0);
    }
}

#undef T
