#include "qloom/engine/native/qlinear.h"

#include <cmath>

#include "qloom/core/error.h"
#include "qloom/engine/native/bf16dot_linear.h"
#include "qloom/engine/native/int8_linear.h"
#include "qloom/engine/native/packed4_linear.h"

namespace qloom::engine {
namespace {

[[noreturn]] void bad(const QuantLinearData& d, const std::string& what, const std::string& fix) {
  throw Error(ErrorKind::kInvalidInput, "", d.name.empty() ? "native linear" : d.name, what, fix);
}

size_t scale_count(const QuantLinearData& d) {
  if (d.group == 0) return 1;
  return static_cast<size_t>(d.out * (d.in / d.group));
}

void validate(const QuantLinearData& d) {
  if (d.out < 0 || d.in < 0) bad(d, "negative shape", "pass the weight's [out, in]");
  const size_t n = static_cast<size_t>(d.out * d.in);
  const size_t code_bytes = d.weight == QWeightFormat::kBf16 ? 2 * n : n;
  if (d.codes.size() != code_bytes)
    bad(d, "has " + std::to_string(d.codes.size()) + " code bytes, expected " + std::to_string(code_bytes),
        "pass one code per element of the [out, in] weight");
  if (d.weight == QWeightFormat::kBf16) return;
  if (d.group < 0 || (d.group > 0 && d.in % d.group != 0))
    bad(d, "scale group " + std::to_string(d.group) + " does not divide in = " + std::to_string(d.in),
        "use per-tensor (0), per-channel (in) or a group size dividing in");
  if (d.scales.size() != scale_count(d))
    bad(d, "has " + std::to_string(d.scales.size()) + " scales, expected " + std::to_string(scale_count(d)),
        "pass scales laid out [out, in / group]");
  for (const float s : d.scales)
    if (!std::isfinite(s) || s < 0.0f) bad(d, "has a scale that is negative, NaN or infinite", "re-export the checkpoint");
  const bool zp = d.weight == QWeightFormat::kUInt4;
  if (zp != !d.zero_points.empty() || (zp && d.zero_points.size() != d.scales.size()))
    bad(d, "zero points given for a symmetric format or missing for uint4", "pass zero points for uint4 only");
  for (const int32_t z : d.zero_points)
    if (z < 0 || z > 15) bad(d, "has a uint4 zero point outside [0, 15]", "re-export the checkpoint");
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = d.codes[i];
    const bool ok = d.weight == QWeightFormat::kInt4    ? (static_cast<int8_t>(c) >= -8 && static_cast<int8_t>(c) <= 7)
                    : d.weight == QWeightFormat::kUInt4 ? c <= 15
                    : d.weight == QWeightFormat::kMxfp4 ? c <= 15
                                                        : true;
    if (!ok) bad(d, "code " + std::to_string(c) + " at element " + std::to_string(i) + " is out of range for " +
                     qweight_format_name(d.weight), "re-export the checkpoint");
  }
  const bool is_static = d.act == QActFormat::kInt8PerTensor || d.act == QActFormat::kFp8PerTensor;
  if (is_static && !(std::isfinite(d.act_scale) && d.act_scale > 0.0f))
    bad(d, "static activation scale " + std::to_string(d.act_scale) + " is not a finite positive number",
        "re-export the checkpoint with its calibrated input_scale");
}

}  // namespace

const char* qweight_format_name(QWeightFormat f) {
  switch (f) {
    case QWeightFormat::kInt8: return "int8";
    case QWeightFormat::kFp8E4M3: return "fp8_e4m3";
    case QWeightFormat::kInt4: return "int4";
    case QWeightFormat::kUInt4: return "uint4";
    case QWeightFormat::kMxfp4: return "mxfp4";
    case QWeightFormat::kBf16: return "bf16";
  }
  return "?";
}

const char* qact_format_name(QActFormat f) {
  switch (f) {
    case QActFormat::kF32: return "f32";
    case QActFormat::kBf16: return "bf16";
    case QActFormat::kInt8PerTensor: return "int8 per-tensor";
    case QActFormat::kInt8PerToken: return "int8 per-token";
    case QActFormat::kFp8PerTensor: return "fp8 per-tensor";
    case QActFormat::kFp8PerToken: return "fp8 per-token";
  }
  return "?";
}

bool quant_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in) {
  switch (weight) {
    case QWeightFormat::kInt8: return native::int8_linear_supported(act, group, in);
    case QWeightFormat::kFp8E4M3:
    case QWeightFormat::kBf16: return native::bf16dot_linear_supported(weight, act, group, in);
    case QWeightFormat::kInt4:
    case QWeightFormat::kUInt4:
    case QWeightFormat::kMxfp4: return native::packed4_linear_supported(weight, act, group, in);
  }
  return false;
}

std::shared_ptr<const QuantLinear> make_quant_linear(QuantLinearData data) {
  if (!quant_linear_supported(data.weight, data.act, data.group, data.in))
    throw Error(ErrorKind::kUnsupported, "", data.name.empty() ? "native linear" : data.name,
                std::string("no native kernel for ") + qweight_format_name(data.weight) + " weights (group " +
                    std::to_string(data.group) + ") with " + qact_format_name(data.act) + " activations",
                "use --runtime simulate for this checkpoint");
  validate(data);
  switch (data.weight) {
    case QWeightFormat::kInt8: return native::make_int8_linear(std::move(data));
    case QWeightFormat::kFp8E4M3:
    case QWeightFormat::kBf16: return native::make_bf16dot_linear(std::move(data));
    default: return native::make_packed4_linear(std::move(data));
  }
}

}  // namespace qloom::engine
