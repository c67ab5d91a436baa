// The hf_format tensors of the fp4 block schemes (quant/fp4_block.h), as
// AMD Quark 0.13 exports them (checked against its export of the demo model:
// names, dtypes, shapes, bytes; quark/torch/export/constants.py
// LOAD_MAP_MULTI, export/nn/modules/realquantizer.py, utils/pack.py Pack_fp4):
//
//   amdfp4, amdfp4_g32 (single stage, scale_format e5m3):
//     <m>.weight        U8 [out, in/2]   e2m1 codes, element 2k in the low nibble
//     <m>.weight_scale  U8 [out, in/g]   e5m3 codes (core/e5m3.h)
//     (dynamic input: no tensor)
//   nvfp4 / fp4_block16_scale_e4m3, amdfp4_global16/32 (ScaleQuantSpec):
//     <m>.weight          U8 [out, in/2]
//     <m>.weight_scale    F8_E4M3 (nvfp4) / U8 e5m3 codes (amdfp4_global)
//                         [out, in/g]: the first-stage scales in units of
//     <m>.weight_scale_2  F32 []: the weight's global scale (weight_quantizer.1.scale)
//     <m>.input_scale_2   F32 []: the calibrated global scale of the dynamic
//                         input's group scales (input_quantizer.1.scale); the
//                         dynamic first stage writes nothing (no input_scale).
// (vLLM's QuarkNVFP4 loads exactly these names for nvfp4; it has no scheme
// for e5m3 scales, so amdfp4* checkpoints do not load in vLLM.)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qloom/export/quark_tensors.h"

namespace qloom::exporter {

// "<module>.input_scale_2" / "<module>.output_scale_2".
std::string scale2_tensor_name(const std::string& module, ActivationRole role);

// The weight tensors above (names, dtypes, shapes), in write order. Throws
// kUsage for a non-2-D shape or a group size that does not divide in, and
// kUnsupported for specs quant::check_fp4_block_specs rejects.
std::vector<io::TensorSpec> fp4_block_weight_specs(const std::string& module, const std::vector<uint64_t>& shape,
                                                   const quant::QuantSpec& first,
                                                   const std::optional<quant::QuantSpec>& second);

// Packs a QuantizedTensor of quant::quantize_fp4_block (validated: codes fit
// 4 bits, one scale per group, each exactly a code of its scale format, a
// positive finite global scale for two-stage specs); kUsage otherwise.
std::vector<ExportedTensor> pack_fp4_block_weight(const std::string& module, const quant::QuantizedTensor& qt);

// Reads them back (exactly what pack_fp4_block_weight was given). kNotFound
// for a missing tensor, kInvalidInput for a layout mismatch, naming it.
quant::QuantizedTensor unpack_fp4_block_weight(const std::string& module, const quant::QuantSpec& first,
                                               const std::optional<quant::QuantSpec>& second,
                                               const TensorLookup& lookup);

// A second stage's global scale tensor (weight_scale_2 / input_scale_2):
// F32 [] holding a positive finite value; kUsage otherwise.
ExportedTensor pack_global_scale(const std::string& name, float value);
// nullopt when the checkpoint has no such tensor; kInvalidInput when it is
// not a positive finite scalar float.
std::optional<float> unpack_global_scale(const std::string& name, const TensorLookup& lookup);

}  // namespace qloom::exporter
