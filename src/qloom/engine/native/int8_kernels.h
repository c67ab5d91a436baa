// Tile kernels of the native int8 x int8 linear (int8_linear.cpp) and the
// layouts they read. One call computes a tile of mr <= 8 rows x one panel
// of <= 48 outputs over the whole reduction:
//   acc[i, j] = Σ_k q_x[row i, k] · q_w[output j, k]            (int32, exact)
//   y[i, j]   = ((float)acc[i, j] · sx[i]) · sw[j]  (+ bias[j])  (int8_epilogue)
// Integer sums are exact in any order (|acc| <= 128·128·in <= 2^30 for
// in <= kInt8MaxIn), and every kernel applies the same three float operations
// in the same order, each rounded once (no FMA contraction), so all kernels
// give the same bits.
//
// Weight layout (packed once by make_int8_linear): outputs in blocks of 16
// (the last zero-padded), blocks grouped in panels of kInt8PanelBlocks (the
// last panel may hold fewer), k in quads of 4 (the last zero-padded). Panel p
// starts at p · kInt8PanelBlocks · kq · 64 bytes; inside it, quad q holds
// nb · 64 bytes: output j of the panel (j < nb · 16), k = 4q + t at byte
// q · nb · 64 + 4j + t. So a 64-byte line is one zmm for vpdpbusd: 16 outputs
// x 4 consecutive k, one int32 lane per output.
//
// Activation layout (per call): row r's codes at act + r · act_ld, k zero-
// padded to whole quads. Codes are int8 for the scalar and AVX2 kernels; the
// VNNI kernel takes them as uint8 q_x + 128 (vpdpbusd multiplies u8 by s8)
// and subtracts wsum[j] = 128 · Σ_k q_w[j, k] (computed at pack time).
//
// K blocking (VNNI only): a call may cover one chunk of the quads, keeping
// its int32 sums in `part` between chunks, so that the panel's chunk of W
// stays in L1 while every row block passes over it. Integer sums, so the
// result is the same.
#pragma once

#include <cstdint>

namespace qloom::engine::native {

inline constexpr int kInt8RowBlock = 8;     // rows per activation block (tile rows)
inline constexpr int kInt8PanelBlocks = 3;  // 16-output blocks per panel (48 outputs)
inline constexpr int kInt8PanelOuts = 16 * kInt8PanelBlocks;
// Largest `in`: with u8 activations (<= 255) and s8 weights (>= -128),
// |Σ_k (q_x + 128) · q_w| <= 255 · 128 · 65536 = 2139095040 < 2^31, so no
// int32 sum (biased or not) can overflow.
inline constexpr int64_t kInt8MaxIn = 65536;

struct Int8Tile {
  const uint8_t* act = nullptr;  // row i's quads at act + i · act_ld (layout above)
  int64_t act_ld = 0;
  const int8_t* w = nullptr;     // the panel's quads (layout above), nb blocks
  int64_t kq = 0;                // quads along k in this call
  int mr = 0, nb = 0;            // rows 1..8, blocks 1..kInt8PanelBlocks
  int n = 0;                     // outputs of the panel to write, 1..nb * 16
  const float* sx = nullptr;     // mr row scales
  const float* sw = nullptr;     // the panel's output scales (nb * 16, zero-padded)
  const int32_t* wsum = nullptr; // the panel's 128 · Σ_k q_w (nb * 16), VNNI only
  const float* bias = nullptr;   // null, or the panel's n bias values
  float* y = nullptr;            // y[i * ldy + j] for i < mr, j < n
  int64_t ldy = 0;
  // VNNI k blocking: with `part` set, sums start from part[i * kInt8PanelOuts
  // + j] unless `first`, and go back there instead of to y unless `last`.
  int32_t* part = nullptr;
  bool first = true, last = true;
};

// The epilogue, shared by every kernel and run_ref (vector forms apply the
// same operations lane-wise).
inline float int8_epilogue(int32_t acc, float sx, float sw, const float* bias, int64_t j) {
  float v = static_cast<float>(acc) * sx;
  v = v * sw;
#if defined(__GNUC__) && defined(__x86_64__)
  // v as a register the compiler cannot see into: the product stays rounded
  // before the add (no FMA contraction, whatever -march the build uses).
  asm("" : "+x"(v));
#endif
  return bias ? v + bias[j] : v;
}

void int8_tile_scalar(const Int8Tile& t);
void int8_tile_avx2(const Int8Tile& t);         // int8 activations
void int8_tile_avx512_vnni(const Int8Tile& t);  // uint8 (+128) activations

}  // namespace qloom::engine::native
