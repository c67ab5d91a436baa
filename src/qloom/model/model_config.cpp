// ModelConfig::parse: config.json -> ModelConfig with transformers' defaults
// per model_type (see architecture.cpp for the table). Every key is checked
// against the architecture's known keys first (config_keys.h: an unknown
// maths-suggesting key is an error, never a default); RoPE in its 4.x and 5.x
// forms is rope_config.cpp.
#include <cmath>
#include <cstring>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/model/architecture.h"
#include "qloom/model/config_check.h"
#include "qloom/model/config_keys.h"
#include "qloom/model/config_reader.h"
#include "qloom/model/model_config.h"
#include "qloom/model/rope_config.h"

namespace qloom::model {
namespace {

using nlohmann::json;
using Reader = ConfigReader;

// layer_types (qwen2, qwen3, qwen2_moe, gemma2, gemma3_text write it): 1 per
// sliding layer; empty when absent.
std::vector<uint8_t> layer_types(const Reader& r, const Architecture& a, int64_t layers) {
  const json* lt = a.honors_layer_types ? r.get("layer_types") : nullptr;
  if (!lt) return {};
  if (!lt->is_array() || static_cast<int64_t>(lt->size()) != layers)
    r.bad("layer_types", "must list one entry per layer (num_hidden_layers = " + std::to_string(layers) + ")");
  std::vector<uint8_t> out(static_cast<size_t>(layers), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    const json& e = (*lt)[i];
    if (!e.is_string()) r.bad("layer_types", "entries must be strings");
    const std::string s = e.get<std::string>();
    if (s == "sliding_attention") out[i] = 1;
    else if (s != "full_attention")
      r.unsupported("layer_types", "has layer type \"" + s + "\" (qloom: sliding_attention, full_attention)");
  }
  return out;
}

std::vector<uint8_t> sliding_layers(const Reader& r, const Architecture& a, const ModelConfig& c) {
  std::vector<uint8_t> typed = layer_types(r, a, c.num_layers);
  std::vector<uint8_t> out(static_cast<size_t>(c.num_layers), 0);
  if (c.sliding_window <= 0) return out;
  if (!typed.empty()) return typed;
  const int64_t pattern = r.has("sliding_window_pattern") ? r.positive("sliding_window_pattern", 6)
                                                          : r.positive("_sliding_window_pattern", 6);
  const int64_t max_window = r.integer("max_window_layers", 28);
  const bool enabled = r.boolean("use_sliding_window", false);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    bool s = false;
    switch (a.sliding) {
      case SlidingRule::kNone: s = false; break;
      case SlidingRule::kAllLayers: s = true; break;
      case SlidingRule::kAllIfEnabled: s = enabled; break;
      case SlidingRule::kFromMaxWindow: s = enabled && i >= max_window; break;
      case SlidingRule::kEveryOther: s = (i + 1) % 2 != 0; break;
      case SlidingRule::kPattern: s = (i + 1) % pattern != 0; break;
    }
    out[static_cast<size_t>(i)] = s ? 1 : 0;
  }
  return out;
}

// "dtype" (transformers >= 4.56) or "torch_dtype" (older); both must agree.
std::string checkpoint_dtype(const Reader& r) {
  const std::string d = r.string("dtype", ""), t = r.string("torch_dtype", "");
  if (!d.empty() && !t.empty() && d != t) r.bad("dtype", "is \"" + d + "\" but torch_dtype is \"" + t + "\"");
  return !d.empty() ? d : (!t.empty() ? t : "float32");
}

float round_to_checkpoint_dtype(const Reader& r, float v) {
  const std::string dt = checkpoint_dtype(r);
  if (dt == "bfloat16") return bf16_to_float(float_to_bf16(v));
  if (dt == "float16") return f16_to_float(float_to_f16(v));
  return v;
}

// num_experts / num_local_experts: transformers 5 maps one onto the other
// (mixtral, qwen3_moe); both stated must agree.
int64_t expert_count(const Reader& r, const char* primary, const char* alias, int64_t def) {
  const bool p = r.has(primary), q = r.has(alias);
  if (p && q && r.integer(primary, 0) != r.integer(alias, 0))
    r.bad(alias, std::string("disagrees with ") + primary);
  return p ? r.integer(primary, def) : r.integer(alias, def);
}

void parse_moe(const Reader& r, const Architecture& a, ModelConfig& c) {
  c.layer_moe.assign(static_cast<size_t>(c.num_layers), 0);
  if (a.moe == MoeKind::kNone) return;
  if (a.moe == MoeKind::kMixtral) {
    c.num_experts = expert_count(r, "num_local_experts", "num_experts", 8);
    if (c.num_experts <= 0) r.bad("num_local_experts", "must be positive");
    c.num_experts_per_tok = r.positive("num_experts_per_tok", 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
    c.layer_moe.assign(c.layer_moe.size(), 1);
  } else {
    const bool q2 = a.moe == MoeKind::kQwen2Moe;
    c.num_experts = q2 ? r.integer("num_experts", 60) : expert_count(r, "num_experts", "num_local_experts", 128);
    if (c.num_experts < 0) r.bad("num_experts", "must not be negative");
    c.num_experts_per_tok = r.positive("num_experts_per_tok", q2 ? 4 : 8);
    c.moe_intermediate_size = r.positive("moe_intermediate_size", q2 ? 1408 : 768);
    if (q2) c.shared_expert_intermediate_size = r.integer("shared_expert_intermediate_size", 5632);
    c.norm_topk_prob = r.boolean("norm_topk_prob", false);
    const int64_t step = r.positive("decoder_sparse_step", 1);
    std::vector<int64_t> mlp_only;
    if (const json* m = r.get("mlp_only_layers")) {
      if (!m->is_array()) r.bad("mlp_only_layers", "must be a list of layer indices");
      for (const json& e : *m) {
        if (!e.is_number_integer()) r.bad("mlp_only_layers", "must be a list of layer indices");
        mlp_only.push_back(e.get<int64_t>());
      }
    }
    for (int64_t i = 0; i < c.num_layers; ++i) {
      bool only = false;
      for (int64_t m : mlp_only) only = only || m == i;
      c.layer_moe[static_cast<size_t>(i)] = (!only && c.num_experts > 0 && (i + 1) % step == 0) ? 1 : 0;
    }
  }
  if (c.num_experts > 0 && c.num_experts_per_tok > c.num_experts)
    r.bad("num_experts_per_tok", "exceeds the number of experts");
}

void parse_sizes(const Reader& r, const Architecture& a, ModelConfig& c) {
  c.vocab_size = r.positive("vocab_size", 0, true);
  c.hidden_size = r.positive("hidden_size", 0, true);
  c.intermediate_size = r.positive("intermediate_size", 0, true);
  c.num_layers = r.positive("num_hidden_layers", 0, true);
  c.num_heads = r.positive("num_attention_heads", 0, true);
  c.num_kv_heads = r.positive("num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) r.bad("num_key_value_heads", "must divide num_attention_heads");
  // An explicit "head_dim": null means hidden_size / num_attention_heads, as transformers derives it.
  const bool arch_default = a.default_head_dim > 0 && !r.j.contains("head_dim");
  if (!r.has("head_dim") && !arch_default && c.hidden_size % c.num_heads != 0)
    r.bad("num_attention_heads", "does not divide hidden_size (" + std::to_string(c.hidden_size) +
                                     ") and no head_dim is given; set head_dim in config.json");
  c.head_dim = r.positive("head_dim", arch_default ? a.default_head_dim : c.hidden_size / c.num_heads);
  c.max_position_embeddings = r.integer("max_position_embeddings", 0);
  if (c.max_position_embeddings < 0) r.bad("max_position_embeddings", "must not be negative");
}

void parse_tokens(const Reader& r, ModelConfig& c) {
  c.bos_token_id = r.integer("bos_token_id", -1);
  if (const json* e = r.get("eos_token_id")) {
    if (e->is_number_integer()) c.eos_token_ids.push_back(e->get<int64_t>());
    else if (e->is_array()) {
      for (const json& x : *e) {
        if (!x.is_number_integer()) r.bad("eos_token_id", "must be an integer or a list of integers");
        c.eos_token_ids.push_back(x.get<int64_t>());
      }
    } else r.bad("eos_token_id", "must be an integer or a list of integers");
  }
}

void parse_attention(const Reader& r, const Architecture& a, ModelConfig& c) {
  const bool attn_bias = r.boolean("attention_bias", false);
  c.qkv_bias = a.model_type == "qwen2" ? true : a.moe == MoeKind::kQwen2Moe ? r.boolean("qkv_bias", true) : attn_bias;
  c.o_bias = a.default_qkv_bias ? false : attn_bias;
  c.mlp_bias = r.boolean("mlp_bias", false);
  if (r.boolean("use_bidirectional_attention", false))
    r.unsupported("use_bidirectional_attention", "is true: qloom's engine runs causal attention only");

  c.sliding_window = 0;
  if (a.sliding != SlidingRule::kNone) {
    bool enabled = true;
    if (a.sliding == SlidingRule::kFromMaxWindow || a.sliding == SlidingRule::kAllIfEnabled)
      enabled = r.boolean("use_sliding_window", false);
    if (enabled) c.sliding_window = r.integer("sliding_window", 0);
    if (c.sliding_window < 0) r.bad("sliding_window", "must be positive or null");
  }
  c.layer_sliding = sliding_layers(r, a, c);

  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  if (a.query_pre_attn_scalar) {
    const double s = r.number("query_pre_attn_scalar", 256.0);
    if (!(s > 0)) r.bad("query_pre_attn_scalar", "must be positive");
    c.attn_scale = 1.0 / std::sqrt(s);
  }
  if (a.softcapping) {
    const bool g2 = a.model_type == "gemma2";
    // An explicit null switches softcapping off (Reader treats null as absent).
    const bool attn_null = r.j.contains("attn_logit_softcapping") && r.j["attn_logit_softcapping"].is_null();
    const bool final_null = r.j.contains("final_logit_softcapping") && r.j["final_logit_softcapping"].is_null();
    c.attn_logit_softcapping = attn_null ? 0.0 : r.number("attn_logit_softcapping", g2 ? 50.0 : 0.0);
    c.final_logit_softcapping = final_null ? 0.0 : r.number("final_logit_softcapping", g2 ? 30.0 : 0.0);
    // transformers never passes attn_logit_softcapping to Gemma3's attention,
    // so a gemma3_text config value has no effect there; match it.
    if (!g2) c.attn_logit_softcapping = 0.0;
  }
}

// Nested text_config (multimodal wrappers, e.g. Gemma3ForConditionalGeneration):
// the text model's fields are read from it; the wrapper's own keys are checked
// as unknown keys of no architecture.
const json& text_part(const json& config, const std::string& source) {
  auto it = config.find("text_config");
  if (it == config.end() || it->is_null()) return config;
  if (!it->is_object()) throw_invalid(source, "text_config", "config field \"text_config\" must be an object");
  check_config_keys(config, "", source);
  return *it;
}

}  // namespace

ModelConfig ModelConfig::parse(const nlohmann::json& config, const std::string& source) {
  validate_config(config, source);  // types and bounds, as every command checks them
  const json& text = text_part(config, source);
  Reader r{text, source, &text == &config ? "" : "text_config."};
  ModelConfig c;
  c.raw = config;
  c.model_type = r.string("model_type", "");
  const Architecture* a = find_architecture(c.model_type);
  if (!a)
    throw Error(ErrorKind::kUnsupported, source, r.field("model_type"),
                "model_type \"" + c.model_type + "\" is not supported by the engine; supported: " +
                    supported_model_types(),
                "use a checkpoint of a supported architecture");
  check_config_keys(text, c.model_type, source, r.path);
  parse_sizes(r, *a, c);
  c.rms_norm_eps = r.number("rms_norm_eps", a->default_rms_norm_eps);
  if (!(c.rms_norm_eps > 0)) r.bad("rms_norm_eps", "must be positive");
  const Reader top{config, source, ""};
  c.tie_word_embeddings = r.has("tie_word_embeddings") || &text == &config
                              ? r.boolean("tie_word_embeddings", a->default_tie_embeddings)
                              : top.boolean("tie_word_embeddings", a->default_tie_embeddings);
  parse_tokens(r, c);

  const RopeConfig rope = parse_rope_config(r, *a, c.max_position_embeddings);
  c.rope = rope.global;
  c.rope_local = rope.local;
  c.partial_rotary_factor = rope.partial_rotary_factor;
  const int64_t rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1.0) || rot % 2 != 0 || rot == 0)
    r.bad("partial_rotary_factor", "must give an even number of rotary dims in (0, head_dim]");

  parse_attention(r, *a, c);
  c.hidden_act = r.string(a->act_key, a->default_act);
  // transformers 5 reads gemma's legacy hidden_act "gelu" as the tanh
  // approximation the official releases meant.
  if (a->model_type == "gemma" && c.hidden_act == "gelu") c.hidden_act = "gelu_pytorch_tanh";
  if (a->embed_scale)
    c.embed_scale = round_to_checkpoint_dtype(r, static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size))));
  parse_moe(r, *a, c);
  return c;
}

}  // namespace qloom::model
