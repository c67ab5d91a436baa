// Progressive (two-stage) weight quantization: Quark's ProgressiveSpec, whose
// second stage re-quantizes the first stage's result. qloom's one user is
// int4_fp8 ("W4A8"): fp8 e4m3 per tensor, then int4 per output channel.
//
// What Quark computes (amd-quark 0.13: quantization/tensor_quantize.py
// SequentialQuantize, export/nn/modules/realquantizer.py
// SequentialRealQuantizer.to_real_quantize_params, observer/observer.py):
//   stage 1  the weight W (model dtype C) is observed and real-quantized with
//            the first spec: s1 and fp8 codes f (quantize_ref.h rules (3) and
//            (6): scale_type "float32" keeps s1 = amax / 448 in f32);
//   between  the codes are cast back to C (.to(param_dtype)): the stage-2
//            input is the fp8 VALUES fp8(f), unscaled, exact in C;
//   stage 2  those values are observed and real-quantized with the second
//            spec: int4 per channel, s2[row] = rS(max(rC(amax_row / 7.5),
//            eps)) (rule (1), S = f32 for scale_type "float32"), codes
//            clamp(rint(v * (1 / s2)), -8, 7).
//   stored   the int4 codes (packed as int4 per-channel weights), weight_scale
//            = s1 (F32 []), weight_scale_2 = s2 (F32 [out]),
//            weight_zero_point_2 = 0 (packed int32 [out / 8]).
//   meaning  W' = ((code - 0) * s2[row]) * s1, in f32, the order of Quark's
//            reverse dequantization (dequantize_int_per_channel_affine, then
//            dequantize_fp8_per_tensor_with_scale).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

struct ProgressiveTensor {
  // Stage 1: spec, shape, its one per-tensor scale and scale_dtype; codes
  // are dropped (the checkpoint stores only stage 2's codes).
  QuantizedTensor first;
  // Stage 2: the stored codes, per-channel scales (and zero points, empty
  // when symmetric) of the stage-1 values.
  QuantizedTensor second;
};

// Whether the pair is one qloom implements: a static fp8_e4m3 per_tensor
// first stage and a static symmetric int per_channel / per_group second stage
// (not a ScaleQuantSpec: second.is_scale_quant false).
bool is_supported_progressive(const QuantSpec& first, const QuantSpec& second);

// Reference: two quantize_weight_ref calls, the scale dtypes from
// quark_scale_dtype(stage, model_dtype). Throws what quantize_weight_ref
// throws, and Error(kUnsupported) for a pair is_supported_progressive refuses.
ProgressiveTensor quantize_progressive_ref(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                           const QuantSpec& second, std::string_view tensor_name,
                                           DType model_dtype = DType::kF32);
// The same with quantize_weight (quantize_fast.h); bit-identical, any thread count.
ProgressiveTensor quantize_progressive(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                       const QuantSpec& second, std::string_view tensor_name,
                                       DType model_dtype = DType::kF32, unsigned threads = 0);

// W' (see "meaning" above), row-major [rows, cols].
std::vector<float> dequantize_progressive(const ProgressiveTensor& t, unsigned threads = 0);

}  // namespace qloom::quant
