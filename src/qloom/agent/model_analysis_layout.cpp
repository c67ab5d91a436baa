// The analysed model's linear layers (model_analysis_internal.h): Dims ->
// groups of modules in Hugging Face naming with their shapes, counts and
// parameter totals; the groups as JSON and back (expand_linear_modules);
// layer ranges ("0-3,5").
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "qloom/agent/model_analysis.h"
#include "qloom/agent/model_analysis_internal.h"
#include "qloom/core/error.h"

namespace qloom::agent {
namespace detail {
namespace {

using oj = nlohmann::ordered_json;

const std::string kLayerPrefix = "model.layers.{i}.";

void add_group(Layout& L, const std::string& name, const std::vector<int64_t>& layers, int64_t experts, uint64_t out,
               uint64_t in) {
  L.groups.push_back({name, layers, experts, out, in});
}

// Attention projections of every layer; returns their short names for the
// formula ("q", "k", ...).
std::vector<std::string> add_attention(Layout& L, const Dims& d, const std::vector<int64_t>& all) {
  const std::string& pre = kLayerPrefix;
  const uint64_t H = uint64_t(d.hidden), hd = uint64_t(d.head_dim);
  const uint64_t nh = uint64_t(d.heads), nkv = uint64_t(d.kv_heads);
  std::vector<std::string> attn;
  if (d.mla) {
    const Mla& m = *d.mla;
    const uint64_t qk = uint64_t(m.nope + m.rope);
    if (m.q_lora > 0) {
      add_group(L, pre + "self_attn.q_a_proj", all, 0, uint64_t(m.q_lora), H);
      add_group(L, pre + "self_attn.q_b_proj", all, 0, nh * qk, uint64_t(m.q_lora));
      attn = {"q_a", "q_b"};
    } else {
      add_group(L, pre + "self_attn.q_proj", all, 0, nh * qk, H);
      attn = {"q"};
    }
    add_group(L, pre + "self_attn.kv_a_proj_with_mqa", all, 0, uint64_t(m.kv_lora + m.rope), H);
    add_group(L, pre + "self_attn.kv_b_proj", all, 0, nh * uint64_t(m.nope + m.v), uint64_t(m.kv_lora));
    add_group(L, pre + "self_attn.o_proj", all, 0, H, nh * uint64_t(m.v));
    for (const char* n : {"kv_a", "kv_b", "o"}) attn.emplace_back(n);
  } else if (d.fused_qkv) {
    add_group(L, pre + "self_attn.qkv_proj", all, 0, (nh + 2 * nkv) * hd, H);
    add_group(L, pre + "self_attn.o_proj", all, 0, H, nh * hd);
    attn = {"qkv", "o"};
  } else {
    add_group(L, pre + "self_attn.q_proj", all, 0, nh * hd, H);
    add_group(L, pre + "self_attn.k_proj", all, 0, nkv * hd, H);
    add_group(L, pre + "self_attn.v_proj", all, 0, nkv * hd, H);
    add_group(L, pre + "self_attn.o_proj", all, 0, H, nh * hd);
    attn = {"q", "k", "v", "o"};
  }
  return attn;
}

// The dense MLP of the dense layers; returns its short names.
std::vector<std::string> add_dense_mlp(Layout& L, const Dims& d, const std::vector<int64_t>& dense) {
  const std::string& pre = kLayerPrefix;
  const uint64_t H = uint64_t(d.hidden), I = uint64_t(d.inter);
  std::vector<std::string> mlp;
  if (dense.empty()) return mlp;
  if (d.fused_gate_up) {
    add_group(L, pre + "mlp.gate_up_proj", dense, 0, 2 * I, H);
    mlp = {"gate_up", "down"};
  } else {
    add_group(L, pre + "mlp.gate_proj", dense, 0, I, H);
    add_group(L, pre + "mlp.up_proj", dense, 0, I, H);
    mlp = {"gate", "up", "down"};
  }
  add_group(L, pre + "mlp.down_proj", dense, 0, H, I);
  return mlp;
}

// The MoE blocks (router, experts, shared expert and its gate); returns the
// linear layers per MoE layer.
uint64_t add_moe(Layout& L, const Dims& d, const std::vector<int64_t>& moe) {
  const std::string& pre = kLayerPrefix;
  const uint64_t H = uint64_t(d.hidden);
  const uint64_t E = uint64_t(d.experts), Im = uint64_t(d.moe_inter), S = uint64_t(d.shared_inter);
  if (moe.empty()) return 0;
  if (d.moe_naming == "mixtral") {
    add_group(L, pre + "block_sparse_moe.gate", moe, 0, E, H);
    add_group(L, pre + "block_sparse_moe.experts.{e}.w1", moe, d.experts, Im, H);
    add_group(L, pre + "block_sparse_moe.experts.{e}.w2", moe, d.experts, H, Im);
    add_group(L, pre + "block_sparse_moe.experts.{e}.w3", moe, d.experts, Im, H);
  } else {
    add_group(L, pre + "mlp.gate", moe, 0, E, H);
    add_group(L, pre + "mlp.experts.{e}.gate_proj", moe, d.experts, Im, H);
    add_group(L, pre + "mlp.experts.{e}.up_proj", moe, d.experts, Im, H);
    add_group(L, pre + "mlp.experts.{e}.down_proj", moe, d.experts, H, Im);
    if (S > 0) {
      const std::string sp = pre + (d.moe_naming == "deepseek" ? "mlp.shared_experts." : "mlp.shared_expert.");
      add_group(L, sp + "gate_proj", moe, 0, S, H);
      add_group(L, sp + "up_proj", moe, 0, S, H);
      add_group(L, sp + "down_proj", moe, 0, H, S);
    }
    if (d.shared_gate) add_group(L, pre + "mlp.shared_expert_gate", moe, 0, 1, H);
  }
  return 1 + 3 * E + (S > 0 ? 3 : 0) + (d.shared_gate ? 1 : 0);
}

// The count's formula, e.g. "5 layers x 4 attention (q,k,v,o) + 5 dense
// layers x 3 MLP (gate,up,down) + lm_head 0 (tied to the embeddings) = 35".
std::string layout_formula(const Dims& d, const std::vector<std::string>& attn, const std::vector<std::string>& mlp,
                           size_t dense_layers, size_t moe_layers, uint64_t per_moe_layer, uint64_t linear_count) {
  std::string f = std::to_string(d.layers) + " layers x " + std::to_string(attn.size()) + " attention (" +
                  join_with(attn, ",") + ")";
  if (dense_layers > 0)
    f += " + " + std::to_string(dense_layers) + " dense layers x " + std::to_string(mlp.size()) + " MLP (" +
         join_with(mlp, ",") + ")";
  if (moe_layers > 0) {
    f += " + " + std::to_string(moe_layers) + " MoE layers x (1 router + " + std::to_string(uint64_t(d.experts)) + " experts x 3";
    if (uint64_t(d.shared_inter) > 0) f += " + 3 shared expert";
    if (d.shared_gate) f += " + 1 shared-expert gate";
    f += " = " + std::to_string(per_moe_layer) + ")";
  }
  f += d.tie ? " + lm_head 0 (tied to the embeddings)" : " + lm_head 1";
  f += " = " + std::to_string(linear_count);
  return f;
}

// Non-linear parameters: embeddings, norms, biases.
uint64_t other_parameters(const Dims& d, size_t dense_layers) {
  const uint64_t H = uint64_t(d.hidden), I = uint64_t(d.inter), hd = uint64_t(d.head_dim);
  const uint64_t nh = uint64_t(d.heads), nkv = uint64_t(d.kv_heads);
  uint64_t other = uint64_t(d.vocab) * H + H;  // embed_tokens + final norm
  const uint64_t n_layers = uint64_t(d.layers);
  uint64_t norms = (d.sandwich ? 4 : 2) * H + (d.qk_norm ? 2 * hd : 0);
  if (d.mla) norms += uint64_t(d.mla->q_lora + d.mla->kv_lora);
  other += n_layers * norms;
  if (!d.mla) {
    if (d.qkv_bias) other += n_layers * (nh + 2 * nkv) * hd;
    if (d.o_bias) other += n_layers * H;
  }
  if (d.mlp_bias) other += uint64_t(dense_layers) * (2 * I + H);
  return other;
}

}  // namespace

std::string join_with(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

Layout build_layout(const Dims& d) {
  Layout L;
  std::vector<int64_t> all, dense, moe;
  for (int64_t i = 0; i < d.layers; ++i) {
    all.push_back(i);
    (d.layer_moe.size() > size_t(i) && d.layer_moe[size_t(i)] ? moe : dense).push_back(i);
  }
  const std::vector<std::string> attn = add_attention(L, d, all);
  const std::vector<std::string> mlp = add_dense_mlp(L, d, dense);
  const uint64_t per_moe_layer = add_moe(L, d, moe);
  if (!d.tie) add_group(L, "lm_head", {}, 0, uint64_t(d.vocab), uint64_t(d.hidden));
  for (const auto& g : L.groups) {
    L.linear_count += g.count();
    L.linear_params += g.count() * g.out * g.in;
  }
  L.formula = layout_formula(d, attn, mlp, dense.size(), moe.size(), per_moe_layer, L.linear_count);
  L.other_params = other_parameters(d, dense.size());
  return L;
}

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

}  // namespace detail

// ---- public ----

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

std::vector<LinearModule> expand_linear_modules(const nlohmann::json& analysis) {
  std::vector<LinearModule> out;
  const char* file = "model_analysis.json";
  auto t = analysis.find("quantization_targets");
  if (t == analysis.end() || !t->is_object()) throw_invalid(file, "quantization_targets", "missing or not an object");
  auto groups = t->find("groups");
  if (groups == t->end() || !groups->is_array()) throw_invalid(file, "quantization_targets.groups", "missing or not a list");
  for (const auto& gj : *groups) {
    detail::Group g;
    try {
      g.name = gj.at("name").get<std::string>();
      if (!gj.at("layers").is_null()) g.layers = parse_layer_ranges(gj.at("layers").get<std::string>(), file);
      g.experts = gj.at("experts").get<int64_t>();
      g.out = gj.at("out_features").get<uint64_t>();
      g.in = gj.at("in_features").get<uint64_t>();
    } catch (const nlohmann::json::exception& e) {
      throw_invalid(file, "quantization_targets.groups", std::string("malformed group: ") + e.what(),
                    "regenerate model_analysis.json");
    }
    detail::for_each_module(g, [&](const std::string& name, int64_t layer) { out.push_back({name, g.out, g.in, layer}); });
  }
  return out;
}

}  // namespace qloom::agent
