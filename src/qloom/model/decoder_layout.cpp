#include "qloom/model/decoder_layout.h"

#include <algorithm>
#include <array>

#include "qloom/core/error.h"

namespace qloom::model {
namespace {

constexpr std::array<std::string_view, 4> kFamilies = {"llama", "mistral", "qwen2", "qwen3"};

uint64_t positive_int(const nlohmann::json& cfg, const char* key, const std::string& label) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null())
    throw_invalid(label, key, "required field is missing", "add it to config.json");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0)
    throw_invalid(label, key, "must be a positive integer, got " + it->dump(),
                  "fix the value in config.json");
  return it->get<uint64_t>();
}

bool flag(const nlohmann::json& cfg, const char* key, bool fallback) {
  auto it = cfg.find(key);
  return (it != cfg.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

}  // namespace

DecoderShape decoder_shape_from_config(const nlohmann::json& cfg, const std::string& label) {
  if (!cfg.is_object()) throw_invalid(label, "", "config must be a JSON object");
  DecoderShape s;
  auto mt = cfg.find("model_type");
  if (mt == cfg.end() || !mt->is_string())
    throw_invalid(label, "model_type", "missing or not a string", "add \"model_type\" to config.json");
  s.model_type = mt->get<std::string>();
  if (std::find(kFamilies.begin(), kFamilies.end(), s.model_type) == kFamilies.end())
    throw Error(ErrorKind::kUnsupported, label, "model_type",
                "model_type '" + s.model_type + "' has no dense-decoder layout in qloom yet",
                "supported: llama, mistral, qwen2, qwen3");
  s.hidden_size = positive_int(cfg, "hidden_size", label);
  s.intermediate_size = positive_int(cfg, "intermediate_size", label);
  s.num_layers = positive_int(cfg, "num_hidden_layers", label);
  s.num_heads = positive_int(cfg, "num_attention_heads", label);
  s.num_kv_heads = cfg.contains("num_key_value_heads") && !cfg["num_key_value_heads"].is_null()
                       ? positive_int(cfg, "num_key_value_heads", label)
                       : s.num_heads;
  s.vocab_size = positive_int(cfg, "vocab_size", label);
  if (cfg.contains("head_dim") && !cfg["head_dim"].is_null()) {
    s.head_dim = positive_int(cfg, "head_dim", label);
  } else {
    if (s.hidden_size % s.num_heads != 0)
      throw_invalid(label, "num_attention_heads",
                    "hidden_size " + std::to_string(s.hidden_size) + " is not divisible by " +
                        std::to_string(s.num_heads) + " heads and no head_dim is given",
                    "set head_dim in config.json");
    s.head_dim = s.hidden_size / s.num_heads;
  }
  if (s.num_heads % s.num_kv_heads != 0)
    throw_invalid(label, "num_key_value_heads",
                  std::to_string(s.num_heads) + " attention heads are not a multiple of " +
                      std::to_string(s.num_kv_heads) + " key/value heads",
                  "fix num_key_value_heads in config.json");
  s.tie_word_embeddings = flag(cfg, "tie_word_embeddings", false);
  s.qkv_bias = s.model_type == "qwen2" || flag(cfg, "attention_bias", false);
  s.qk_norm = s.model_type == "qwen3";
  return s;
}

std::vector<LayoutTensor> decoder_tensors(const DecoderShape& s) {
  std::vector<LayoutTensor> out;
  const uint64_t h = s.hidden_size, q = s.num_heads * s.head_dim, kv = s.num_kv_heads * s.head_dim;
  out.push_back({"model.embed_tokens.weight", {s.vocab_size, h}, TensorRole::kEmbedding});
  for (uint64_t l = 0; l < s.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {h}, TensorRole::kNorm});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}, TensorRole::kLinear});
    if (s.qkv_bias) out.push_back({p + "self_attn.q_proj.bias", {q}, TensorRole::kBias});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}, TensorRole::kLinear});
    if (s.qkv_bias) out.push_back({p + "self_attn.k_proj.bias", {kv}, TensorRole::kBias});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}, TensorRole::kLinear});
    if (s.qkv_bias) out.push_back({p + "self_attn.v_proj.bias", {kv}, TensorRole::kBias});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}, TensorRole::kLinear});
    if (s.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {s.head_dim}, TensorRole::kNorm});
      out.push_back({p + "self_attn.k_norm.weight", {s.head_dim}, TensorRole::kNorm});
    }
    out.push_back({p + "post_attention_layernorm.weight", {h}, TensorRole::kNorm});
    out.push_back({p + "mlp.gate_proj.weight", {s.intermediate_size, h}, TensorRole::kLinear});
    out.push_back({p + "mlp.up_proj.weight", {s.intermediate_size, h}, TensorRole::kLinear});
    out.push_back({p + "mlp.down_proj.weight", {h, s.intermediate_size}, TensorRole::kLinear});
  }
  out.push_back({"model.norm.weight", {h}, TensorRole::kNorm});
  if (!s.tie_word_embeddings) out.push_back({"lm_head.weight", {s.vocab_size, h}, TensorRole::kLmHead});
  return out;
}

uint64_t decoder_parameter_count(const DecoderShape& s) {
  uint64_t n = 0;
  for (const auto& t : decoder_tensors(s)) {
    uint64_t e = 1;
    for (uint64_t d : t.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace qloom::model
