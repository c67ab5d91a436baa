// The hf_format layout of a progressive (two-stage) weight, Quark's
// ProgressiveSpec (int4_fp8: fp8 e4m3 per tensor, then int4 per channel; see
// quant/progressive.h for the maths).
//
// Quark's SequentialRealQuantizer is an nn.Sequential: its stages' buffers
// are weight_quantizer.0.scale (fp8 stage; no zero point, fp8 is not an
// integer format) and weight_quantizer.1.scale / .1.zero_point (int4 stage),
// saved as weight_scale, weight_scale_2 and weight_zero_point_2
// (export/utils.py _fix_state_dict_key_on_save: index 0 -> no suffix, index i
// -> "_" + (i + 1); export/constants.py LOAD_MAP_MULTI). The stored weight is
// the LAST tensor stage's result, packed by its PackMethod. So for int4_fp8:
//   <module>.weight              I32 [out, in / 8]  int4 per-channel codes (Pack_4_bits)
//   <module>.weight_scale        F32 []             stage-1 (fp8) scale s1
//   <module>.weight_scale_2      F32 [out]          stage-2 (int4) scales s2
//   <module>.weight_zero_point_2 I32 [out / 8]      stage-2 zero points (0, packed)
// Stage 2's tensors are exactly a single-stage weight's (quark_tensors.h)
// under the "_2" names; the scale dtypes follow quark_scale_dtype of each
// stage (scale_type "float32": F32 whatever the model dtype).
#pragma once

#include <string>
#include <vector>

#include "qloom/core/int4_pack.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/progressive.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::exporter {

// Shapes and dtypes, in write order (weight, weight_scale, weight_scale_2,
// weight_zero_point_2 when stage 2 has one). Throws kUnsupported for a pair
// quant::is_supported_progressive refuses, and what quark_weight_specs
// throws for stage 2's layout.
std::vector<io::TensorSpec> progressive_weight_specs(const std::string& module,
                                                     const std::vector<uint64_t>& weight_shape,
                                                     const quant::QuantSpec& first, const quant::QuantSpec& second,
                                                     DType model_dtype, PackOrder order = PackOrder::kReorder);

// The tensors of progressive_weight_specs with their values. Validates like
// pack_quantized_weight (stage 2) and checks stage 1 holds one scale.
std::vector<ExportedTensor> pack_progressive_weight(const std::string& module, const quant::ProgressiveTensor& t,
                                                    DType model_dtype, PackOrder order = PackOrder::kReorder);

// Reads them back (first.codes stays empty). Throws like
// unpack_quantized_weight, kInvalidInput for a non-scalar or non-positive
// weight_scale.
quant::ProgressiveTensor unpack_progressive_weight(const std::string& module, const quant::QuantSpec& first,
                                                   const quant::QuantSpec& second, const TensorLookup& lookup,
                                                   PackOrder order = PackOrder::kReorder);

// The logical [out, in] of a stored progressive weight (from stage 2's layout).
std::pair<uint64_t, uint64_t> progressive_logical_shape(const std::string& module, const quant::QuantSpec& second,
                                                        const TensorLookup& lookup);

}  // namespace qloom::exporter
