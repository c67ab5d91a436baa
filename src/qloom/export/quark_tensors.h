// The on-disk tensor layout of AMD Quark's hf_format export: which tensors a
// quantized linear writes, with which names, dtypes and shapes, and how the
// quantized codes are packed. pack_* turns qloom's layout-neutral
// QuantizedTensor into those tensors; unpack_quantized_weight reads them back.
//
// Verified against amd-quark 0.12.post1 (quark/torch/export/nn/modules/
// realquantizer.py StaticScaledRealQuantizer, quark/torch/utils/pack.py,
// quark/torch/export/constants.py, quark/torch/quantization/observer/
// observer.py) and the loaders in vLLM (model_executor/layers/quantization/
// quark/). Names: <module>.weight, <module>.weight_scale,
// <module>.weight_zero_point, <module>.input_scale, <module>.input_zero_point,
// <module>.output_scale, <module>.output_zero_point (constants.py LOAD_MAP:
// the quantizer buffers weight_quantizer.scale etc. are saved under these
// names).
//
// Layouts ([out, in] is the weight's logical shape, M the model dtype, g the
// group size):
//   fp8_e4m3 per_tensor  weight F8_E4M3 [out, in]; weight_scale M []
//   fp8_e4m3 per_channel weight F8_E4M3 [out, in]; weight_scale M [out]
//   int8/uint8           weight I8/U8 [out, in] (per_group: transposed [in, out]);
//                        weight_scale: per_tensor F32 [], per_channel M [out],
//                        per_group M [in/g, out]; weight_zero_point I8/U8 of
//                        the scale's shape (always written, 0 when symmetric)
//   int4/uint4 per_group weight I32 [in, out/8]: transposed, then 8 codes
//                        per word along out in pack order [0,2,4,6,1,3,5,7]
//                        (reorder) or [0..7] (order); weight_scale M
//                        [in/g, out]; weight_zero_point I32 [in/g, out/8]
//                        packed the same way (all zero for symmetric int4)
//   int4/uint4 per_channel weight I32 [out, in/8]; weight_scale M [out];
//                        weight_zero_point I32 [out/8]
//                        (int4/uint4 need out % 8 == 0, and in % 8 == 0 when
//                        not per_group: Quark's exporter would zero-pad the
//                        last word, but its importer cannot reload that, so
//                        qloom refuses to write it and only reads it)
//   int4/uint4 per_tensor  weight I32 [out, in/8]; weight_scale F32 [];
//                        weight_zero_point I32 []
//   fp4 (MX, e8m0)       weight U8 [out, in/2], element 2k in the low nibble
//                        of byte k; weight_scale U8 (e8m0 codes) [out, in/g]
//   fp6_e2m3 / fp6_e3m2 (MX, e8m0)  weight U8 [out, in/4*3], four codes in
//                        three bytes (core/fp6_pack.h, Pack_fp6);
//                        weight_scale U8 (e8m0 codes) [out, in/g]
//   progressive (int4_fp8): see quark_progressive.h
// Activations (static only; dynamic specs write nothing):
//   fp8 per_tensor       <module>.input_scale / .output_scale M []
//   int8/uint8 per_tensor  .input_scale F32 [] and .input_zero_point I8/U8 []
//                        (likewise output_*)
// F32 for per-tensor integer scales is not a typo: Quark's
// UniformScalingObserver.calculate_int_quant_params ends with
// torch.max(scale, self.eps) where both are 0-dim tensors, scale in the model
// dtype and eps float32, and 0-dim operands promote to float32; per-channel
// and per-group scales are 1-D/2-D and keep the model dtype; fp8 scales keep
// it because calculate_fp8_quant_parameters casts eps to the model dtype first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/core/int4_pack.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/weight_index.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/export/tensor_lookup.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::exporter {

struct ExportedTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  std::vector<std::byte> data;

  io::TensorSpec spec() const { return {name, dtype, shape}; }
};

// Which activation of a linear a static scale belongs to: its input
// (Quark input_tensors -> <module>.input_scale) or its output (output_tensors,
// the KV cache on k_proj / v_proj -> <module>.output_scale).
// Whose static scale: a linear's input (<module>.input_scale), its output
// (<module>.output_scale: KV cache, q_proj under --attention_dtype), or an
// attention module's softmax output (<attn>.prob_output_scale, Quark's
// softmax_quant_spec; module = "model.layers.N.self_attn").
enum class ActivationRole : uint8_t { kInput, kOutput, kProbs };
// "input" / "output" / "prob_output": the tensor names' prefix before "_scale".
const char* activation_role_prefix(ActivationRole r);

// Storage dtype of the scales of a tensor quantized with `spec` in a model
// whose floating dtype is `model_dtype` (bf16, f16 or f32), as the
// safetensors dtype: U8 for e8m0 scales; F32 / BF16 / F16 for a spec whose
// scale_type is "float32" / "bfloat16" / "float16"; otherwise (scale_type
// "float", Quark's schemes) see the file comment. A QuantizedTensor's
// scale_dtype must be this dtype (kE8M0 for U8), and its scales exactly
// representable in it (pack_* checks). Same rule as
// quant::quark_scale_dtype, which names e8m0 kE8M0.
DType quark_scale_dtype(const quant::QuantSpec& spec, DType model_dtype);
// Storage dtype of the zero points, nullopt when Quark writes none (float
// formats). Integer formats always get one (quantization/constants.py
// INT_QUANT_DTYPES), also when symmetric.
std::optional<DType> quark_zero_point_dtype(const quant::QuantSpec& spec);

// The tensors a quantized linear's weight becomes, in write order: weight,
// weight_scale, then weight_zero_point when there is one. Shapes and dtypes
// only (no data), so a writer can plan shards before quantizing. Throws
// kUnsupported for layouts Quark cannot export or reload (fp8_e5m2
// weights, fp8 per_group, per-channel int4 with in % 8 != 0, MX without e8m0
// scales, int4/uint4 with out or (per-channel/per-tensor) in not divisible
// by 8) and kUsage for a non-2-D shape, a group size that does not divide
// in, or a dynamic weight spec. `module` is the linear's path, e.g.
// "model.layers.0.self_attn.q_proj".
// `w2`: the weight's second stage of a two-stage spec (LayerQuantSpec::
// weight_stage2); fp4 block specs (nvfp4, amdfp4*) take their layout from
// fp4_block_tensors.h.
std::vector<io::TensorSpec> quark_weight_specs(const std::string& module,
                                               const std::vector<uint64_t>& weight_shape,
                                               const quant::QuantSpec& w, DType model_dtype,
                                               PackOrder order = PackOrder::kReorder,
                                               const std::optional<quant::QuantSpec>& w2 = std::nullopt);

// The static activation tensors of `role`: <module>.input_scale (+
// input_zero_point for integer formats), or output_*. Empty for a dynamic
// spec. Only per_tensor static activations are supported (kUnsupported
// otherwise, as in Quark's QParamsLinear).
std::vector<io::TensorSpec> quark_activation_specs(const std::string& module, ActivationRole role,
                                                   const quant::QuantSpec& spec, DType model_dtype);

// Packs a quantized weight into the tensors quark_weight_specs describes (the
// same names, dtypes and shapes, in the same order). Validates the
// QuantizedTensor: 2-D shape, one code per element within the format's range,
// scale / zero-point counts for the scheme, scales exactly representable in
// quark_scale_dtype and named by qt.scale_dtype (E8M0 scales: exact powers
// of two), zero points only for
// asymmetric specs. Violations throw kUsage naming the tensor.
std::vector<ExportedTensor> pack_quantized_weight(const std::string& module,
                                                  const quant::QuantizedTensor& qt,
                                                  DType model_dtype,
                                                  PackOrder order = PackOrder::kReorder);

// The tensors of quark_activation_specs with their values (a per-tensor
// scale and, for integer formats, a zero point).
std::vector<ExportedTensor> pack_activation_qparams(const std::string& module, ActivationRole role,
                                                    const quant::QuantSpec& spec, float scale,
                                                    int32_t zero_point, DType model_dtype);

// The lookup over a checkpoint's weights; `index` must outlive it.
TensorLookup index_lookup(const io::WeightIndex& index);
// The packing order a checkpoint's quantization_config says it used
// (export.pack_method "order" -> kSequential, anything else -> kReorder,
// Quark's default).
PackOrder pack_order_of(const nlohmann::json& quantization_config);

// Reads <module>.weight / .weight_scale / .weight_zero_point back into a
// QuantizedTensor with `spec` (exactly what pack_quantized_weight was given,
// for every layout; scale_dtype = the stored dtype, kE8M0 for MX). Scales
// may be stored as F32, BF16 or F16 (other producers may differ from Quark's
// choice); everything else must match the layout above. For per-group int4/uint4 the padded output dimension is recovered
// from the scale's shape, as Quark's unpack does (origin_packed_axis_size).
// Symmetric specs must have all-zero zero points (or none); the result then
// has empty zero_points. Throws kNotFound for a missing tensor and
// kInvalidInput for dtype/shape/value mismatches, naming the tensor.
// The logical [out, in] of `module`'s quantized weight, from its stored
// weight and weight_scale (4-bit codes are packed 8 per int32, fp4 2 per
// byte, per-group int transposed). Throws like unpack_quantized_weight.
std::pair<uint64_t, uint64_t> logical_weight_shape(const std::string& module, const quant::QuantSpec& spec,
                                                   const TensorLookup& lookup);

quant::QuantizedTensor unpack_quantized_weight(const std::string& module,
                                               const quant::QuantSpec& spec,
                                               const TensorLookup& lookup,
                                               PackOrder order = PackOrder::kReorder,
                                               const std::optional<quant::QuantSpec>& spec2 = std::nullopt);

// Reads a static per-tensor activation scale (and zero point, 0 when absent)
// of `role`; nullopt when the checkpoint has no <module>.<role>_scale.
struct ActivationQParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
std::optional<ActivationQParams> unpack_activation_qparams(const std::string& module,
                                                           ActivationRole role,
                                                           const TensorLookup& lookup);

// The KV group scale Quark writes for k_proj and v_proj is
// quant::kv_group_scale (quantize_ref.h).

// Converts a float to `dtype` (F32/BF16/F16) and back; what "rounded to the
// storage dtype" means for scales.
float round_to_dtype(float x, DType dtype);

}  // namespace qloom::exporter
