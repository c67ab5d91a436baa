// Internal: the packed 4-bit weight layout of the packed4 family
// (packed4_linear.cpp builds it) and the SIMD kernel sets that read it
// (packed4_avx512.cpp, packed4_avx2.cpp share packed4_kernels_impl.h).
//
// Layout. Every weight is a 4-bit index n into a 16-entry table per scale
// group: w = table[n], table[n] = basez[zp][n] · s, where basez[zp][n] =
// base(n) - zp in fp32 and base(n) is n - 8 (int4: n = q + 8), n (uint4) or
// fp4_e2m1(n) (mxfp4). base(n) - zp is exact (small integers, or zp = 0), so
// table[n] is the one rounding of quant::dequantize_ref: float(q - zp) · s or
// fp4(q) · s.
//
// Codes: each W row is cut in superchunks of 128 k = eight 16-k steps of the
// canonical GEMV order (gemm_dispatch.h). A superchunk is 16 dwords, one per
// FMA lane: bits 4j..4j+3 of dword i hold the index of k = 128s + 16j + i. A
// 64-byte load gives the 16 lanes of all eight steps; step j's indices are
// that vector shifted right by 4j (vpermps reads only the low 4 bits of each
// lane, so no mask and no widening shuffle). The last, partial superchunk
// (steps = ceil(in mod 128 / 16)) keeps 1, 2 or 4 bytes per lane (16, 32 or
// 64 bytes, zero-extended on load) so rows like in = 576 waste nothing.
// Indices past `in` are 0. Rows are interleaved in tiles of kTileRows (out
// padded with zero rows): [tile][superchunk][4 rows][64 B], then the tile's
// tails [4 rows][16 · tail_bpl B], so the GEMV reads one sequential stream
// (the hardware prefetcher keeps up with it; with one short stream per row
// it did not). Scales and zero points: [tile][group][4 rows].
#pragma once

#include <cstddef>
#include <cstdint>

namespace qloom::engine::detail {
struct GemmKernelSet;
}  // namespace qloom::engine::detail

namespace qloom::engine::native::packed4 {

constexpr int64_t kTileRows = 4;
constexpr int64_t kSuperBytes = 64;  // one row's full superchunk

struct Packed4View {
  const uint8_t* codes = nullptr;
  int64_t nfull = 0;       // full superchunks per row: in / 128
  int64_t tail_steps = 0;  // 16-k steps of the partial superchunk (0..8)
  int64_t tail_bpl = 0;    // its bytes per lane: 1, 2, 4 (0 without a tail)
  int64_t tile_bytes = 0;  // nfull · 4 · 64 + 4 · 16 · tail_bpl
  const float* scales = nullptr;  // [out / 4][groups][4 rows]
  const uint8_t* zps = nullptr;   // like scales (uint4), or null: zero point 0
  const float* basez = nullptr;   // [16 zero points][16 indices]
  int64_t groups = 0;             // scale groups per row (1 for per-channel / per-tensor)
  int64_t steps_per_group = 1;    // 16-k steps per group (all of the row's when one group)
  int64_t in = 0, out = 0;

  const uint8_t* tile(int64_t o) const { return codes + o / kTileRows * tile_bytes; }
  const uint8_t* full(int64_t o, int64_t s) const {
    return tile(o) + (s * kTileRows + o % kTileRows) * kSuperBytes;
  }
  const uint8_t* tail(int64_t o) const {
    return tile(o) + nfull * kTileRows * kSuperBytes + o % kTileRows * 16 * tail_bpl;
  }
  // Byte holding W[o, k]'s index (low nibble when (k / 16) is even).
  int64_t byte_offset(int64_t o, int64_t k) const {
    const int64_t s = k / 128, j = k % 128 / 16, i = k % 16;
    return s < nfull ? full(o, s) - codes + 4 * i + j / 2 : tail(o) - codes + i * tail_bpl + j / 2;
  }
  int64_t group_index(int64_t o, int64_t g) const { return (o / kTileRows * groups + g) * kTileRows + o % kTileRows; }
  const float* base_row(int64_t o, int64_t g) const { return basez + 16 * (zps ? zps[group_index(o, g)] : 0); }
  float scale(int64_t o, int64_t g) const { return scales[group_index(o, g)]; }
  // W[o, k] exactly as the kernels form it (scalar; for run_ref and tests).
  float weight(int64_t o, int64_t k) const {
    const uint8_t byte = codes[byte_offset(o, k)];
    const int n = (k / 16) % 2 == 0 ? (byte & 15) : (byte >> 4);
    const int64_t g = k / 16 / steps_per_group;
    return base_row(o, g)[n] * scale(o, g);
  }
};

struct Packed4Kernels {
  const char* name;  // "avx512", "avx2"
  // y[r, o] for r < rows, o in [n0, n1) in the canonical GEMV order
  // (16 lanes, fixed tree, then + bias); x rows of `in`, y rows of `out`.
  void (*gemv)(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
               float* y);
  // W rows [n0, n0 + ncols) x k in [k0, k0 + kc) dequantized into the packed
  // GEMM's B-panel layout of `gemm` (kc x nr per panel, columns past ncols
  // zero). tmp: 16 · (kc + 16) floats, private. nr: a multiple of 16.
  void (*dequant_panels)(const Packed4View& w, int64_t n0, int64_t ncols, int64_t k0, int64_t kc, int64_t nr,
                         float* bp, float* tmp);
  const detail::GemmKernelSet* gemm;  // the fp32 GEMM set of the same ISA (gemm_panels)
};

// nullptr when the build is not x86-64. Call only after isa_supported().
const Packed4Kernels* packed4_kernels_avx512();
const Packed4Kernels* packed4_kernels_avx2();

}  // namespace qloom::engine::native::packed4
