#include "qloom/export/quark_progressive.h"

#include <bit>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/core/float_codec.h"

namespace qloom::exporter {
namespace {

constexpr const char* kScale = ".weight_scale";
constexpr const char* kZeroPoint = ".weight_zero_point";

void check_pair(const std::string& module, const quant::QuantSpec& first, const quant::QuantSpec& second) {
  if (!quant::is_supported_progressive(first, second))
    throw Error(ErrorKind::kUnsupported, "", module + ".weight",
                std::string("a progressive weight ") + quant::quant_dtype_name(first.dtype) + " -> " +
                    quant::quant_dtype_name(second.dtype) + " is not a layout qloom exports",
                "qloom exports Quark's int4_fp8 progression (static fp8_e4m3 per tensor, then static symmetric int)");
}

// Stage 2's single-stage names -> the "_2" names Quark saves them under.
std::string stage2_name(const std::string& module, const std::string& name) {
  for (const char* suffix : {kScale, kZeroPoint})
    if (name == module + suffix) return name + "_2";
  return name;
}

DType stage1_scale_dtype(const quant::QuantSpec& first, DType model_dtype) {
  return exporter::quark_scale_dtype(first, model_dtype);
}

}  // namespace

std::vector<io::TensorSpec> progressive_weight_specs(const std::string& module, const std::vector<uint64_t>& weight_shape,
                                                     const quant::QuantSpec& first, const quant::QuantSpec& second,
                                                     DType model_dtype, PackOrder order) {
  check_pair(module, first, second);
  std::vector<io::TensorSpec> stage2 = quark_weight_specs(module, weight_shape, second, model_dtype, order);
  std::vector<io::TensorSpec> out;
  out.push_back(stage2.at(0));  // the weight: stage 2's codes
  out.push_back({module + kScale, stage1_scale_dtype(first, model_dtype), {}});
  for (size_t i = 1; i < stage2.size(); ++i) {
    stage2[i].name = stage2_name(module, stage2[i].name);
    out.push_back(std::move(stage2[i]));
  }
  return out;
}

std::vector<ExportedTensor> pack_progressive_weight(const std::string& module, const quant::ProgressiveTensor& t,
                                                    DType model_dtype, PackOrder order) {
  check_pair(module, t.first.spec, t.second.spec);
  const std::string sitem = module + kScale;
  const DType sd = stage1_scale_dtype(t.first.spec, model_dtype);
  if (t.first.scales.size() != 1 || !(t.first.scales[0] > 0.0f) || !std::isfinite(t.first.scales[0]))
    throw Error(ErrorKind::kUsage, "", sitem, "the first stage must hold one positive finite per-tensor scale", "");
  const float s1 = t.first.scales[0];
  if (round_to_dtype(s1, sd) != s1)
    throw Error(ErrorKind::kUsage, "", sitem,
                "scale " + std::to_string(s1) + " is not exactly representable in " + std::string(dtype_name(sd)),
                "quantize with scale_dtype = quark_scale_dtype(first stage, model dtype)");
  std::vector<ExportedTensor> stage2 = pack_quantized_weight(module, t.second, model_dtype, order);
  std::vector<ExportedTensor> out;
  out.push_back(std::move(stage2.at(0)));
  ExportedTensor st{sitem, sd, {}, {}};
  if (sd == DType::kF32) {
    const uint32_t b = std::bit_cast<uint32_t>(s1);
    for (int i = 0; i < 4; ++i) st.data.push_back(static_cast<std::byte>((b >> (8 * i)) & 0xFF));
  } else {
    const uint16_t h = sd == DType::kBF16 ? float_to_bf16(s1) : float_to_f16(s1);
    st.data = {static_cast<std::byte>(h & 0xFF), static_cast<std::byte>(h >> 8)};
  }
  out.push_back(std::move(st));
  for (size_t i = 1; i < stage2.size(); ++i) {
    stage2[i].name = stage2_name(module, stage2[i].name);
    out.push_back(std::move(stage2[i]));
  }
  return out;
}

namespace {

// The lookup stage 2's single-stage reader sees: weight_scale and
// weight_zero_point are the "_2" tensors.
TensorLookup stage2_lookup(const std::string& module, const TensorLookup& lookup) {
  return [module, lookup](const std::string& name) {
    return lookup(stage2_name(module, name));
  };
}

}  // namespace

std::pair<uint64_t, uint64_t> progressive_logical_shape(const std::string& module, const quant::QuantSpec& second,
                                                        const TensorLookup& lookup) {
  return logical_weight_shape(module, second, stage2_lookup(module, lookup));
}

quant::ProgressiveTensor unpack_progressive_weight(const std::string& module, const quant::QuantSpec& first,
                                                   const quant::QuantSpec& second, const TensorLookup& lookup,
                                                   PackOrder order) {
  check_pair(module, first, second);
  quant::ProgressiveTensor t;
  t.second = unpack_quantized_weight(module, second, stage2_lookup(module, lookup), order);
  const auto sv = lookup(module + kScale);
  if (!sv)
    throw Error(ErrorKind::kNotFound, "", module + kScale, "tensor not found in the checkpoint",
                "a progressive (int4_fp8) weight stores its first-stage scale as weight_scale");
  // A scalar read like an activation scale (F32 / BF16 / F16).
  const std::string in_name = module + ".input_scale";
  const auto q = unpack_activation_qparams(module, ActivationRole::kInput, [&](const std::string& n) {
    return n == in_name ? sv : std::optional<io::TensorView>();
  });
  if (sv->numel() != 1 || !q || !(q->scale > 0.0f) || !std::isfinite(q->scale))
    throw Error(ErrorKind::kInvalidInput, "", module + kScale,
                "expected one positive finite first-stage scale, got shape " + format_shape(sv->shape()),
                "the tensor does not have the layout Quark's hf_format export gives int4_fp8");
  t.first.spec = first;
  t.first.shape = t.second.shape;
  t.first.scales = {q->scale};
  t.first.scale_dtype = sv->dtype();
  return t;
}

}  // namespace qloom::exporter
