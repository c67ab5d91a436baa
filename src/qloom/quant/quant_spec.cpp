#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

const char* quant_dtype_name(QDtype d) {
  switch (d) {
    case QDtype::kInt8: return "int8";
    case QDtype::kUInt8: return "uint8";
    case QDtype::kInt4: return "int4";
    case QDtype::kUInt4: return "uint4";
    case QDtype::kFp8E4M3: return "fp8_e4m3";
    case QDtype::kFp8E5M2: return "fp8_e5m2";
    case QDtype::kFp4: return "fp4";
    case QDtype::kFp6E2M3: return "fp6_e2m3";
    case QDtype::kFp6E3M2: return "fp6_e3m2";
    case QDtype::kFp8E5M3: return "fp8_e5m3";
  }
  return "?";
}

const char* scale_format_name(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::kFloat: return "";
    case ScaleFormat::kE8M0: return "e8m0";
    case ScaleFormat::kFloat32: return "float32";
    case ScaleFormat::kE5M3: return "e5m3";
  }
  return "?";
}

int quant_dtype_bits(QDtype d) {
  switch (d) {
    case QDtype::kInt8:
    case QDtype::kUInt8:
    case QDtype::kFp8E4M3:
    case QDtype::kFp8E5M2:
    case QDtype::kFp8E5M3: return 8;
    case QDtype::kInt4:
    case QDtype::kUInt4:
    case QDtype::kFp4: return 4;
    case QDtype::kFp6E2M3:
    case QDtype::kFp6E3M2: return 6;
  }
  return 0;
}

}  // namespace qloom::quant
