// vLLM 0.33.0's Quark-loader semantics (see vllm_rules.h): how it compares
// configs, matches exclude entries and layer_quant_config keys, edits the
// KV-cache entries, and which layers it fuses. Written from reading vLLM's
// source; no code of it is used.
#include <regex>
#include <set>

#include "qloom/validate/name_patterns.h"
#include "qloom/validate/vllm_rules.h"

namespace qloom::validate::vllm {

using json = nlohmann::json;

namespace {

// Python's type() of a value json.loads gave.
int py_type(const json& v) {
  if (v.is_null()) return 0;
  if (v.is_boolean()) return 1;
  if (v.is_number_integer()) return 2;  // signed and unsigned: both int
  if (v.is_number_float()) return 3;
  if (v.is_string()) return 4;
  if (v.is_array()) return 5;
  return 6;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

const json& field(const json& obj, const char* key) {
  static const json null_value;
  if (!obj.is_object()) return null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

// Embeddings and heads: vLLM builds them as (Parallel)Embedding / LMHead, not
// LinearBase, so no Quark scheme applies. MoE experts go through FusedMoE and
// routers are built without a quant_config in vLLM's MoE models.
bool is_embedding(const std::string& m) {
  return m.find("embed") != std::string::npos || ends_with(m, "lm_head") || ends_with(m, ".wte");
}
bool is_moe_part(const std::string& m) {
  return m.find(".experts.") != std::string::npos || ends_with(m, ".gate") || ends_with(m, "router") ||
         ends_with(m, "shared_expert_gate");
}

}  // namespace

bool deep_compare(const json& a, const json& b) {
  if (py_type(a) != py_type(b)) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      const auto jt = b.find(it.key());
      if (jt == b.end() || !deep_compare(*it, *jt)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    // vLLM walks dict1's indices only (a shorter dict2 raises IndexError).
    if (b.size() < a.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!deep_compare(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

std::string first_difference(const json& a, const json& b, const std::string& path) {
  const std::string here = path.empty() ? "(the whole config)" : path;
  if (py_type(a) != py_type(b) || (!a.is_object() && !a.is_array()))
    return deep_compare(a, b) ? "" : here + ": " + a.dump() + " / " + b.dump();
  if (a.is_array()) {
    if (a.size() != b.size()) return here + ": " + a.dump() + " / " + b.dump();
    for (size_t i = 0; i < a.size(); ++i)
      if (auto d = first_difference(a[i], b[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
    return "";
  }
  for (auto it = a.begin(); it != a.end(); ++it) {
    const std::string sub = path.empty() ? it.key() : path + "." + it.key();
    const auto jt = b.find(it.key());
    if (jt == b.end()) return sub + ": " + it->dump() + " / (absent)";
    if (auto d = first_difference(*it, *jt, sub); !d.empty()) return d;
  }
  for (auto jt = b.begin(); jt != b.end(); ++jt)
    if (!a.contains(jt.key())) return (path.empty() ? jt.key() : path + "." + jt.key()) + ": (absent) / " + jt->dump();
  return "";
}

const json& get(const json& obj, const char* key) {
  static const json null_value;
  if (!obj.is_object()) return null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

bool truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_float()) return v.get<double>() != 0.0;
  if (v.is_number()) return v.get<int64_t>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

std::optional<std::string> excluded_by(const json& qc, const std::string& layer, std::string* error) {
  const json& ex = field(qc, "exclude");
  if (!ex.is_array()) return std::nullopt;
  for (const auto& e : ex) {
    if (!e.is_string()) continue;
    const std::string s = e.get<std::string>();
    if (s.rfind("re:", 0) == 0) {
      try {
        // re.match: anchored at the start, not at the end.
        if (std::regex_search(layer, std::regex(s.substr(3)), std::regex_constants::match_continuous)) return s;
      } catch (const std::regex_error&) {
        if (error) *error = "exclude entry '" + s + "' is not a valid regular expression";
      }
    } else if (s == layer) {
      return s;
    }
  }
  return std::nullopt;
}

json after_from_config(const json& qc) {
  json out = qc;
  const json& groups = field(field(qc, "export"), "kv_cache_group");
  if (!groups.is_array() || groups.empty()) return out;
  json* lqc = out.contains("layer_quant_config") ? &out["layer_quant_config"] : nullptr;
  if (lqc == nullptr || !lqc->is_object()) return out;
  for (auto it = lqc->begin(); it != lqc->end(); ++it) {
    bool kv = false;
    for (const auto& g : groups)
      if (g.is_string() && glob_match(g.get<std::string>(), it.key())) kv = true;
    if ((kv || it.key() == "*q_proj") && it->is_object()) (*it)["output_tensors"] = nullptr;
  }
  return out;
}

Resolved vllm_lookup(const json& qc, const std::string& layer) {
  const json& lqc = field(qc, "layer_quant_config");
  if (lqc.is_object())
    for (auto it = lqc.begin(); it != lqc.end(); ++it) {
      const std::string& key = it.key();
      const bool hit = key.find('*') == std::string::npos ? key.find(layer) != std::string::npos
                                                          : glob_match(key, layer);
      if (hit) return {"layer_quant_config['" + key + "']", *it};
    }
  // layer_type_quant_config is keyed by type(module): never a JSON string.
  return {"global_quant_config", field(qc, "global_quant_config")};
}

Resolved quark_lookup(const json& qc, const std::string& layer) {
  const json& lqc = field(qc, "layer_quant_config");
  if (lqc.is_object())
    for (auto it = lqc.begin(); it != lqc.end(); ++it)
      if (glob_match(it.key(), layer)) return {"layer_quant_config['" + it.key() + "']", *it};
  return {"global_quant_config", field(qc, "global_quant_config")};
}

std::vector<FusedGroup> fused_groups(const std::vector<std::string>& linears) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> kMapping = {
      {"qkv_proj", {"q_proj", "k_proj", "v_proj"}}, {"gate_up_proj", {"gate_proj", "up_proj"}}};
  const std::set<std::string> present(linears.begin(), linears.end());
  std::vector<FusedGroup> out;
  for (const std::string& m : linears) {
    for (const auto& [fused, shards] : kMapping) {
      const std::string first = "." + shards.front();
      if (!ends_with(m, first)) continue;
      const std::string stem = m.substr(0, m.size() - shards.front().size());
      FusedGroup g{stem + fused, {}};
      for (const auto& s : shards)
        if (present.count(stem + s)) g.shards.push_back(stem + s);
      if (g.shards.size() == shards.size()) out.push_back(std::move(g));
    }
  }
  return out;
}

bool CheckpointView::is_quantized(const std::string& module) const {
  for (const auto& q : quantized)
    if (q == module) return true;
  return false;
}

CheckpointView make_view(const json& qc, const io::WeightIndex& weights, const io::WeightIndex* source) {
  CheckpointView v;
  v.qc = qc;
  v.weights = &weights;
  v.source = source;
  for (const std::string& name : weights.tensor_names()) {
    if (!ends_with(name, ".weight")) continue;
    const io::TensorInfo* t = weights.find(name);
    if (t == nullptr || t->shape.size() != 2) continue;
    const std::string m = name.substr(0, name.size() - 7);
    const bool q = weights.find(m + ".weight_scale") != nullptr;
    if (is_embedding(m)) {
      if (q) v.quantized_embeddings.push_back(m);
      continue;
    }
    if (is_moe_part(m)) continue;
    v.linears.push_back(m);
    if (q) v.quantized.push_back(m);
  }
  return v;
}

}  // namespace qloom::validate::vllm
