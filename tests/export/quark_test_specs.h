// Hand-built QuantSpecs mirroring AMD Quark 0.12.post1's scheme templates
// (quark/torch/quantization/config/template.py and the *Spec helpers of
// config.py), shared by the export tests. The quant registry builds its own;
// these only pin what the exporter must write for them.
#pragma once

#include <string>
#include <vector>

#include "qloom/quant/quant_spec.h"

namespace qloom::test {

inline quant::QuantSpec base_spec(quant::QDtype d, quant::QScheme q, const char* observer) {
  quant::QuantSpec s;
  s.dtype = d;
  s.qscheme = q;
  s.symmetric = true;
  s.round_method = "half_even";
  s.scale_type = "float";
  s.observer_cls = observer;
  return s;
}

// FP8E4M3PerTensorSpec(observer_method="min_max", scale_type="float")
inline quant::QuantSpec fp8_per_tensor(bool dynamic = false) {
  auto s = base_spec(quant::QDtype::kFp8E4M3, quant::QScheme::kPerTensor, "PerTensorMinMaxObserver");
  s.is_dynamic = dynamic;
  return s;
}
// The KV-cache spec of _set_kv_cache_config: no scale_type.
inline quant::QuantSpec fp8_kv() {
  auto s = fp8_per_tensor();
  s.scale_type = "";
  return s;
}
// FP8E4M3PerChannelSpec(ch_axis=0) / (ch_axis=1, is_dynamic=True)
inline quant::QuantSpec fp8_per_channel(int axis, bool dynamic) {
  auto s = base_spec(quant::QDtype::kFp8E4M3, quant::QScheme::kPerChannel, "PerChannelMinMaxObserver");
  s.ch_axis = axis;
  s.is_dynamic = dynamic;
  return s;
}
inline quant::QuantSpec int8_per_tensor() {
  return base_spec(quant::QDtype::kInt8, quant::QScheme::kPerTensor, "PerTensorMinMaxObserver");
}
inline quant::QuantSpec int4_per_group(int g, bool is_unsigned = false) {
  auto s = base_spec(is_unsigned ? quant::QDtype::kUInt4 : quant::QDtype::kInt4, quant::QScheme::kPerGroup,
                     "PerGroupMinMaxObserver");
  s.ch_axis = -1;
  s.group_size = g;
  s.symmetric = !is_unsigned;
  return s;
}
inline quant::QuantSpec int4_per_channel(bool is_unsigned = false) {
  auto s = base_spec(is_unsigned ? quant::QDtype::kUInt4 : quant::QDtype::kInt4, quant::QScheme::kPerChannel,
                     "PerChannelMinMaxObserver");
  s.ch_axis = 0;
  s.symmetric = !is_unsigned;
  return s;
}
// OCP_MXFP4Spec(ch_axis=-1, is_dynamic=...)
inline quant::QuantSpec mxfp4(bool dynamic = false) {
  auto s = base_spec(quant::QDtype::kFp4, quant::QScheme::kPerGroup, "PerBlockMXObserver");
  s.ch_axis = -1;
  s.group_size = 32;
  s.scale_format = quant::ScaleFormat::kE8M0;
  s.scale_calculation_mode = "even";
  s.is_dynamic = dynamic;
  return s;
}

// The demo model's quantizable modules in torch's named_modules order.
inline std::vector<std::string> demo_modules(int layers = 5) {
  std::vector<std::string> m = {"model.embed_tokens"};
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      m.push_back(p + n);
  }
  m.push_back("lm_head");
  return m;
}

}  // namespace qloom::test
