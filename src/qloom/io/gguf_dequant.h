// Dequantizing GGUF tensors to fp32: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (the block layouts of ggml-common.h,
// decoded exactly as ggml's reference dequantize_row_* functions do, so the
// result is bit-identical to the `gguf` Python package's dequantize).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qloom/io/gguf.h"

namespace qloom::io {

// Decodes `n` elements (a multiple of the type's block_elems) from `src`
// (exactly n / block_elems * block_bytes bytes) into `dst` (n floats).
// Throws kUnsupported naming the type for a type it cannot decode, kUsage for
// a size mismatch.
void gguf_dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

// The whole tensor, in row-major order (info.shape()).
std::vector<float> gguf_dequantize_tensor(const GgufFile& file, const GgufTensorInfo& info);

}  // namespace qloom::io
