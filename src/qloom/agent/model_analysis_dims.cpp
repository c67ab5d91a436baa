// The model's shape for the analysis (model_analysis_internal.h): from
// qloom's engine parse for the model types it runs, else from config.json's
// raw fields in the generic Hugging Face decoder layout.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qloom/agent/model_analysis_internal.h"
#include "qloom/core/error.h"
#include "qloom/model/architecture.h"
#include "qloom/model/model_config.h"

namespace qloom::agent::detail {
namespace {

using json = nlohmann::json;

// A positive integer the shape needs; 0 and the key added to `missing` when
// the config does not state it.
int64_t required_positive(const Fields& f, const char* key, std::vector<std::string>& missing) {
  const auto v = f.positive(key);
  if (!v) missing.emplace_back(key);
  return v.value_or(0);
}

// MLA attention (DeepSeek): the LoRA ranks and head dimensions.
Mla mla_from_config(const Fields& f, std::vector<std::string>& missing) {
  Mla m;
  m.kv_lora = f.positive("kv_lora_rank").value_or(0);
  m.q_lora = f.non_negative("q_lora_rank").value_or(0);
  m.nope = required_positive(f, "qk_nope_head_dim", missing);
  m.rope = required_positive(f, "qk_rope_head_dim", missing);
  m.v = required_positive(f, "v_head_dim", missing);
  return m;
}

// Qwen-style MoE layer selection: every decoder_sparse_step-th layer, except
// mlp_only_layers.
void qwen_moe_layers(const Fields& f, Dims& d) {
  const int64_t step = f.positive("decoder_sparse_step").value_or(1);
  std::vector<int64_t> mlp_only;
  if (const json* m = f.find("mlp_only_layers")) {
    if (!m->is_array()) f.bad("mlp_only_layers", "must be a list of layer indices");
    for (const json& e : *m) {
      if (!e.is_number_integer()) f.bad("mlp_only_layers", "must be a list of layer indices");
      mlp_only.push_back(e.get<int64_t>());
    }
  }
  for (int64_t i = 0; i < d.layers; ++i) {
    const bool only = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
    d.layer_moe[size_t(i)] = (!only && (i + 1) % step == 0) ? 1 : 0;
  }
}

// MoE: the first expert-count field present; which layers are MoE blocks.
void moe_from_config(const Fields& f, const std::string& model_type, Dims& d, std::vector<std::string>& missing) {
  std::optional<int64_t> experts;
  const char* experts_key = nullptr;
  for (const char* key : {"n_routed_experts", "num_local_experts", "num_experts"}) {
    if ((experts = f.non_negative(key))) {
      experts_key = key;
      break;
    }
  }
  d.layer_moe.assign(static_cast<size_t>(std::max<int64_t>(d.layers, 0)), 0);
  if (!experts || *experts <= 0) return;
  d.experts = *experts;
  d.experts_per_tok = f.positive("num_experts_per_tok").value_or(0);
  d.moe_inter = f.positive("moe_intermediate_size").value_or(d.inter);
  const bool deepseek = std::string(experts_key) == "n_routed_experts";
  d.moe_naming = model_type == "mixtral" ? "mixtral" : deepseek ? "deepseek" : "qwen";
  if (deepseek) {
    d.shared_inter = f.non_negative("n_shared_experts").value_or(0) * d.moe_inter;
    const int64_t first_dense = f.non_negative("first_k_dense_replace").value_or(0);
    const int64_t freq = f.positive("moe_layer_freq").value_or(1);
    for (int64_t i = 0; i < d.layers; ++i) d.layer_moe[size_t(i)] = (i >= first_dense && i % freq == 0) ? 1 : 0;
  } else {
    d.shared_inter = f.non_negative("shared_expert_intermediate_size").value_or(0);
    d.shared_gate = d.shared_inter > 0;
    qwen_moe_layers(f, d);
  }
  if (d.moe_inter == 0) missing.emplace_back("moe_intermediate_size");
}

}  // namespace

// ---- Fields ----

const json* Fields::find(const char* key) const {
  auto it = cfg.find(key);
  if (it != cfg.end() && !it->is_null()) return &*it;
  auto tc = cfg.find("text_config");
  if (tc != cfg.end() && tc->is_object()) {
    auto it2 = tc->find(key);
    if (it2 != tc->end() && !it2->is_null()) return &*it2;
  }
  return nullptr;
}

void Fields::bad(const char* key, const char* what) const {
  throw_invalid(file, key, std::string("config field \"") + key + "\" " + what,
                "fix config.json (it must be the model's Hugging Face config)");
}

std::optional<int64_t> Fields::integer(const char* key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(key, "must be an integer");
  return v->get<int64_t>();
}

std::optional<int64_t> Fields::positive(const char* key) const {
  auto v = integer(key);
  if (v && *v <= 0) bad(key, "must be positive");
  return v;
}

std::optional<int64_t> Fields::non_negative(const char* key) const {
  auto v = integer(key);
  if (v && *v < 0) bad(key, "must not be negative");
  return v;
}

std::optional<std::string> Fields::string(const char* key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(key, "must be a string");
  return v->get<std::string>();
}

std::optional<bool> Fields::boolean(const char* key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, "must be true or false");
  return v->get<bool>();
}

// ---- Dims ----

Dims dims_from_engine(const model::ModelConfig& mc) {
  const model::Architecture& a = *model::find_architecture(mc.model_type);
  Dims d;
  d.from_engine = true;
  d.hidden = mc.hidden_size;
  d.inter = mc.intermediate_size;
  d.layers = mc.num_layers;
  d.heads = mc.num_heads;
  d.kv_heads = mc.num_kv_heads;
  d.head_dim = mc.head_dim;
  d.vocab = mc.vocab_size;
  d.tie = mc.tie_word_embeddings;
  d.qkv_bias = mc.qkv_bias;
  d.o_bias = mc.o_bias;
  d.mlp_bias = mc.mlp_bias;
  d.qk_norm = a.qk_norm;
  d.sandwich = a.sandwich_norms;
  d.fused_qkv = a.fused_qkv;
  d.fused_gate_up = a.fused_gate_up;
  d.max_position = mc.max_position_embeddings;
  d.layer_moe = mc.layer_moe;
  if (a.moe != model::MoeKind::kNone && mc.num_experts > 0) {
    d.experts = mc.num_experts;
    d.experts_per_tok = mc.num_experts_per_tok;
    d.moe_inter = mc.moe_intermediate_size;
    d.shared_inter = mc.shared_expert_intermediate_size;
    d.shared_gate = a.moe == model::MoeKind::kQwen2Moe && d.shared_inter > 0;
    d.moe_naming = a.moe == model::MoeKind::kMixtral ? "mixtral" : "qwen";
  } else {
    d.layer_moe.assign(static_cast<size_t>(d.layers), 0);
  }
  d.layout = d.fused_qkv ? "phi3" : d.experts == 0 ? "llama" : d.moe_naming == "mixtral" ? "mixtral" : "qwen_moe";
  return d;
}

Dims dims_from_config(const Fields& f, const std::string& model_type, std::vector<std::string>& missing) {
  Dims d;
  d.hidden = required_positive(f, "hidden_size", missing);
  d.layers = required_positive(f, "num_hidden_layers", missing);
  d.heads = required_positive(f, "num_attention_heads", missing);
  d.vocab = required_positive(f, "vocab_size", missing);
  d.kv_heads = f.positive("num_key_value_heads").value_or(d.heads);
  d.head_dim = f.positive("head_dim").value_or(d.heads > 0 ? d.hidden / d.heads : 0);
  d.tie = f.boolean("tie_word_embeddings").value_or(false);
  const bool attn_bias = f.boolean("attention_bias").value_or(false);
  d.qkv_bias = attn_bias;
  d.o_bias = attn_bias;
  d.mlp_bias = f.boolean("mlp_bias").value_or(false);
  d.max_position = f.positive("max_position_embeddings").value_or(0);
  const auto inter = f.positive("intermediate_size");
  d.inter = inter.value_or(0);
  if (f.find("kv_lora_rank")) d.mla = mla_from_config(f, missing);
  moe_from_config(f, model_type, d, missing);
  const bool any_dense = std::find(d.layer_moe.begin(), d.layer_moe.end(), 0) != d.layer_moe.end();
  if (!inter && any_dense) missing.emplace_back("intermediate_size");
  d.layout = d.mla || d.moe_naming == "deepseek" ? "deepseek"
             : d.experts == 0                    ? "llama"
             : d.moe_naming == "mixtral"         ? "mixtral"
                                                 : "qwen_moe";
  return d;
}

}  // namespace qloom::agent::detail
