// QuantizedTensor: the result of quantizing one weight, in a layout-neutral
// form — one code per element in the weight's own [out, in] order, plus the
// scales (and zero points) as the quantizer used them. The exporter turns it
// into Quark's on-disk layout (transposes, int4 packing, e8m0 bytes); the
// reader of an exported checkpoint turns it back. dequantize() defines what
// the codes mean, so "exported bytes dequantize to the reference" is testable.
#pragma once

#include <cstdint>
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
  // representable in it): kF32 / kBF16 / kF16, or kE8M0 for MX scales.
  DType scale_dtype = DType::kF32;
};

}  // namespace qloom::quant
