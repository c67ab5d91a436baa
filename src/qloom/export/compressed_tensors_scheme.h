// The compressed-tensors side of the Quark -> compressed-tensors converter
// (compressed_tensors_export.h): how one Quark tensor spec becomes a
// compressed-tensors QuantizationArgs, which compression format a linear gets,
// and the tensors (names, dtypes, shapes, bytes) that format stores.
//
// Target: compressed-tensors 0.19.0 (the package llm-compressor 0.14 writes
// with). Every rule was read from that wheel's source:
//   quantization/quant_args.py      QuantizationArgs fields and their JSON
//                                   (num_bits, type "int"/"float", symmetric,
//                                   group_size, strategy "tensor" / "channel" /
//                                   "group" / "token", block_structure, dynamic,
//                                   actorder, scale_dtype, zp_dtype "torch.int8"
//                                   only when asymmetric, observer,
//                                   observer_kwargs); integer ranges are always
//                                   signed: [-2^(b-1), 2^(b-1)-1], also when
//                                   asymmetric
//   compressors/format.py           format priority: int-quantized (int weights
//                                   with input activations), pack-quantized
//                                   (int weights, no float activations),
//                                   float-quantized (float weights with input
//                                   activations), naive-quantized
//   compressors/pack_quantized/     weight_packed I32 [out, ceil(in*b/32)]:
//                                   code + 2^(b-1), element i at bit i*b of the
//                                   row's bit stream; weight_shape I64 [2];
//                                   weight_zero_point (asymmetric group /
//                                   channel only) packed the same way along
//                                   dim 0: I32 [ceil(out*b/32), groups]
//   compressors/naive_quantized/    weight I8 / F8_E4M3 [out, in]; zero points
//                                   only when asymmetric (_remove_symmetric_zp)
//   quantization/lifecycle/initialize.py  scale shapes: tensor [1], channel
//                                   [out, 1], group [out, ceil(in/g)]; the
//                                   KV cache's k_scale / v_scale [1] on the
//                                   attention module
// and cross-checked on llm-compressor 0.14 outputs (W4A16, W4A16_ASYM,
// FP8_DYNAMIC, FP8 + fp8 kv_cache_scheme, int8 static) of the demo model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::exporter {

// compressed-tensors/version.py of the release the output follows; written as
// quantization_config.version.
inline constexpr const char* kCompressedTensorsVersion = "0.19.0";

// QuantizationArgs JSON (keys as model_dump writes them) of a Quark weight
// spec. kUnsupported naming `where` (module + field) for what compressed-
// tensors cannot express: MX / e8m0 scales, fp4 / fp6 / fp8_e5m2, dynamic
// weights, per-tensor 4-bit weights (this converter writes group and channel
// only), custom scale types.
nlohmann::ordered_json ct_weight_args(const quant::QuantSpec& w, const std::string& where);
// QuantizationArgs JSON of an input-activation spec: static per-tensor
// ("tensor") or dynamic per-tensor / per-token ("token", Quark's per_channel
// with ch_axis 1). Symmetric only (kUnsupported otherwise, and for groups,
// MX, other dtypes).
nlohmann::ordered_json ct_activation_args(const quant::QuantSpec& a, const std::string& where);
// kv_cache_scheme of a Quark KV output spec: fp8_e4m3 static per-tensor only.
nlohmann::ordered_json ct_kv_cache_args(const quant::QuantSpec& o, const std::string& where);

// "int-quantized" / "pack-quantized" / "float-quantized" / "naive-quantized"
// for a linear with weight spec `w` and optional input spec (format.py order).
std::string ct_format(const quant::QuantSpec& w, const quant::QuantSpec* input);

// The tensors a quantized linear's weight becomes, in write order: weight
// (naive formats) or weight_packed, weight_scale, weight_zero_point
// (asymmetric only), weight_shape (pack-quantized only). `out`, `in` are the
// weight's logical shape; scales are stored in `scale_dtype` (the dtype the
// Quark checkpoint stored them in, carried unchanged).
std::vector<io::TensorSpec> ct_weight_specs(const std::string& module, uint64_t out, uint64_t in,
                                            const quant::QuantSpec& w, DType scale_dtype,
                                            const std::string& format);
// The same tensors with their bytes, from qloom's layout-neutral
// QuantizedTensor (Quark's codes, scales and zero points carried exactly; the
// integer codes shifted into compressed-tensors' signed range, which leaves
// q - zero_point unchanged).
std::vector<ExportedTensor> ct_weight_tensors(const std::string& module, const quant::QuantizedTensor& qt,
                                              const std::string& format);

// Packs signed codes (in [-2^(b-1), 2^(b-1)-1]) row by row as pack_to_int32
// (packed_dim 1): [rows, cols] -> [rows, ceil(cols*b/32)] int32. b is 4 or 8.
std::vector<int32_t> ct_pack_rows(const std::vector<int32_t>& values, uint64_t rows, uint64_t cols, int bits);

// One scalar stored as a [1] tensor of `dtype` (F32 / BF16 / F16); the value
// must be exactly representable (kUsage otherwise).
ExportedTensor ct_scalar_tensor(const std::string& name, float value, DType dtype);

}  // namespace qloom::exporter
