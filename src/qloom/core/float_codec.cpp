#include "qloom/core/float_codec.h"

#include <cfloat>

namespace qloom {

// Compile-time checks of the reference codec against constants from the
// format definitions (OCP 8-bit FP spec, OCP MX spec, IEEE 754).
static_assert(minifloat_max(kFp8E4M3Format) == 448.0f);
static_assert(minifloat_max(kFp8E5M2Format) == 57344.0f);
static_assert(minifloat_max(kFp6E2M3Format) == 7.5f);
static_assert(minifloat_max(kFp6E3M2Format) == 28.0f);
static_assert(minifloat_max(kFp4E2M1Format) == 6.0f);
static_assert(minifloat_max(kF16Format) == 65504.0f);
static_assert(fp8_e4m3_to_float(0x01) == 0x1p-9f);
static_assert(fp8_e4m3_to_float(0x08) == 0x1p-6f);
static_assert(float_to_fp8_e4m3(448.0f) == 0x7E);
static_assert(float_to_bf16(1.0f) == 0x3F80);
static_assert(float_to_f16(1.0f) == 0x3C00);
static_assert(e8m0_to_float(127) == 1.0f);
static_assert(float_to_e8m0(1.0f) == 127);

const MinifloatFormat* minifloat_format(DType t) {
  switch (t) {
    case DType::kF16: return &kF16Format;
    case DType::kBF16: return &kBF16Format;
    case DType::kF8_E4M3: return &kFp8E4M3Format;
    case DType::kF8_E5M2: return &kFp8E5M2Format;
    case DType::kF6_E2M3: return &kFp6E2M3Format;
    case DType::kF6_E3M2: return &kFp6E3M2Format;
    case DType::kF4_E2M1: return &kFp4E2M1Format;
    default: return nullptr;
  }
}

double dtype_max_finite(DType t) {
  if (const MinifloatFormat* f = minifloat_format(t)) return minifloat_max(*f);
  switch (t) {
    case DType::kF64: return DBL_MAX;
    case DType::kF32: return FLT_MAX;
    case DType::kE8M0: return 0x1p127;
    default: return 0.0;
  }
}

}  // namespace qloom
