// ModelConfig::parse: config.json -> ModelConfig with transformers' defaults
// per model_type (see architecture.cpp for the table).
#include <cmath>
#include <cstring>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/engine/architecture.h"
#include "qloom/engine/model_config.h"

namespace qloom::engine {
namespace {

using nlohmann::json;

struct Reader {
  const json& j;
  const std::string& source;

  const json* get(const char* key) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
  }
  [[noreturn]] void bad(const char* key, const char* what) const {
    std::string msg = "config field \"";
    msg += key;
    msg += "\" ";
    msg += what;
    throw_invalid(source, key, msg, "fix config.json");
  }
  int64_t integer(const char* key, int64_t def, bool required = false) const {
    const json* v = get(key);
    if (!v) {
      if (required) bad(key, "is missing");
      return def;
    }
    if (!v->is_number_integer()) bad(key, "must be an integer");
    return v->get<int64_t>();
  }
  int64_t positive(const char* key, int64_t def, bool required = false) const {
    int64_t v = integer(key, def, required);
    if (v <= 0) bad(key, "must be positive");
    return v;
  }
  double number(const char* key, double def) const {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_number()) bad(key, "must be a number");
    return v->get<double>();
  }
  bool boolean(const char* key, bool def) const {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_boolean()) bad(key, "must be true or false");
    return v->get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    const json* v = get(key);
    if (!v) return def;
    if (!v->is_string()) bad(key, "must be a string");
    return v->get<std::string>();
  }
};

ModelConfig::Rope parse_rope(const Reader& r, const ModelConfig& c) {
  ModelConfig::Rope rope;
  rope.theta = c.rope.theta;
  const json* s = r.get("rope_scaling");
  if (!s) return rope;
  if (!s->is_object()) r.bad("rope_scaling", "must be an object or null");
  Reader sr{*s, r.source};
  std::string type = sr.string("rope_type", sr.string("type", "default"));
  rope.type = type;
  if (type == "default") return rope;
  if (type == "linear") {
    rope.factor = sr.number("factor", 1.0);
    if (!(rope.factor > 0)) r.bad("rope_scaling", "factor must be positive");
    return rope;
  }
  if (type == "llama3") {
    rope.factor = sr.number("factor", 8.0);
    rope.low_freq_factor = sr.number("low_freq_factor", 1.0);
    rope.high_freq_factor = sr.number("high_freq_factor", 4.0);
    rope.original_max_position_embeddings = sr.positive("original_max_position_embeddings", 8192);
    if (!(rope.factor > 0) || !(rope.high_freq_factor > rope.low_freq_factor))
      r.bad("rope_scaling", "needs factor > 0 and high_freq_factor > low_freq_factor");
    return rope;
  }
  std::string msg = "rope_scaling type \"";
  msg += type;
  msg += "\" is not supported by the engine (supported: default, linear, llama3)";
  throw Error(ErrorKind::kUnsupported, r.source, "rope_scaling", msg,
              "use a checkpoint without this RoPE scaling");
}

std::vector<uint8_t> sliding_layers(const Reader& r, const Architecture& a, const ModelConfig& c) {
  std::vector<uint8_t> out(static_cast<size_t>(c.num_layers), 0);
  if (c.sliding_window <= 0) return out;
  const json* lt = a.honors_layer_types ? r.get("layer_types") : nullptr;
  if (lt) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c.num_layers)
      r.bad("layer_types", "must list one entry per layer");
    for (size_t i = 0; i < out.size(); ++i) {
      const json& e = (*lt)[i];
      if (!e.is_string()) r.bad("layer_types", "entries must be strings");
      std::string s = e.get<std::string>();
      if (s == "sliding_attention") out[i] = 1;
      else if (s != "full_attention") {
        std::string msg = "layer type \"";
        msg += s;
        msg += "\" is not supported (sliding_attention, full_attention)";
        throw Error(ErrorKind::kUnsupported, r.source, "layer_types", msg);
      }
    }
    return out;
  }
  int64_t pattern = r.positive("sliding_window_pattern", 6);
  int64_t max_window = r.integer("max_window_layers", 28);
  bool enabled = r.boolean("use_sliding_window", false);
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

float round_to_checkpoint_dtype(const Reader& r, float v) {
  std::string dt = r.string("torch_dtype", r.string("dtype", "float32"));
  if (dt == "bfloat16") return bf16_to_float(float_to_bf16(v));
  if (dt == "float16") return f16_to_float(float_to_f16(v));
  return v;
}

void parse_moe(const Reader& r, const Architecture& a, ModelConfig& c) {
  c.layer_moe.assign(static_cast<size_t>(c.num_layers), 0);
  if (a.moe == MoeKind::kNone) return;
  if (a.moe == MoeKind::kMixtral) {
    c.num_experts = r.positive("num_local_experts", 8);
    c.num_experts_per_tok = r.positive("num_experts_per_tok", 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
    c.layer_moe.assign(c.layer_moe.size(), 1);
  } else {
    c.num_experts = r.integer("num_experts", a.moe == MoeKind::kQwen2Moe ? 60 : 128);
    c.num_experts_per_tok = r.positive("num_experts_per_tok", a.moe == MoeKind::kQwen2Moe ? 4 : 8);
    c.moe_intermediate_size = r.positive("moe_intermediate_size", a.moe == MoeKind::kQwen2Moe ? 1408 : 768);
    if (a.moe == MoeKind::kQwen2Moe)
      c.shared_expert_intermediate_size = r.integer("shared_expert_intermediate_size", 5632);
    c.norm_topk_prob = r.boolean("norm_topk_prob", false);
    int64_t step = r.positive("decoder_sparse_step", 1);
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

}  // namespace

ModelConfig ModelConfig::parse(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) throw_invalid(source, "", "config.json must hold a JSON object");
  Reader r{config, source};
  ModelConfig c;
  c.raw = config;
  c.model_type = r.string("model_type", "");
  const Architecture* a = find_architecture(c.model_type);
  if (!a) {
    std::string msg = "model_type \"";
    msg += c.model_type;
    msg += "\" is not supported by the engine; supported: ";
    msg += supported_model_types();
    throw Error(ErrorKind::kUnsupported, source, "model_type", msg,
                "use a checkpoint of a supported architecture");
  }
  c.vocab_size = r.positive("vocab_size", 0, true);
  c.hidden_size = r.positive("hidden_size", 0, true);
  c.intermediate_size = r.positive("intermediate_size", 0, true);
  c.num_layers = r.positive("num_hidden_layers", 0, true);
  c.num_heads = r.positive("num_attention_heads", 0, true);
  c.num_kv_heads = r.positive("num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    r.bad("num_key_value_heads", "must divide num_attention_heads");
  int64_t def_hd = a->default_head_dim > 0 && !config.contains("head_dim") ? a->default_head_dim
                                                                          : c.hidden_size / c.num_heads;
  c.head_dim = r.positive("head_dim", def_hd);
  c.max_position_embeddings = r.integer("max_position_embeddings", 0);
  c.rms_norm_eps = r.number("rms_norm_eps", a->default_rms_norm_eps);
  c.rope.theta = r.number("rope_theta", a->default_rope_theta);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", a->default_tie_embeddings);
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

  // RoPE.
  c.rope = parse_rope(r, c);
  c.rope_local = c.rope;
  if (a->local_rope) {
    c.rope_local = Rope{};
    c.rope_local.theta = r.number("rope_local_base_freq", 10000.0);
  }
  c.partial_rotary_factor = r.number("partial_rotary_factor", 1.0);
  int64_t rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1.0) || rot % 2 != 0)
    r.bad("partial_rotary_factor", "must give an even number of rotary dims in (0, head_dim]");

  // Biases.
  bool attn_bias = r.boolean("attention_bias", false);
  c.qkv_bias = a->model_type == "qwen2" ? true
               : a->moe == MoeKind::kQwen2Moe ? r.boolean("qkv_bias", true)
                                             : attn_bias;
  c.o_bias = a->default_qkv_bias ? false : attn_bias;
  c.mlp_bias = r.boolean("mlp_bias", false);

  // Sliding window.
  c.sliding_window = 0;
  if (a->sliding != SlidingRule::kNone) {
    bool enabled = true;
    if (a->sliding == SlidingRule::kFromMaxWindow || a->sliding == SlidingRule::kAllIfEnabled)
      enabled = r.boolean("use_sliding_window", false);
    if (enabled) c.sliding_window = r.integer("sliding_window", 0);
    if (c.sliding_window < 0) r.bad("sliding_window", "must be positive or null");
  }
  c.layer_sliding = sliding_layers(r, *a, c);

  // Attention scale and softcapping.
  c.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  if (a->query_pre_attn_scalar) {
    double s = r.number("query_pre_attn_scalar", 256.0);
    if (!(s > 0)) r.bad("query_pre_attn_scalar", "must be positive");
    c.attn_scale = 1.0 / std::sqrt(s);
  }
  if (a->softcapping) {
    bool g2 = a->model_type == "gemma2";
    c.attn_logit_softcapping = r.number("attn_logit_softcapping", g2 ? 50.0 : 0.0);
    c.final_logit_softcapping = r.number("final_logit_softcapping", g2 ? 30.0 : 0.0);
    if (config.contains("attn_logit_softcapping") && config["attn_logit_softcapping"].is_null())
      c.attn_logit_softcapping = 0.0;
    if (config.contains("final_logit_softcapping") && config["final_logit_softcapping"].is_null())
      c.final_logit_softcapping = 0.0;
    // transformers (<= 4.57) never passes attn_logit_softcapping to Gemma3's
    // attention, so a gemma3_text config value has no effect there; match it.
    if (!g2) c.attn_logit_softcapping = 0.0;
  }
  c.hidden_act = r.string(a->act_key, a->default_act);
  if (a->embed_scale)
    c.embed_scale = round_to_checkpoint_dtype(r, static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size))));

  parse_moe(r, *a, c);
  return c;
}

}  // namespace qloom::engine
