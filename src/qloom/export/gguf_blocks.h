// Carrying qloom's own integer codes and scales (a Quark checkpoint's
// QuantizedTensor) into llama.cpp blocks of 32 input elements, code for code:
//   int4 symmetric  -> Q4_0: q = code + 8, d = scale (fp16); ggml computes
//                      (q - 8) * d = code * scale
//   uint4 asymmetric -> Q4_1: q = code, d = scale, m = -scale * zero_point
//                      (fp16); ggml computes q * d + m = (code - zp) * scale
//   int8 symmetric  -> Q8_0: q = code, d = scale (fp16)
// Per-tensor, per-channel and per-group scales all carry when every 32-block
// lies inside one scale group (group_size % 32 == 0): the scale repeats per
// block. ggml keeps d and m in fp16: a scale (or m) that fp16 cannot hold
// exactly is rounded to the nearest fp16 and the block counted as inexact
// (bf16 scales are exact in fp16 unless below 2^-14 (subnormal) or above
// 65504; fp32 scales, as int8 per-tensor uses, usually are not). The codes
// are never changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "qloom/io/gguf.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::exporter {

struct CarryStats {
  uint64_t blocks = 0;         // 32-element blocks written
  uint64_t inexact_scale = 0;  // blocks whose d is not the Quark scale exactly
  uint64_t inexact_min = 0;    // Q4_1 blocks whose m is not -scale*zp exactly
};

// The block type `spec` carries into for a weight of `in_features` columns,
// nullopt when none does (fp8, fp4, uint8, groups not a multiple of 32,
// in_features % 32 != 0).
std::optional<io::GgmlType> carry_type(const quant::QuantSpec& spec, uint64_t in_features);

// The tensor's blocks in GGUF row order: GGUF row r holds the QuantizedTensor's
// row row_map[r] (row_map empty: identity). `type` must be carry_type's.
// Throws kInvalidInput naming `name` for codes out of the format's range and
// kUnsupported for a scale fp16 cannot represent at all (inf / NaN).
std::vector<std::byte> carry_blocks(const quant::QuantizedTensor& qt, io::GgmlType type,
                                    std::span<const uint64_t> row_map, const std::string& name, CarryStats& stats);

// llama.cpp's row order of a llama Q or K projection with `heads` heads of
// `rows / heads` rows: GGUF row r comes from HF row result[r] (within a head,
// HF row i*hd/2 + j sits at 2j + i).
std::vector<uint64_t> llama_qk_row_map(uint64_t rows, uint64_t heads);

}  // namespace qloom::exporter
