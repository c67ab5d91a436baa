#include "qloom/quant/layer_tensors.h"

#include "qloom/core/error.h"
#include "qloom/model/architecture.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void not_found(const std::string& name, const std::string& why) {
  throw Error(ErrorKind::kNotFound, "", name, why, "name a norm, linear weight or bias of the loaded decoder layer");
}

}  // namespace

LayerTensorRef find_layer_tensor(engine::LayerRunner& runner, const std::string& name) {
  const int64_t layer = runner.loaded_layer();
  if (layer < 0) throw Error(ErrorKind::kUsage, "", name, "no decoder layer is loaded");
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  if (name.rfind(prefix, 0) != 0) not_found(name, "the tensor is not in the loaded layer " + std::to_string(layer));
  const std::string rel = name.substr(prefix.size());
  engine::LayerWeights& L = runner.layer_weights();
  const model::Architecture* arch = model::find_architecture(runner.config().model_type);
  LayerTensorRef ref;
  ref.gemma = arch != nullptr && arch->gemma_norm;
  if (rel == "input_layernorm.weight") ref.norm = &L.input_norm;
  else if (rel == "post_attention_layernorm.weight") ref.norm = &L.post_attention_norm;
  else if (rel == "pre_feedforward_layernorm.weight") ref.norm = &L.pre_ff_norm;
  else if (rel == "post_feedforward_layernorm.weight") ref.norm = &L.post_ff_norm;
  else if (rel == "self_attn.q_norm.weight") ref.norm = &L.attn.q_norm;
  else if (rel == "self_attn.k_norm.weight") ref.norm = &L.attn.k_norm;
  if (ref.norm != nullptr) {
    if (ref.norm->empty()) not_found(name, "this architecture's layer has no such norm");
    return ref;
  }
  ref.gemma = false;
  if (ends_with(name, ".weight")) {
    ref.module = name.substr(0, name.size() - 7);
  } else if (ends_with(name, ".bias")) {
    ref.module = name.substr(0, name.size() - 5);
    ref.bias = true;
  } else {
    not_found(name, "not a norm, linear weight or linear bias");
  }
  ref.linear = &runner.linear(ref.module);  // kNotFound naming the module
  if (ref.bias && ref.linear->bias.empty()) not_found(name, "the linear has no bias");
  return ref;
}

FloatTensor layer_tensor_value(const LayerTensorRef& t) {
  FloatTensor out;
  if (t.norm != nullptr) {
    out.shape = {static_cast<int64_t>(t.norm->size())};
    out.values = *t.norm;
    if (t.gemma)
      for (float& v : out.values) v -= 1.0f;
    return out;
  }
  if (t.linear == nullptr) throw Error(ErrorKind::kInternal, "", "tensor", "empty layer tensor reference");
  if (t.bias) {
    out.shape = {static_cast<int64_t>(t.linear->bias.size())};
    out.values = t.linear->bias;
  } else {
    out.shape = {t.linear->out, t.linear->in};
    out.values = t.linear->values_f32();
  }
  return out;
}

void round_layer_tensor(const LayerTensorRef& t, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return;
  if (t.norm != nullptr) {
    for (float& v : *t.norm) {
      if (t.gemma) v = 1.0f + detail::round_to(dtype, v - 1.0f);
      else v = detail::round_to(dtype, v);
    }
    return;
  }
  if (t.linear == nullptr) return;
  if (t.bias) {
    for (float& v : t.linear->bias) v = detail::round_to(dtype, v);
  } else if (t.linear->type == engine::WeightType::kF32) {
    for (float& v : t.linear->f32) v = detail::round_to(dtype, v);
  }  // BF16 weights: the engine holds them so only for bf16 checkpoints
}

}  // namespace qloom::quant
