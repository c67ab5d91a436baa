#include "qloom/export/fp4_block_tensors.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "qloom/core/e5m3.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/core/format.h"
#include "qloom/core/int4_pack.h"
#include "qloom/export/tensor_lookup.h"
#include "qloom/quant/fp4_block.h"

namespace qloom::exporter {

using quant::QDtype;
using quant::QuantizedTensor;
using quant::QuantSpec;

namespace {

struct Layout {
  uint64_t out = 0, in = 0, groups = 0;
  DType scale_dtype = DType::kU8;  // on disk: F8_E4M3 or U8 (e5m3 codes)
};

bool e4m3_scales(const std::optional<QuantSpec>& second) {
  return second && second->dtype == QDtype::kFp8E4M3;
}

Layout layout(const std::string& module, const std::vector<uint64_t>& shape, const QuantSpec& first,
              const std::optional<QuantSpec>& second) {
  quant::check_fp4_block_specs(first, second, module + ".weight");
  if (shape.size() != 2 || shape[0] == 0 || shape[1] == 0)
    throw Error(ErrorKind::kUsage, "", module + ".weight",
                "a quantized weight must be a non-empty 2-D [out, in] matrix, got shape " + format_shape(shape), "");
  const uint64_t g = static_cast<uint64_t>(first.group_size);
  if (shape[1] % g != 0 || shape[1] % 2 != 0)
    throw Error(ErrorKind::kUsage, "", module + ".weight",
                "group size " + std::to_string(g) + " does not divide in_features " + std::to_string(shape[1]),
                "exclude this layer");
  return {shape[0], shape[1], shape[0] * (shape[1] / g), e4m3_scales(second) ? DType::kF8_E4M3 : DType::kU8};
}

uint8_t scale_code(const std::optional<QuantSpec>& second, float v) {
  return second ? quant::scale_stage_code(*second, v) : float_to_e5m3(v);
}
float scale_value(const std::optional<QuantSpec>& second, uint8_t c) {
  return second ? quant::scale_stage_value(*second, c) : e5m3_to_float(c);
}

}  // namespace

std::string scale2_tensor_name(const std::string& module, ActivationRole role) {
  return module + "." + activation_role_prefix(role) + "_scale_2";
}

std::vector<io::TensorSpec> fp4_block_weight_specs(const std::string& module, const std::vector<uint64_t>& shape,
                                                   const QuantSpec& first, const std::optional<QuantSpec>& second) {
  const Layout L = layout(module, shape, first, second);
  std::vector<io::TensorSpec> s;
  s.push_back({module + ".weight", DType::kU8, {L.out, L.in / 2}});
  s.push_back({module + ".weight_scale", L.scale_dtype, {L.out, L.in / static_cast<uint64_t>(first.group_size)}});
  if (second) s.push_back({module + ".weight_scale_2", DType::kF32, {}});
  return s;
}

ExportedTensor pack_global_scale(const std::string& name, float value) {
  if (!(value > 0.0f) || !std::isfinite(value))
    throw Error(ErrorKind::kUsage, "", name, "a global scale must be positive and finite, got " + std::to_string(value),
                "");
  ExportedTensor t{name, DType::kF32, {}, std::vector<std::byte>(4)};
  const uint32_t b = std::bit_cast<uint32_t>(value);
  for (int i = 0; i < 4; ++i) t.data[i] = static_cast<std::byte>((b >> (8 * i)) & 0xFF);
  return t;
}

std::vector<ExportedTensor> pack_fp4_block_weight(const std::string& module, const QuantizedTensor& qt) {
  const std::optional<QuantSpec>& second = qt.scale_spec;
  const Layout L = layout(module, qt.shape, qt.spec, second);
  const std::string witem = module + ".weight", sitem = module + ".weight_scale";
  const uint64_t n = L.out * L.in;
  if (qt.codes.size() != n)
    throw Error(ErrorKind::kUsage, "", witem, "expected " + std::to_string(n) + " codes, got " + std::to_string(qt.codes.size()), "");
  for (uint64_t i = 0; i < n; ++i)
    if (qt.codes[i] > 15)
      throw Error(ErrorKind::kUsage, "", witem, "code #" + std::to_string(i) + " does not fit 4 bits", "fp4 codes are 0..15");
  if (qt.scales.size() != L.groups)
    throw Error(ErrorKind::kUsage, "", sitem,
                "expected " + std::to_string(L.groups) + " scales, got " + std::to_string(qt.scales.size()), "");
  const DType want = e4m3_scales(second) ? DType::kF8_E4M3 : DType::kU8;
  if (qt.scale_dtype != want)
    throw Error(ErrorKind::kUsage, "", sitem,
                "the QuantizedTensor's scale_dtype is " + std::string(dtype_name(qt.scale_dtype)) + ", expected " +
                    std::string(dtype_name(want)),
                "quantize with quant::quantize_fp4_block");
  std::vector<ExportedTensor> res;
  ExportedTensor wt{witem, DType::kU8, {L.out, L.in / 2}, std::vector<std::byte>(n / 2)};
  pack_nibbles_u8(qt.codes.data(), n, reinterpret_cast<uint8_t*>(wt.data.data()));
  res.push_back(std::move(wt));
  ExportedTensor st{sitem, L.scale_dtype, {L.out, L.in / static_cast<uint64_t>(qt.spec.group_size)},
                    std::vector<std::byte>(L.groups)};
  for (uint64_t i = 0; i < L.groups; ++i) {
    const uint8_t c = scale_code(second, qt.scales[i]);
    if (std::bit_cast<uint32_t>(scale_value(second, c)) != std::bit_cast<uint32_t>(qt.scales[i]))
      throw Error(ErrorKind::kUsage, "", sitem,
                  "scale #" + std::to_string(i) + " (" + std::to_string(qt.scales[i]) + ") is not a value of " +
                      std::string(dtype_name(want)),
                  "quantize with quant::quantize_fp4_block");
    st.data[i] = static_cast<std::byte>(c);
  }
  res.push_back(std::move(st));
  if (second) res.push_back(pack_global_scale(module + ".weight_scale_2", qt.global_scale));
  return res;
}

std::optional<float> unpack_global_scale(const std::string& name, const TensorLookup& lookup) {
  auto v = lookup(name);
  if (!v) return std::nullopt;
  if (v->numel() != 1) tensor_layout_error(name, "expected a scalar, got shape " + format_shape(v->shape()));
  float s = 0.0f;
  switch (v->dtype()) {
    case DType::kF32: std::memcpy(&s, v->data.data(), 4); break;
    case DType::kBF16: s = bf16_to_float(static_cast<uint16_t>(static_cast<uint8_t>(v->data[0]) |
                                                                 (static_cast<uint8_t>(v->data[1]) << 8))); break;
    default: tensor_layout_error(name, "expected an F32 (or BF16) scalar, got " + std::string(dtype_name(v->dtype())));
  }
  if (!(s > 0.0f) || !std::isfinite(s)) tensor_layout_error(name, "the global scale " + std::to_string(s) + " is not positive and finite");
  return s;
}

QuantizedTensor unpack_fp4_block_weight(const std::string& module, const QuantSpec& first,
                                        const std::optional<QuantSpec>& second, const TensorLookup& lookup) {
  const io::TensorView wv = need_tensor(lookup, module + ".weight");
  const io::TensorView sv = need_tensor(lookup, module + ".weight_scale");
  if (wv.shape().size() != 2) tensor_layout_error(wv.name(), "expected a 2-D tensor, got " + format_shape(wv.shape()));
  const Layout L = layout(module, {wv.shape()[0], wv.shape()[1] * 2}, first, second);
  expect_tensor_layout(wv, DType::kU8, {L.out, L.in / 2});
  expect_tensor_layout(sv, L.scale_dtype, {L.out, L.in / static_cast<uint64_t>(first.group_size)});
  QuantizedTensor qt;
  qt.spec = first;
  qt.shape = {L.out, L.in};
  qt.codes.resize(L.out * L.in);
  unpack_nibbles_u8(reinterpret_cast<const uint8_t*>(wv.data.data()), qt.codes.size(), qt.codes.data());
  qt.scale_dtype = e4m3_scales(second) ? DType::kF8_E4M3 : DType::kU8;
  qt.scales.resize(L.groups);
  for (uint64_t i = 0; i < L.groups; ++i) {
    const uint8_t c = static_cast<uint8_t>(sv.data[i]);
    qt.scales[i] = scale_value(second, c);
    if (std::isnan(qt.scales[i])) tensor_layout_error(sv.name(), "scale #" + std::to_string(i) + " is NaN");
  }
  if (second) {
    const auto g = unpack_global_scale(module + ".weight_scale_2", lookup);
    if (!g)
      throw Error(ErrorKind::kNotFound, "", module + ".weight_scale_2", "tensor not found in the checkpoint",
                  "a two-stage (scale-quantized) weight needs its global scale");
    qt.scale_spec = second;
    qt.global_scale = *g;
  }
  return qt;
}

}  // namespace qloom::exporter
