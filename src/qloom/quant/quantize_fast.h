// The optimized weight quantizer: the same function as quantize_weight_ref
// (quantize_ref.h defines the maths and the bytes), multithreaded over rows
// and vectorized (AVX2: min / max / amax reductions, integer rounding with
// vroundps, fp8 division and model-dtype rounding followed by convert.h's bulk
// f32 -> e4m3 encoder, branch-free fp4 encoding). Every scale, zero point and
// error comes from the same scalar code as the reference
// (quantize_ref.h, namespace detail), so only element loops differ.
//
// Guarantees, tested bit for bit: the result equals quantize_weight_ref for
// every spec, input and thread count (threads only split rows; every
// reduction is an exact min / max), and errors are the same Error with the
// same message (the first offending element in row-major order).
// The ISA follows convert.h's best_isa(), so QLOOM_MAX_ISA=scalar forces the
// portable path (the reference's element encoders, still multithreaded).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

// Arguments as quantize_weight_ref; `threads` = 0 uses
// std::thread::hardware_concurrency(). Small tensors run on the calling
// thread.
QuantizedTensor quantize_weight(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& spec,
                                DType scale_dtype, std::string_view tensor_name,
                                DType model_dtype = DType::kF32, unsigned threads = 0);

// dequantize_ref, multithreaded over rows; bit-identical to it.
std::vector<float> dequantize(const QuantizedTensor& t, unsigned threads = 0);
void dequantize(const QuantizedTensor& t, float* out, unsigned threads = 0);

}  // namespace qloom::quant
