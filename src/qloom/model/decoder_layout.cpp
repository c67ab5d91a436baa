#include "qloom/model/decoder_layout.h"

#include <algorithm>
#include <array>

#include "qloom/core/error.h"
#include "qloom/model/architecture.h"
#include "qloom/model/model_config.h"

namespace qloom::model {
namespace {

constexpr std::array<std::string_view, 4> kFamilies = {"llama", "mistral", "qwen2", "qwen3"};

uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

}  // namespace

// The config is read by the one strict config.json reader (ModelConfig::parse):
// the same fields, defaults and errors as the engine sees.
DecoderShape decoder_shape_from_config(const nlohmann::json& cfg, const std::string& label) {
  if (cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string()) {
    const std::string type = cfg["model_type"].get<std::string>();
    if (std::find(kFamilies.begin(), kFamilies.end(), type) == kFamilies.end())
      throw Error(ErrorKind::kUnsupported, label, "model_type",
                  "model_type '" + type + "' has no dense-decoder layout in qloom yet",
                  "supported: llama, mistral, qwen2, qwen3");
  }
  const ModelConfig c = ModelConfig::parse(cfg, label);
  const Architecture* arch = find_architecture(c.model_type);
  DecoderShape s;
  s.model_type = c.model_type;
  s.hidden_size = u64(c.hidden_size);
  s.intermediate_size = u64(c.intermediate_size);
  s.num_layers = u64(c.num_layers);
  s.num_heads = u64(c.num_heads);
  s.num_kv_heads = u64(c.num_kv_heads);
  s.head_dim = u64(c.head_dim);
  s.vocab_size = u64(c.vocab_size);
  s.tie_word_embeddings = c.tie_word_embeddings;
  s.qkv_bias = c.qkv_bias;
  s.o_bias = c.o_bias;
  s.mlp_bias = c.mlp_bias;
  s.qk_norm = arch != nullptr && arch->qk_norm;
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
    if (s.o_bias) out.push_back({p + "self_attn.o_proj.bias", {h}, TensorRole::kBias});
    if (s.qk_norm) {
      out.push_back({p + "self_attn.q_norm.weight", {s.head_dim}, TensorRole::kNorm});
      out.push_back({p + "self_attn.k_norm.weight", {s.head_dim}, TensorRole::kNorm});
    }
    out.push_back({p + "post_attention_layernorm.weight", {h}, TensorRole::kNorm});
    const uint64_t f = s.intermediate_size;
    out.push_back({p + "mlp.gate_proj.weight", {f, h}, TensorRole::kLinear});
    if (s.mlp_bias) out.push_back({p + "mlp.gate_proj.bias", {f}, TensorRole::kBias});
    out.push_back({p + "mlp.up_proj.weight", {f, h}, TensorRole::kLinear});
    if (s.mlp_bias) out.push_back({p + "mlp.up_proj.bias", {f}, TensorRole::kBias});
    out.push_back({p + "mlp.down_proj.weight", {h, f}, TensorRole::kLinear});
    if (s.mlp_bias) out.push_back({p + "mlp.down_proj.bias", {h}, TensorRole::kBias});
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
