// validate_config (config_check.h): tables of typed, bounded fields applied to
// the top level and text_config, then the few cross-field rules, then the
// RoPE dicts.
#include "qloom/model/config_check.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "qloom/core/error.h"
#include "qloom/model/architecture.h"

namespace qloom::model {
namespace {

using nlohmann::json;

constexpr int64_t kMaxPositions = int64_t{1} << 24;

// A float field: finite, above `min` (or at it when min_inclusive), at most `max`.
struct FloatLimit {
  const char* key;
  double min;
  bool min_inclusive;
  double max;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<FloatLimit>& float_limits() {
  static const std::vector<FloatLimit> t = {
      {"rope_theta", 0.0, false, kInf},          {"rope_local_base_freq", 0.0, false, kInf},
      {"rms_norm_eps", 0.0, false, 1.0},         {"layer_norm_eps", 0.0, false, 1.0},
      {"partial_rotary_factor", 0.0, false, 1.0}, {"query_pre_attn_scalar", 0.0, false, kInf},
      {"attn_logit_softcapping", 0.0, true, kInf}, {"final_logit_softcapping", 0.0, true, kInf},
  };
  return t;
}

// Numbers of a rope_scaling / rope_parameters dict.
const std::vector<FloatLimit>& rope_float_limits() {
  static const std::vector<FloatLimit> t = {
      {"rope_theta", 0.0, false, kInf},       {"factor", 0.0, false, kInf},
      {"low_freq_factor", 0.0, false, kInf},  {"high_freq_factor", 0.0, false, kInf},
      {"attention_factor", 0.0, false, kInf}, {"beta_fast", 0.0, false, kInf},
      {"beta_slow", 0.0, false, kInf},        {"mscale", 0.0, true, kInf},
      {"mscale_all_dim", 0.0, true, kInf},    {"partial_rotary_factor", 0.0, false, 1.0},
  };
  return t;
}

const std::vector<const char*>& bool_keys() {
  static const std::vector<const char*> t = {"tie_word_embeddings", "attention_bias", "mlp_bias", "qkv_bias",
                                             "use_sliding_window", "norm_topk_prob", "use_bidirectional_attention"};
  return t;
}

// One JSON object of config.json with the path its fields are named by.
struct Level {
  const json& j;
  const std::string& source;
  std::string path;

  const json* get(const char* key) const {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void bad(const std::string& key, const json* value, const std::string& what) const {
    const std::string f = path + key;
    throw_invalid(source, f, "config field \"" + f + "\"" + (value ? " = " + shown(*value) : "") + " " + what,
                  "fix config.json");
  }
  static std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return s.size() > 48 ? s.substr(0, 45) + "..." : s;
  }
};

std::string range_text(int64_t lo, int64_t hi) {
  return "must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
}

void check_int(const Level& l, const IntLimit& lim) {
  const json* v = l.get(lim.key);
  if (!v) return;
  if (v->is_number_float())
    l.bad(lim.key, v, "must be an integer, not a float (transformers would keep a float and fail building the "
                      "model); write it without a fraction or exponent");
  if (!v->is_number_integer()) l.bad(lim.key, v, "must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    l.bad(lim.key, v, range_text(lim.min, lim.max));
  const int64_t x = v->get<int64_t>();
  if (x < lim.min || x > lim.max) l.bad(lim.key, v, range_text(lim.min, lim.max));
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_float(const Level& l, const FloatLimit& lim) {
  const json* v = l.get(lim.key);
  if (!v) return;
  if (!v->is_number()) l.bad(lim.key, v, "must be a number");
  const double x = v->get<double>();
  const bool above = lim.min_inclusive ? x >= lim.min : x > lim.min;
  if (!std::isfinite(x) || !above || x > lim.max) {
    std::string want = std::string("must be a finite number ") + (lim.min_inclusive ? ">= " : "> ") + num(lim.min);
    if (lim.max != kInf) want += " and <= " + num(lim.max);
    l.bad(lim.key, v, want);
  }
}

void check_types(const Level& l) {
  for (const IntLimit& lim : config_int_limits()) check_int(l, lim);
  for (const FloatLimit& lim : float_limits()) check_float(l, lim);
  for (const char* k : bool_keys())
    if (const json* v = l.get(k); v && !v->is_boolean()) l.bad(k, v, "must be true or false");
  if (const json* v = l.get("model_type"); v && !v->is_string()) l.bad("model_type", v, "must be a string");
}

// Divisibility and ordering between fields (all of them already typed).
void check_relations(const Level& l) {
  const json *hidden = l.get("hidden_size"), *heads = l.get("num_attention_heads");
  const json *kv = l.get("num_key_value_heads"), *mt = l.get("model_type");
  const Architecture* arch = mt ? find_architecture(mt->get<std::string>()) : nullptr;
  const bool arch_head_dim = arch && arch->default_head_dim > 0 && !l.j.contains("head_dim");
  if (hidden && heads && !l.get("head_dim") && !arch_head_dim && hidden->get<int64_t>() % heads->get<int64_t>() != 0)
    l.bad("num_attention_heads", heads,
          "does not divide hidden_size (" + hidden->dump() + ") and no head_dim is given; set head_dim in config.json");
  if (kv && heads && heads->get<int64_t>() % kv->get<int64_t>() != 0)
    l.bad("num_key_value_heads", kv, "must divide num_attention_heads (" + heads->dump() + ")");
  const json* per_tok = l.get("num_experts_per_tok");
  for (const char* k : {"num_experts", "num_local_experts"}) {
    const json* n = l.get(k);
    if (per_tok && n && n->get<int64_t>() > 0 && per_tok->get<int64_t>() > n->get<int64_t>())
      l.bad("num_experts_per_tok", per_tok, std::string("exceeds ") + k + " (" + n->dump() + ")");
  }
}

void check_rope_dict(const Level& parent, const char* key, const json& d, const std::string& path) {
  if (!d.is_object()) parent.bad(key, &d, "must be an object or null");
  const Level l{d, parent.source, path};
  for (const char* k : {"rope_type", "type"})
    if (const json* v = l.get(k); v && !v->is_string()) l.bad(k, v, "must be a string");
  for (const FloatLimit& lim : rope_float_limits()) check_float(l, lim);
  check_int(l, {"original_max_position_embeddings", 1, kMaxPositions});
}

void check_rope(const Level& l) {
  if (const json* s = l.get("rope_scaling")) check_rope_dict(l, "rope_scaling", *s, l.path + "rope_scaling.");
  const json* p = l.get("rope_parameters");
  if (!p) return;
  const bool per_type = p->is_object() && (p->contains("full_attention") || p->contains("sliding_attention"));
  if (!per_type) return check_rope_dict(l, "rope_parameters", *p, l.path + "rope_parameters.");
  const Level pl{*p, l.source, l.path + "rope_parameters."};
  for (auto it = p->begin(); it != p->end(); ++it)
    if (!it->is_null()) check_rope_dict(pl, it.key().c_str(), *it, pl.path + it.key() + ".");
}

void check_level(const Level& l) {
  check_types(l);
  check_relations(l);
  check_rope(l);
}

}  // namespace

const std::vector<IntLimit>& config_int_limits() {
  static const std::vector<IntLimit> t = {
      {"vocab_size", 1, int64_t{1} << 24},
      {"hidden_size", 1, int64_t{1} << 20},
      {"intermediate_size", 1, int64_t{1} << 22},
      {"num_hidden_layers", 1, 10000},
      {"num_attention_heads", 1, int64_t{1} << 16},
      {"num_key_value_heads", 1, int64_t{1} << 16},
      {"head_dim", 1, int64_t{1} << 16},
      {"max_position_embeddings", 0, kMaxPositions},
      {"original_max_position_embeddings", 1, kMaxPositions},
      {"sliding_window", 0, kMaxPositions},
      {"sliding_window_pattern", 1, 10000},
      {"_sliding_window_pattern", 1, 10000},
      {"num_experts", 0, int64_t{1} << 16},
      {"num_local_experts", 0, int64_t{1} << 16},
      {"num_experts_per_tok", 1, int64_t{1} << 16},
      {"moe_intermediate_size", 1, int64_t{1} << 22},
      {"shared_expert_intermediate_size", 0, int64_t{1} << 22},
      {"decoder_sparse_step", 1, 10000},
  };
  return t;
}

void validate_config(const json& config, const std::string& source) {
  if (!config.is_object()) throw_invalid(source, "", "config.json must hold a JSON object", "fix config.json");
  check_level(Level{config, source, ""});
  auto text = config.find("text_config");
  if (text == config.end() || text->is_null()) return;
  if (!text->is_object()) Level{config, source, ""}.bad("text_config", &*text, "must be an object");
  check_level(Level{*text, source, "text_config."});
}

}  // namespace qloom::model
