// QuantizedTensor: the result of quantizing one weight, in a layout-neutral
// form — one code per element in the weight's own [out, in] order, plus the
// scales (and zero points) as the quantizer used them. The exporter turns it
// into Quark's on-disk layout (transposes, int4 packing, e8m0 bytes); the
// reader of an exported checkpoint turns it back. dequantize() defines what
// the codes mean, so "exported bytes dequantize to the reference" is testable.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

struct QuantizedTensor {
  QuantSpec spec;
  std::vector<uint64_t> shape;  // the weight's logical shape, [out, in] for linears
  // One code per element, row-major over `shape`: int8 as its two's-complement
  // byte, int4 as a sign-extended int8 in [-8, 7] stored in a byte, uint4 /
  // uint8 as their value, fp8 / fp6 / fp4 as their bit pattern (low bits).
  std::vector<uint8_t> codes;
  // Scales exactly as used to compute the codes (already rounded to the dtype
  // they are stored in): per-tensor [1], per-channel [out], per-group
  // [out, in / group_size]. E8M0 scales are powers of two held as floats.
  std::vector<float> scales;
  // Asymmetric only, same layout as scales; empty when symmetric.
  std::vector<int32_t> zero_points;
  // The dtype `scales` are stored in (every value in `scales` is exactly
  // representable in it): kF32 / kBF16 / kF16, kE8M0 for MX scales, kU8 for
  // AMD's e5m3 scales (uint8 codes, core/e5m3.h; spec.scale_format kE5M3 or a
  // fp8_e5m3 scale_spec), kF8_E4M3 for nvfp4's quantized first-stage scales.
  DType scale_dtype = DType::kF32;
  // Two-stage scale quantization (Quark's ScaleQuantSpec: nvfp4,
  // amdfp4_global16/32): the second stage (is_scale_quant, per tensor) and
  // its global scale (exported as weight_scale_2). `scales` then hold the
  // first stage's scales in the second stage's units (fp8 e4m3 / e5m3
  // values), and a group's effective scale is the f32 product
  // scales[g] * global_scale (group_scale). nullopt: a single-stage spec.
  std::optional<QuantSpec> scale_spec;
  float global_scale = 1.0f;
};

// The scale that multiplies the codes of scale group `i` (f32).
inline float group_scale(const QuantizedTensor& t, uint64_t i) {
  return t.scale_spec ? t.scales[i] * t.global_scale : t.scales[i];
}

}  // namespace qloom::quant
