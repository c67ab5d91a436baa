// QuantSpec: how one tensor (a weight, a linear's input, a linear's output /
// KV cache) is quantized — the C++ form of Quark's QuantizationSpec, whose
// JSON form (16 keys) the exporter writes into quantization_config.
// LayerQuantSpec groups the specs of one linear layer (Quark's
// QuantizationConfig: weight, input_tensors, output_tensors, bias).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace qloom::quant {

// Element formats, named as Quark's Dtype enum values (see quant_dtype_name).
enum class QDtype : uint8_t {
  kInt8, kUInt8, kInt4, kUInt4, kFp8E4M3, kFp8E5M2, kFp4, kFp6E2M3, kFp6E3M2,
  kFp8E5M3,  // AMD's unsigned e5m3 (core/e5m3.h): the global-scale stage of amdfp4_global16/32
};

// Granularity of scales: one per tensor, one per output channel (ch_axis), or
// one per group of group_size consecutive elements along the input dimension.
enum class QScheme : uint8_t { kPerTensor, kPerChannel, kPerGroup };

// How scales are represented (Quark's scale_format): plain floating point
// (null), OCP MX shared E8M0 exponents (power-of-two scales, stored as
// uint8), "float32" (FP4PerGroupSpec, the first stage of nvfp4 /
// amdfp4_global*: f32 scales, which the second stage then quantizes), or
// "e5m3" (AmdFP4Spec: scales rounded to AMD's unsigned fp8 e5m3, stored as
// uint8 codes).
enum class ScaleFormat : uint8_t { kFloat, kE8M0, kFloat32, kE5M3 };
// Quark's scale_format string: "" (null), "e8m0", "float32", "e5m3".
const char* scale_format_name(ScaleFormat f);

struct QuantSpec {
  QDtype dtype = QDtype::kInt8;
  QScheme qscheme = QScheme::kPerTensor;
  bool is_dynamic = false;    // scales computed at run time (activations only)
  bool symmetric = true;      // false: asymmetric with integer zero points (uint4)
  // Quark's ch_axis: 0 for per-channel weights, 1 for per-token activations
  // (ptpc_fp8 input), -1 (the last axis) for per-group and MX specs; written
  // as null for per-tensor specs whatever this field holds.
  int ch_axis = -1;
  int group_size = 0;         // per-group only
  ScaleFormat scale_format = ScaleFormat::kFloat;
  // Quark's remaining spec fields, carried verbatim into the exported JSON.
  std::string round_method = "half_even";
  std::string scale_type = "float";
  std::string scale_calculation_mode;  // e.g. "even" for MX scales; empty = null
  std::string observer_cls;            // e.g. "PerTensorMinMaxObserver"
  // Keys Quark 0.13's QTensorConfig.to_dict() adds (17 keys in all).
  int block_size = 0;                  // MX6 / MX9 first-level block; 0 = null
  std::string zero_point_type = "int32";  // Quark's ZeroPointType name; empty = null
  std::string mx_element_dtype;        // empty = null
  // Second stage of a ScaleQuantSpec: this spec quantizes the first stage's
  // scales (NVFP4's fp8 scales, AMD FP4's e5m3 global scale).
  bool is_scale_quant = false;
  bool enable_buffer_reuse = false;
  int64_t max_input_numel = 4 * 1024 * 1024;

  bool operator==(const QuantSpec&) const = default;
};

// Quark's dtype strings: "int8", "uint8", "int4", "uint4", "fp8_e4m3", "fp8_e5m2",
// "fp4", "fp6_e2m3", "fp6_e3m2", "fp8_e5m3".
const char* quant_dtype_name(QDtype d);
// Bits per element of the quantized codes (8, 4, 6).
int quant_dtype_bits(QDtype d);

struct LayerQuantSpec {
  std::optional<QuantSpec> weight;
  std::optional<QuantSpec> input;   // Quark input_tensors (activation into the linear)
  std::optional<QuantSpec> output;  // Quark output_tensors (KV cache: k_proj / v_proj)
  std::optional<QuantSpec> bias;
  // Two-stage specs (Quark's TwoStageSpec, written as a JSON list [first,
  // second]): a ProgressiveSpec's second stage re-quantizes the first stage's
  // result (int4_fp8: fp8 per-tensor, then int4 per-channel); a
  // ScaleQuantSpec's second stage (is_scale_quant) quantizes the first
  // stage's scales (nvfp4). Empty for single-stage specs.
  std::optional<QuantSpec> weight_stage2;
  std::optional<QuantSpec> input_stage2;
  bool operator==(const LayerQuantSpec&) const = default;
};

}  // namespace qloom::quant
