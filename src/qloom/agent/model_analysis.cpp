// analyze_model: config.json -> model_analysis.json (see model_analysis.h).
#include "qloom/agent/model_analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/model/architecture.h"
#include "qloom/model/model_config.h"
#include "qloom/io/hub_id.h"
#include "qloom/io/json_read.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

constexpr double kLargeModelParams = 70e9;

// ---- reading config fields -----------------------------------------------------

// Looks a key up at the top level, then in "text_config" (multimodal configs
// keep the language model's dimensions there). null counts as absent. A
// present value of the wrong type is a malformed config.
struct Fields {
  const json& cfg;
  const std::string& file;

  const json* find(const char* key) const {
    auto it = cfg.find(key);
    if (it != cfg.end() && !it->is_null()) return &*it;
    auto tc = cfg.find("text_config");
    if (tc != cfg.end() && tc->is_object()) {
      auto it2 = tc->find(key);
      if (it2 != tc->end() && !it2->is_null()) return &*it2;
    }
    return nullptr;
  }
  [[noreturn]] void bad(const char* key, const char* what) const {
    throw_invalid(file, key, std::string("config field \"") + key + "\" " + what,
                  "fix config.json (it must be the model's Hugging Face config)");
  }
  std::optional<int64_t> integer(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) bad(key, "must be an integer");
    return v->get<int64_t>();
  }
  std::optional<int64_t> positive(const char* key) const {
    auto v = integer(key);
    if (v && *v <= 0) bad(key, "must be positive");
    return v;
  }
  std::optional<int64_t> non_negative(const char* key) const {
    auto v = integer(key);
    if (v && *v < 0) bad(key, "must not be negative");
    return v;
  }
  std::optional<std::string> string(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad(key, "must be a string");
    return v->get<std::string>();
  }
  std::optional<bool> boolean(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad(key, "must be true or false");
    return v->get<bool>();
  }
  bool has(const char* key) const { return cfg.contains(key); }
};

// ---- the model's shape, from the engine's parse or the raw config --------------

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

// Generic HF decoder layout from the raw fields. `missing` collects the facts
// the config does not state; the caller turns them into a partial analysis.
Dims dims_from_config(const Fields& f, const std::string& model_type, std::vector<std::string>& missing) {
  Dims d;
  auto need = [&](const char* key) {
    auto v = f.positive(key);
    if (!v) missing.emplace_back(key);
    return v.value_or(0);
  };
  d.hidden = need("hidden_size");
  d.layers = need("num_hidden_layers");
  d.heads = need("num_attention_heads");
  d.vocab = need("vocab_size");
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

  if (f.find("kv_lora_rank")) {
    Mla m;
    m.kv_lora = f.positive("kv_lora_rank").value_or(0);
    m.q_lora = f.non_negative("q_lora_rank").value_or(0);
    auto req = [&](const char* key) {
      auto v = f.positive(key);
      if (!v) missing.emplace_back(key);
      return v.value_or(0);
    };
    m.nope = req("qk_nope_head_dim");
    m.rope = req("qk_rope_head_dim");
    m.v = req("v_head_dim");
    d.mla = m;
  }

  // MoE: the first expert-count field present.
  std::optional<int64_t> experts;
  const char* experts_key = nullptr;
  for (const char* key : {"n_routed_experts", "num_local_experts", "num_experts"}) {
    if ((experts = f.non_negative(key))) {
      experts_key = key;
      break;
    }
  }
  d.layer_moe.assign(static_cast<size_t>(std::max<int64_t>(d.layers, 0)), 0);
  if (experts && *experts > 0) {
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
    if (d.moe_inter == 0) missing.emplace_back("moe_intermediate_size");
  }
  const bool any_dense = std::find(d.layer_moe.begin(), d.layer_moe.end(), 0) != d.layer_moe.end();
  if (!inter && any_dense) missing.emplace_back("intermediate_size");
  d.layout = d.mla || d.moe_naming == "deepseek" ? "deepseek"
             : d.experts == 0                    ? "llama"
             : d.moe_naming == "mixtral"         ? "mixtral"
                                                 : "qwen_moe";
  return d;
}

// ---- linear-layer groups ---------------------------------------------------------

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

std::string join_with(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

Layout build_layout(const Dims& d) {
  Layout L;
  const uint64_t H = uint64_t(d.hidden), I = uint64_t(d.inter), hd = uint64_t(d.head_dim);
  const uint64_t nh = uint64_t(d.heads), nkv = uint64_t(d.kv_heads);
  std::vector<int64_t> all, dense, moe;
  for (int64_t i = 0; i < d.layers; ++i) {
    all.push_back(i);
    (d.layer_moe.size() > size_t(i) && d.layer_moe[size_t(i)] ? moe : dense).push_back(i);
  }
  const std::string pre = "model.layers.{i}.";
  auto add = [&](const std::string& name, const std::vector<int64_t>& layers, int64_t experts, uint64_t out,
                 uint64_t in) { L.groups.push_back({name, layers, experts, out, in}); };

  // Attention.
  std::vector<std::string> attn;
  if (d.mla) {
    const Mla& m = *d.mla;
    const uint64_t qk = uint64_t(m.nope + m.rope);
    if (m.q_lora > 0) {
      add(pre + "self_attn.q_a_proj", all, 0, uint64_t(m.q_lora), H);
      add(pre + "self_attn.q_b_proj", all, 0, nh * qk, uint64_t(m.q_lora));
      attn = {"q_a", "q_b"};
    } else {
      add(pre + "self_attn.q_proj", all, 0, nh * qk, H);
      attn = {"q"};
    }
    add(pre + "self_attn.kv_a_proj_with_mqa", all, 0, uint64_t(m.kv_lora + m.rope), H);
    add(pre + "self_attn.kv_b_proj", all, 0, nh * uint64_t(m.nope + m.v), uint64_t(m.kv_lora));
    add(pre + "self_attn.o_proj", all, 0, H, nh * uint64_t(m.v));
    for (const char* n : {"kv_a", "kv_b", "o"}) attn.emplace_back(n);
  } else if (d.fused_qkv) {
    add(pre + "self_attn.qkv_proj", all, 0, (nh + 2 * nkv) * hd, H);
    add(pre + "self_attn.o_proj", all, 0, H, nh * hd);
    attn = {"qkv", "o"};
  } else {
    add(pre + "self_attn.q_proj", all, 0, nh * hd, H);
    add(pre + "self_attn.k_proj", all, 0, nkv * hd, H);
    add(pre + "self_attn.v_proj", all, 0, nkv * hd, H);
    add(pre + "self_attn.o_proj", all, 0, H, nh * hd);
    attn = {"q", "k", "v", "o"};
  }
  // Dense MLP.
  std::vector<std::string> mlp;
  if (!dense.empty()) {
    if (d.fused_gate_up) {
      add(pre + "mlp.gate_up_proj", dense, 0, 2 * I, H);
      mlp = {"gate_up", "down"};
    } else {
      add(pre + "mlp.gate_proj", dense, 0, I, H);
      add(pre + "mlp.up_proj", dense, 0, I, H);
      mlp = {"gate", "up", "down"};
    }
    add(pre + "mlp.down_proj", dense, 0, H, I);
  }
  // MoE blocks.
  const uint64_t E = uint64_t(d.experts), Im = uint64_t(d.moe_inter), S = uint64_t(d.shared_inter);
  uint64_t per_moe_layer = 0;
  if (!moe.empty()) {
    if (d.moe_naming == "mixtral") {
      add(pre + "block_sparse_moe.gate", moe, 0, E, H);
      add(pre + "block_sparse_moe.experts.{e}.w1", moe, d.experts, Im, H);
      add(pre + "block_sparse_moe.experts.{e}.w2", moe, d.experts, H, Im);
      add(pre + "block_sparse_moe.experts.{e}.w3", moe, d.experts, Im, H);
    } else {
      add(pre + "mlp.gate", moe, 0, E, H);
      add(pre + "mlp.experts.{e}.gate_proj", moe, d.experts, Im, H);
      add(pre + "mlp.experts.{e}.up_proj", moe, d.experts, Im, H);
      add(pre + "mlp.experts.{e}.down_proj", moe, d.experts, H, Im);
      if (S > 0) {
        const std::string sp = pre + (d.moe_naming == "deepseek" ? "mlp.shared_experts." : "mlp.shared_expert.");
        add(sp + "gate_proj", moe, 0, S, H);
        add(sp + "up_proj", moe, 0, S, H);
        add(sp + "down_proj", moe, 0, H, S);
      }
      if (d.shared_gate) add(pre + "mlp.shared_expert_gate", moe, 0, 1, H);
    }
    per_moe_layer = 1 + 3 * E + (S > 0 ? 3 : 0) + (d.shared_gate ? 1 : 0);
  }
  if (!d.tie) add("lm_head", {}, 0, uint64_t(d.vocab), H);

  for (const auto& g : L.groups) {
    L.linear_count += g.count();
    L.linear_params += g.count() * g.out * g.in;
  }

  // Formula, e.g. "5 layers x 4 attention (q,k,v,o) + 5 dense layers x 3 MLP
  // (gate,up,down) + lm_head 0 (tied to the embeddings) = 35".
  std::string f = std::to_string(d.layers) + " layers x " + std::to_string(attn.size()) + " attention (" +
                  join_with(attn, ",") + ")";
  if (!dense.empty())
    f += " + " + std::to_string(dense.size()) + " dense layers x " + std::to_string(mlp.size()) + " MLP (" +
         join_with(mlp, ",") + ")";
  if (!moe.empty()) {
    f += " + " + std::to_string(moe.size()) + " MoE layers x (1 router + " + std::to_string(E) + " experts x 3";
    if (S > 0) f += " + 3 shared expert";
    if (d.shared_gate) f += " + 1 shared-expert gate";
    f += " = " + std::to_string(per_moe_layer) + ")";
  }
  f += d.tie ? " + lm_head 0 (tied to the embeddings)" : " + lm_head 1";
  f += " = " + std::to_string(L.linear_count);
  L.formula = f;

  // Non-linear parameters: embeddings, norms, biases.
  uint64_t other = uint64_t(d.vocab) * H + H;  // embed_tokens + final norm
  const uint64_t n_layers = uint64_t(d.layers);
  uint64_t norms = (d.sandwich ? 4 : 2) * H + (d.qk_norm ? 2 * hd : 0);
  if (d.mla) norms += uint64_t(d.mla->q_lora + d.mla->kv_lora);
  other += n_layers * norms;
  if (!d.mla) {
    if (d.qkv_bias) other += n_layers * (nh + 2 * nkv) * hd;
    if (d.o_bias) other += n_layers * H;
  }
  if (d.mlp_bias) other += uint64_t(dense.size()) * (2 * I + H);
  L.other_params = other;
  return L;
}

// ---- groups <-> JSON -------------------------------------------------------------

oj group_json(const Group& g, uint64_t excluded) {
  oj j;
  j["name"] = g.name;
  j["layers"] = g.layers.empty() ? oj(nullptr) : oj(format_layer_ranges(g.layers));
  j["experts"] = g.experts;
  j["out_features"] = g.out;
  j["in_features"] = g.in;
  j["count"] = g.count();
  j["excluded_by_default"] = excluded;
  return j;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

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

// ---- risks -----------------------------------------------------------------------

struct Risk {
  std::string id, severity, message, hint;
};

oj risk_json(const Risk& r) {
  return oj{{"id", r.id}, {"severity", r.severity}, {"message", r.message}, {"recovery_hint", r.hint}};
}

std::string dtype_of(const Fields& f) {
  if (auto v = f.string("torch_dtype")) return *v;
  if (auto v = f.string("dtype")) return *v;
  return "";
}

uint64_t dtype_bytes(const std::string& dt) {
  if (dt == "float32" || dt == "fp32") return 4;
  if (dt == "float64") return 8;
  return 2;  // bfloat16, float16, unknown
}

// Rope types the engine implements (engine/rope_config.cpp).
bool engine_rope_type(const std::string& t) { return t == "default" || t == "linear" || t == "llama3"; }

// The engine's error item names a RoPE field: "rope_scaling[.x]" (4.x form) or
// "rope_parameters[.layer_type][.x]" (5.x form).
bool rope_item(const std::string& item) {
  return item.rfind("rope_scaling", 0) == 0 || item.rfind("rope_parameters", 0) == 0;
}

std::string rope_dict_type(const json& d) {
  auto t = d.find("rope_type");
  if (t == d.end() || t->is_null()) t = d.find("type");
  return (t != d.end() && t->is_string()) ? t->get<std::string>() : std::string("default");
}

// rope_parameters, flat or per layer type: the first type qloom's engine
// lacks, else the full-attention (or only) type.
std::string rope_parameters_type(const json& p) {
  if (!p.contains("full_attention") && !p.contains("sliding_attention")) return rope_dict_type(p);
  std::string first;
  for (const char* lt : {"full_attention", "sliding_attention"}) {
    if (!p.contains(lt) || !p[lt].is_object()) continue;
    const std::string t = rope_dict_type(p[lt]);
    if (!engine_rope_type(t)) return t;
    if (first.empty()) first = t;
  }
  return first.empty() ? "default" : first;
}

// Model types whose experts are fused 3-D parameters rather than nn.Linear
// modules in transformers (Quark needs its MoE preparation for them).
bool fused_experts_type(const std::string& t) {
  return t == "gpt_oss" || t == "llama4" || t == "dbrx" || t == "granitemoe" || t == "granitemoehybrid";
}

std::string loading_class(const std::string& model_type) {
  // quark-torch-model-intake "Special Loading Requirements".
  if (model_type == "deepseek_vl_v2") return "AutoModel";
  if (model_type == "mllama") return "MllamaForConditionalGeneration";
  return "AutoModelForCausalLM";
}

oj opt_int(const std::optional<int64_t>& v) { return v ? oj(*v) : oj(nullptr); }

}  // namespace

// ---- public ----------------------------------------------------------------------

std::string format_layer_ranges(const std::vector<int64_t>& layers_in) {
  std::vector<int64_t> v = layers_in;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(v[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(v[j]);
    }
    i = j + 1;
  }
  return out;
}

std::vector<int64_t> parse_layer_ranges(const std::string& ranges, const std::string& what) {
  std::vector<int64_t> out;
  auto fail = [&]() -> void {
    throw_invalid(what, "layers", "malformed layer list \"" + ranges + "\" (expected e.g. \"0-3,5\")",
                  "regenerate model_analysis.json");
  };
  size_t pos = 0;
  if (ranges.empty()) fail();
  while (pos <= ranges.size()) {
    size_t comma = ranges.find(',', pos);
    if (comma == std::string::npos) comma = ranges.size();
    const std::string part = ranges.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    auto num = [&](const std::string& s) -> int64_t {
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) fail();
      return std::stoll(s);
    };
    const int64_t a = num(part.substr(0, dash));
    const int64_t b = dash == std::string::npos ? a : num(part.substr(dash + 1));
    if (b < a || (!out.empty() && a <= out.back())) fail();
    for (int64_t i = a; i <= b; ++i) out.push_back(i);
    pos = comma + 1;
  }
  return out;
}

nlohmann::ordered_json analyze_config(const nlohmann::json& config, const std::string& config_file,
                                      const std::string& model_spec, const std::string& source,
                                      const std::string& resolved_path, const nlohmann::ordered_json& environment) {
  if (!config.is_object())
    throw_invalid(config_file, "", "config.json must hold a JSON object",
                  "fix config.json (it must be the model's Hugging Face config)");
  const Fields f{config, config_file};
  std::vector<Risk> risks;
  std::vector<std::string> missing;

  const std::string model_type = [&] {
    auto it = config.find("model_type");
    if (it == config.end() || it->is_null()) return std::string();
    if (!it->is_string()) f.bad("model_type", "must be a string");
    return it->get<std::string>();
  }();
  if (model_type.empty()) missing.emplace_back("model_type");
  std::vector<std::string> architectures;
  if (auto it = config.find("architectures"); it != config.end() && !it->is_null()) {
    if (!it->is_array()) f.bad("architectures", "must be a list of class names");
    for (const auto& a : *it) {
      if (!a.is_string()) f.bad("architectures", "must be a list of class names");
      architectures.push_back(a.get<std::string>());
    }
  }
  const std::string torch_dtype = dtype_of(f);

  // The engine's view: does it run this config (calibration, evaluation)?
  bool engine_ok = false, engine_type = model::find_architecture(model_type) != nullptr;
  std::string engine_detail;
  std::string engine_item;
  std::optional<model::ModelConfig> mc;
  try {
    mc = model::ModelConfig::parse(config, config_file);
    engine_ok = true;
    engine_detail = "qloom's engine runs model_type \"" + model_type +
                    "\": calibration (static scales, GPTQ / AWQ / SmoothQuant) and evaluation are available";
  } catch (const Error& e) {
    engine_detail = e.message();
    engine_item = e.item();
  }
  // A supported type that fails only on its RoPE scaling still has the
  // engine's layout: take the shapes from a parse without rope_scaling.
  if (!mc && engine_type && rope_item(engine_item)) {
    json no_rope = config;
    no_rope.erase("rope_scaling");
    no_rope.erase("rope_parameters");
    try {
      mc = model::ModelConfig::parse(no_rope, config_file);
    } catch (const Error&) {
    }
  }

  Dims d = mc ? dims_from_engine(*mc) : dims_from_config(f, model_type, missing);
  const bool partial = !missing.empty();
  Layout layout;
  if (!partial) layout = build_layout(d);

  // Default exclusions and how many linear layers they take out.
  const quant::ModelTemplate* tmpl = quant::find_model_template(model_type);
  const std::vector<std::string> excl = quant::default_exclude_layers(model_type);
  oj groups = oj::array();
  uint64_t excluded_total = 0;
  for (const Group& g : layout.groups) {
    uint64_t ex = 0;
    for_each_module(g, [&](const std::string& name, int64_t) {
      for (const auto& p : excl)
        if (quant::module_matches(p, name)) {
          ++ex;
          break;
        }
    });
    excluded_total += ex;
    groups.push_back(group_json(g, ex));
  }

  const uint64_t params = layout.linear_params + layout.other_params;
  const uint64_t weight_bytes = params * dtype_bytes(torch_dtype);

  // Multimodal signals.
  std::vector<std::string> mm;
  for (const char* key : {"vision_config", "audio_config", "vision_tower", "visual", "mm_projector_type",
                          "image_token_index", "image_token_id"})
    if (config.contains(key)) mm.emplace_back(key);
  for (const auto& a : architectures)
    if (a.find("ForConditionalGeneration") != std::string::npos || a.find("Vision") != std::string::npos ||
        a.find("VL") != std::string::npos)
      mm.push_back("architectures: " + a);

  // rope_scaling type.
  std::optional<std::string> rope_type;
  if (const json* rs = f.find("rope_scaling")) {
    if (!rs->is_object()) f.bad("rope_scaling", "must be an object or null");
    rope_type = rope_dict_type(*rs);
  }
  if (const json* rp = f.find("rope_parameters"); rp && !rope_type) {  // transformers 5
    if (!rp->is_object()) f.bad("rope_parameters", "must be an object or null");
    rope_type = rope_parameters_type(*rp);
  }

  // quantization_config.
  std::optional<std::string> quant_method;
  if (auto it = config.find("quantization_config"); it != config.end() && !it->is_null()) {
    auto qm = it->is_object() ? it->find("quant_method") : it->end();
    quant_method = (it->is_object() && qm != it->end() && qm->is_string()) ? qm->get<std::string>() : "unknown";
  }
  const bool remote_code = config.contains("auto_map");

  // ---- risks, in the documented order ----
  if (partial)
    risks.push_back({"incomplete_config", "high",
                     "config.json does not state " + join_with(missing, ", ") +
                         "; the linear layers and sizes cannot be derived",
                     "use the model's complete Hugging Face config.json, or name the missing facts"});
  if (quant_method)
    risks.push_back({"already_quantized", "high",
                     "config.json has a quantization_config (quant_method \"" + *quant_method +
                         "\"): the checkpoint is already quantized",
                     "start from the unquantized (bf16 / fp16 / fp32) checkpoint"});
  if (remote_code)
    risks.push_back({"remote_code", engine_type ? "medium" : "high",
                     "config.json has auto_map: the model ships custom modeling code, which qloom never executes",
                     engine_type ? "qloom uses its own implementation of model_type \"" + model_type +
                                       "\"; check that the custom code does not change the layout"
                                 : "use a checkpoint of an architecture transformers (and qloom) implement natively"});
  if (!model_type.empty() && !engine_type)
    risks.push_back({"unsupported_architecture", "high",
                     "qloom's engine does not run model_type \"" + model_type + "\" (supported: " +
                         model::supported_model_types() +
                         "): calibration (static activation / KV scales, GPTQ, AWQ, SmoothQuant) and "
                         "evaluation are unavailable",
                     "use a weight-only scheme without an algorithm (RTN: int4_wo_*, uint4_wo_*, ptpc_fp8, "
                     "mxfp4_weight_only), or a supported architecture"});
  if (engine_type && !engine_ok && !rope_item(engine_item))
    risks.push_back({"engine_config_unsupported", "high",
                     "qloom's engine cannot run this config: " + engine_detail,
                     "use a weight-only RTN scheme, or fix / replace the config"});
  if (rope_type && !engine_rope_type(*rope_type))
    risks.push_back({"rope_scaling_unsupported", "high",
                     "rope_scaling type \"" + *rope_type +
                         "\" is not implemented by qloom's engine (default, linear, llama3): calibration and "
                         "evaluation are unavailable",
                     "use a weight-only RTN scheme, or a checkpoint without this RoPE scaling"});
  if (!model_type.empty() && !tmpl)
    risks.push_back({"no_quark_template", "medium",
                     "Quark has no template for model_type \"" + model_type +
                         "\": the default exclusions fall back to [lm_head]",
                     "review the exclusions (routers, vision towers, ...) at the plan checkpoint"});
  if (d.experts > 0 && !partial)
    risks.push_back({"moe", "medium",
                     "mixture of experts: " + std::to_string(d.experts) + " experts" +
                         (d.experts_per_tok > 0 ? ", " + std::to_string(d.experts_per_tok) + " per token" : "") +
                         "; an expert receives calibration tokens only when routed (unrouted experts fall back "
                         "to RTN), routers stay unquantized",
                     "use more calibration samples if many experts go unrouted"});
  if (!partial && double(params) > kLargeModelParams)
    risks.push_back({"large_model", "medium",
                     "about " + format_count(params) + " parameters (> 70B): long calibration and large output",
                     "check the disk and time estimates in the plan; prefer RTN or fewer calibration samples"});
  if (!mm.empty())
    risks.push_back({"multimodal", "medium",
                     "multimodal config (" + join_with(mm, ", ") +
                         "): only the language model's linear layers are counted and quantized",
                     "keep vision / audio towers excluded (the Quark template does)"});
  if (!partial && !d.from_engine)
    risks.push_back({"layout_assumed", "low",
                     "layer names and shapes assume the Hugging Face " + d.layout +
                         " layout (not checked by qloom's engine); counts are estimates",
                     "compare with the checkpoint's tensor names before relying on per-layer patterns"});
  if (!partial && d.tie)
    risks.push_back({"tied_embeddings", "low",
                     "lm_head is tied to the input embeddings: it is not stored separately and stays in the "
                     "source dtype",
                     ""});

  std::string compatibility = "ok";
  for (const auto& r : risks) {
    if (r.id == "incomplete_config" || r.id == "already_quantized") compatibility = "unsupported";
    else if ((r.severity == "high" || r.severity == "medium") && compatibility == "ok") compatibility = "warning";
  }

  // ---- the artifact ----
  oj j;
  j["analysis_status"] = partial ? "partial" : "complete";
  oj m;
  m["model_path"] = model_spec;
  m["resolved_path"] = resolved_path;
  m["source"] = source;
  std::optional<io::HubId> hub = source == "hub" ? io::parse_hub_id(model_spec) : std::nullopt;
  m["hub_repo_id"] = hub ? oj(hub->repo_id()) : oj(nullptr);
  m["hub_revision"] = hub ? oj(hub->revision) : oj(nullptr);
  m["config_file"] = config_file;
  m["model_type"] = model_type;
  m["architectures"] = architectures;
  m["loading_class"] = loading_class(model_type);
  m["trust_remote_code"] = remote_code;
  auto known = [&](int64_t v) { return partial && v == 0 ? oj(nullptr) : oj(v); };
  m["num_hidden_layers"] = known(d.layers);
  m["hidden_size"] = known(d.hidden);
  m["intermediate_size"] = d.inter > 0 ? oj(d.inter) : oj(nullptr);
  m["num_attention_heads"] = known(d.heads);
  m["num_key_value_heads"] = known(d.kv_heads);
  m["head_dim"] = known(d.head_dim);
  m["vocab_size"] = known(d.vocab);
  m["max_position_embeddings"] = d.max_position > 0 ? oj(d.max_position) : opt_int(std::nullopt);
  m["torch_dtype"] = torch_dtype.empty() ? oj(nullptr) : oj(torch_dtype);
  m["tie_word_embeddings"] = d.tie;
  m["rope_scaling_type"] = rope_type ? oj(*rope_type) : oj(nullptr);
  m["is_moe"] = d.experts > 0;
  if (d.experts > 0) {
    uint64_t moe_layers = 0;
    for (uint8_t b : d.layer_moe) moe_layers += b;
    m["moe"] = {{"num_experts", d.experts},
                {"experts_per_token", d.experts_per_tok > 0 ? oj(d.experts_per_tok) : oj(nullptr)},
                {"moe_intermediate_size", d.moe_inter > 0 ? oj(d.moe_inter) : oj(nullptr)},
                {"shared_expert_intermediate_size", d.shared_inter > 0 ? oj(d.shared_inter) : oj(nullptr)},
                {"moe_layers", moe_layers}};
  } else {
    m["moe"] = nullptr;
  }
  m["is_multimodal"] = !mm.empty();
  m["multimodal_signals"] = mm;
  m["quantization_config"] = quant_method ? oj(*quant_method) : oj(nullptr);
  m["estimated_parameters"] = partial ? oj(nullptr) : oj(params);
  m["estimated_weights_bytes"] = partial ? oj(nullptr) : oj(weight_bytes);
  m["estimated_size_gb"] = partial ? oj(nullptr) : oj(std::round(double(weight_bytes) / 1e7) / 100.0);
  j["model"] = m;

  oj t;
  t["linear_layer_count"] = partial ? oj(nullptr) : oj(layout.linear_count);
  t["linear_layer_formula"] = partial ? oj(nullptr) : oj(layout.formula);
  t["quantization_target_count"] = partial ? oj(nullptr) : oj(layout.linear_count - excluded_total);
  t["exclude_defaults"] = excl;
  t["exclude_defaults_source"] = tmpl ? "quark_template" : "fallback";
  t["has_non_linear_experts"] = fused_experts_type(model_type);
  t["needs_moe_preparation"] = d.experts > 0 || fused_experts_type(model_type);
  t["layout"] = partial ? oj(nullptr) : oj(d.layout);
  t["layout_source"] = partial ? oj(nullptr) : oj(d.from_engine ? "engine" : "assumed");
  t["linear_parameters"] = partial ? oj(nullptr) : oj(layout.linear_params);
  t["groups"] = groups;
  j["quantization_targets"] = t;

  const bool usable = engine_ok && !quant_method;
  j["engine"] = {{"supported", engine_ok},
                 {"calibration", usable},
                 {"evaluation", usable},
                 {"detail", engine_detail}};
  j["risks"] = oj::array();
  for (const auto& r : risks) j["risks"].push_back(risk_json(r));
  j["compatibility"] = compatibility;
  j["environment"] = environment;
  return j;
}

nlohmann::ordered_json analyze_model(const std::string& model_spec, const std::filesystem::path& config_dir,
                                     const nlohmann::ordered_json& environment) {
  std::error_code ec;
  if (!fs::is_directory(config_dir, ec))
    throw_not_found(config_dir.string(), "", "model directory not found (or not a directory)",
                    "pass an existing local model directory or a Hugging Face id (org/name)");
  const fs::path file = config_dir / "config.json";
  if (!fs::exists(file, ec))
    throw_not_found(file.string(), "", "the model directory has no config.json",
                    "point at the directory that holds the model's config.json");
  if (!fs::is_regular_file(file, ec))
    throw_invalid(file.string(), "", "config.json is not a regular file", "replace it with the model's config.json");
  io::JsonReadOptions opts;
  opts.remedy = "fix config.json (it must be the model's Hugging Face config) or re-download it";
  const json config = io::read_json_file(file, opts);

  fs::path resolved = fs::absolute(config_dir, ec).lexically_normal();
  if (ec) resolved = config_dir.lexically_normal();
  if (resolved.filename().empty()) resolved = resolved.parent_path();  // "dir/" -> "dir"
  // A hub model is read from a huggingface_hub cache snapshot:
  // .../models--<org>--<name>/snapshots/<commit>.
  const bool snapshot = resolved.parent_path().filename() == "snapshots" &&
                        resolved.parent_path().parent_path().filename().string().rfind("models--", 0) == 0;
  const std::string source = snapshot && io::parse_hub_id(model_spec) ? "hub" : "local";
  oj j = analyze_config(config, file.string(), model_spec, source, resolved.string(), environment);
  if (source == "hub") j["model"]["hub_revision"] = resolved.filename().string();
  return j;
}

std::vector<LinearModule> expand_linear_modules(const nlohmann::json& analysis) {
  std::vector<LinearModule> out;
  const char* file = "model_analysis.json";
  auto t = analysis.find("quantization_targets");
  if (t == analysis.end() || !t->is_object()) throw_invalid(file, "quantization_targets", "missing or not an object");
  auto groups = t->find("groups");
  if (groups == t->end() || !groups->is_array()) throw_invalid(file, "quantization_targets.groups", "missing or not a list");
  for (const auto& gj : *groups) {
    Group g;
    try {
      g.name = gj.at("name").get<std::string>();
      if (!gj.at("layers").is_null()) g.layers = parse_layer_ranges(gj.at("layers").get<std::string>(), file);
      g.experts = gj.at("experts").get<int64_t>();
      g.out = gj.at("out_features").get<uint64_t>();
      g.in = gj.at("in_features").get<uint64_t>();
    } catch (const json::exception& e) {
      throw_invalid(file, "quantization_targets.groups", std::string("malformed group: ") + e.what(),
                    "regenerate model_analysis.json");
    }
    for_each_module(g, [&](const std::string& name, int64_t layer) { out.push_back({name, g.out, g.in, layer}); });
  }
  return out;
}

// ---- the summary block -------------------------------------------------------------

std::string render_analysis_summary(const nlohmann::json& a) {
  std::ostringstream o;
  auto row = [&](const char* label, const std::string& value) {
    std::string l = std::string(label) + ":";
    l.resize(18, ' ');
    o << "  " << l << value << "\n";
  };
  auto str = [](const json& v) -> std::string {
    if (v.is_null()) return "?";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
  };
  const json& m = a.at("model");
  const json& t = a.at("quantization_targets");
  o << "Model Analysis:\n";
  std::string path = str(m.at("model_path"));
  if (m.at("resolved_path").is_string() && m.at("resolved_path").get<std::string>() != path &&
      m.at("source") == "local")
    path += " (" + m.at("resolved_path").get<std::string>() + ")";
  row("Model path", path);
  std::string type = m.at("model_type").get<std::string>().empty() ? "(none)" : m.at("model_type").get<std::string>();
  if (!m.at("architectures").empty()) {
    std::vector<std::string> arch = m.at("architectures").get<std::vector<std::string>>();
    type += " (" + join_with(arch, ", ") + ")";
  }
  row("Model type", type);
  row("Hidden layers", str(m.at("num_hidden_layers")));
  if (t.at("linear_layer_count").is_null()) {
    row("Linear layers", "unknown (partial analysis)");
  } else {
    const uint64_t n = t.at("linear_layer_count").get<uint64_t>(), q = t.at("quantization_target_count").get<uint64_t>();
    std::string prefix = t.at("layout_source") == "engine" ? "" : "~";
    row("Linear layers", prefix + std::to_string(q) + " (quantization targets; " + std::to_string(n) +
                             " linear layers, " + std::to_string(n - q) + " excluded by default)");
  }
  std::string moe = "No";
  if (m.at("is_moe").get<bool>()) {
    const json& x = m.at("moe");
    moe = "Yes (" + str(x.at("num_experts")) + " experts";
    if (!x.at("experts_per_token").is_null()) moe += ", " + str(x.at("experts_per_token")) + " per token";
    moe += ", " + str(x.at("moe_layers")) + " MoE layers)";
  }
  row("MoE", moe);
  row("Exclude defaults", "[" + join_with(t.at("exclude_defaults").get<std::vector<std::string>>(), ", ") + "]");
  const json& risks = a.at("risks");
  if (risks.empty()) {
    row("Risks", "None");
  } else {
    for (size_t i = 0; i < risks.size(); ++i) {
      const std::string line = risks[i].at("id").get<std::string>() + " (" +
                               risks[i].at("severity").get<std::string>() + "): " +
                               risks[i].at("message").get<std::string>();
      if (i == 0) row("Risks", line);
      else o << std::string(20, ' ') << line << "\n";
    }
  }
  const std::string c = a.at("compatibility").get<std::string>();
  row("Compatibility", c == "ok" ? "OK" : c == "warning" ? "Warning (see risks)" : "Unsupported (see risks)");
  if (!m.at("estimated_parameters").is_null()) {
    std::string dt = m.at("torch_dtype").is_string() ? m.at("torch_dtype").get<std::string>() : "unknown dtype";
    row("Parameters", "~" + format_count(m.at("estimated_parameters").get<uint64_t>()) + " (weights ~" +
                          format_bytes(m.at("estimated_weights_bytes").get<uint64_t>()) + " " + dt +
                          ", from config.json)");
  }
  const json& e = a.at("engine");
  row("qloom engine", e.at("supported").get<bool>() ? (e.at("calibration").get<bool>()
                                                          ? "supported (calibration and evaluation available)"
                                                          : "supported, but not for this checkpoint")
                                                    : "not supported: " + e.at("detail").get<std::string>());
  return o.str();
}

}  // namespace qloom::agent
