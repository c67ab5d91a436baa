// Internal: the packed 4-bit weight layout of the packed4 family
// (packed4_linear.cpp builds it) and the SIMD kernel sets that read it
// (packed4_avx512.cpp, packed4_avx2.cpp share packed4_kernels_impl.h).
//
// Layout. Every weight is a 4-bit index n into a 16-entry table per scale
// group: w = table[n], table[n] = basez[zp][n] · s, where basez[zp][n] =
// base(n) - zp in fp32 and base(n) is n - 8 (int4: n = q + 8), n (uint4) or
// fp4_e2m1(n) (mxfp4). base(n) - zp is exact (small integers, or zp = 0), so
// table[n] is the one rounding of quant::dequantize_ref: float(q - zp) · s or
// fp4(q) · s. Each W row is ceil(in / 32) chunks of 16 bytes; byte b of chunk
// c holds k = 32c + b in its low nibble and k = 32c + 16 + b in its high
// nibble (0 past `in`), so one 16-byte load widens to the 16 FMA lanes of two
// consecutive 16-k steps of the canonical GEMV order (gemm_dispatch.h).
// Rows are interleaved in tiles of kTileRows (out padded with zero rows):
// chunk c of the tile's rows lies in one 64-byte line, and the tiles follow
// each other, so a GEMV tile over 4 rows reads one sequential stream (the
// hardware prefetcher keeps up; four separate 1 KiB row streams it does not).
// Scales and zero points are interleaved the same way: [tile][group][4].
#pragma once

#include <cstddef>
#include <cstdint>

namespace qloom::engine::detail {
struct GemmKernelSet;
}  // namespace qloom::engine::detail

namespace qloom::engine::native::packed4 {

constexpr int64_t kTileRows = 4;
constexpr int64_t kChunkStride = 16 * kTileRows;  // bytes from chunk c to c + 1 of one row

struct Packed4View {
  const uint8_t* codes = nullptr;  // [out / 4][chunks][4 rows][16 bytes]
  int64_t chunks = 0;              // per row: ceil(in / 32)
  const float* scales = nullptr;   // [out / 4][groups][4 rows]
  const uint8_t* zps = nullptr;    // like scales (uint4), or null: zero point 0
  const float* basez = nullptr;    // [16 zero points][16 indices]
  int64_t groups = 0;              // scale groups per row (1 for per-channel)
  int64_t chunks_per_group = 0;    // 32-k chunks per group (`chunks` when one group)
  int64_t in = 0, out = 0;

  // Chunk 0 of row o; chunk c is kChunkStride bytes after chunk c - 1.
  const uint8_t* row(int64_t o) const { return codes + (o / kTileRows * chunks * kTileRows + o % kTileRows) * 16; }
  int64_t group_index(int64_t o, int64_t g) const { return (o / kTileRows * groups + g) * kTileRows + o % kTileRows; }
  const float* base_row(int64_t o, int64_t g) const { return basez + 16 * (zps ? zps[group_index(o, g)] : 0); }
  float scale(int64_t o, int64_t g) const { return scales[group_index(o, g)]; }
  // W[o, k] exactly as the kernels form it (scalar; for run_ref and tests).
  float weight(int64_t o, int64_t k) const {
    const int64_t c = k / 32, b = k % 32;
    const uint8_t byte = row(o)[c * kChunkStride + (b & 15)];
    const int n = b < 16 ? (byte & 15) : (byte >> 4);
    const int64_t g = c / chunks_per_group;
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
  // zero). tmp: kc + 32 floats, private.
  void (*dequant_panels)(const Packed4View& w, int64_t n0, int64_t ncols, int64_t k0, int64_t kc, int64_t nr,
                         float* bp, float* tmp);
  const detail::GemmKernelSet* gemm;  // the fp32 GEMM set of the same ISA (gemm_panels)
};

// nullptr when the build is not x86-64. Call only after isa_supported().
const Packed4Kernels* packed4_kernels_avx512();
const Packed4Kernels* packed4_kernels_avx2();

}  // namespace qloom::engine::native::packed4
