// Encoding float values into GGUF tensor types (the inverse direction of
// gguf_dequant.h): the plain types, Q8_0 from floats, and qloom's own K-quant
// quantizers for Q4_K and Q6_K (256-element super-blocks, layouts in
// gguf_dequant_k.cpp). Block packers that carry existing integer codes and
// scales (Quark int4 / uint4 / int8) live in export/gguf_blocks.h.
//
// Q4_K (y = d*sc*q - dmin*m, q in [0,15], 8 sub-blocks of 32, 6-bit sc, m):
//   per sub-block a (scale, offset) pair is fitted by a small search over
//   shrunk min/max ranges, each refined by least squares on its codes (the
//   best squared error wins); the super-block's d / dmin are the largest
//   scale / offset over 63 in fp16, the 6-bit sc / m the rounded ratios; the
//   codes are then requantized against the scales as stored.
// Q6_K (y = d*sc*q, q in [-32,31], 16 sub-blocks of 16, int8 sc): per
//   sub-block a symmetric scale is searched the same way (the extreme value
//   mapped near -32 or 31, least-squares refined); d = max |scale| / 127 in
//   fp16, sc = round(scale / d), codes requantized against d*sc.
// Q8_0 (y = d*q, 32 elements): d = max|x| / 127 in fp16, q = round(x / d).
// Deterministic (serial, no FMA contraction dependence on thread count).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "qloom/io/gguf.h"

namespace qloom::io {

// Encodes x (x.size() a multiple of the type's block size) as `type`: F32,
// F16, BF16 (nearest, ties to even), Q8_0, Q4_K, Q6_K. Other types are
// kUnsupported naming the type.
std::vector<std::byte> gguf_quantize(GgmlType type, std::span<const float> x);

// Nearest fp16 bit pattern (ties to even, overflow to inf).
uint16_t f32_to_f16_bits(float x);

}  // namespace qloom::io
