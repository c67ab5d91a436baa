// The model analysis's shared pieces (internal to agent/model_analysis*.cpp;
// see model_analysis.h):
//   model_analysis_dims.cpp     config fields -> the model's shape (Dims)
//   model_analysis_layout.cpp   Dims -> linear-layer groups (Layout), layer ranges
//   model_analysis.cpp          analyze_config / analyze_model: risks, the artifact
//   model_analysis_summary.cpp  the "Model Analysis:" block
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::model {
struct ModelConfig;
}

namespace qloom::agent::detail {

// Looks a key up at the top level, then in "text_config" (multimodal configs
// keep the language model's dimensions there). null counts as absent. A
// present value of the wrong type is a malformed config (kInvalidInput
// naming `file` and the key).
struct Fields {
  const nlohmann::json& cfg;
  const std::string& file;

  const nlohmann::json* find(const char* key) const;
  [[noreturn]] void bad(const char* key, const char* what) const;
  std::optional<int64_t> integer(const char* key) const;
  std::optional<int64_t> positive(const char* key) const;
  std::optional<int64_t> non_negative(const char* key) const;
  std::optional<std::string> string(const char* key) const;
  std::optional<bool> boolean(const char* key) const;
  bool has(const char* key) const { return cfg.contains(key); }
};

// ---- the model's shape, from the engine's parse or the raw config ----

struct Mla {
  int64_t q_lora = 0;  // 0: plain q_proj
  int64_t kv_lora = 0, nope = 0, rope = 0, v = 0;
};

struct Dims {
  std::string layout;   // "llama" | "phi3" | "mixtral" | "qwen_moe" | "deepseek"
  bool from_engine = false;
  int64_t hidden = 0, inter = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  bool tie = false, qkv_bias = false, o_bias = false, mlp_bias = false;
  bool qk_norm = false, sandwich = false, fused_qkv = false, fused_gate_up = false;
  std::optional<Mla> mla;
  // MoE.
  int64_t experts = 0, experts_per_tok = 0, moe_inter = 0, shared_inter = 0;
  bool shared_gate = false;            // qwen2_moe's mlp.shared_expert_gate
  std::string moe_naming;              // "mixtral" | "qwen" | "deepseek"
  std::vector<uint8_t> layer_moe;      // per layer: 1 = MoE block
  int64_t max_position = 0;
};

// The engine's parse of a model type it runs (mc.model_type must be one).
Dims dims_from_engine(const model::ModelConfig& mc);
// Generic HF decoder layout from the raw fields. `missing` collects the facts
// the config does not state; the caller turns them into a partial analysis.
Dims dims_from_config(const Fields& f, const std::string& model_type, std::vector<std::string>& missing);

// ---- linear-layer groups ----

struct Group {
  std::string name;             // "model.layers.{i}.mlp.experts.{e}.up_proj", "lm_head"
  std::vector<int64_t> layers;  // empty: not a per-layer module
  int64_t experts = 0;          // > 0: the name holds "{e}"
  uint64_t out = 0, in = 0;
  uint64_t count() const {
    return (layers.empty() ? 1 : layers.size()) * static_cast<uint64_t>(experts > 0 ? experts : 1);
  }
};

struct Layout {
  std::vector<Group> groups;
  std::string formula;
  uint64_t linear_count = 0;
  uint64_t linear_params = 0;
  uint64_t other_params = 0;  // embeddings, norms, biases
};

Layout build_layout(const Dims& d);
// A group as model_analysis.json's quantization_targets.groups entry.
nlohmann::ordered_json group_json(const Group& g, uint64_t excluded);

std::string join_with(const std::vector<std::string>& v, const char* sep);
std::string replace_all(std::string s, const std::string& from, const std::string& to);

// f(module name, layer) for every module of a group: "{i}" over its layers
// (layer -1 outside the layers), "{e}" over 0..experts-1.
template <class F>
void for_each_module(const Group& g, F&& f) {
  std::vector<int64_t> layers = g.layers.empty() ? std::vector<int64_t>{-1} : g.layers;
  for (int64_t layer : layers) {
    const std::string base = layer < 0 ? g.name : replace_all(g.name, "{i}", std::to_string(layer));
    if (g.experts <= 0) {
      f(base, layer);
      continue;
    }
    for (int64_t e = 0; e < g.experts; ++e) f(replace_all(base, "{e}", std::to_string(e)), layer);
  }
}

}  // namespace qloom::agent::detail
