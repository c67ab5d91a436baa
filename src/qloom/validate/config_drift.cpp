// config.json compared semantically: renames, defaults and metadata that a
// newer transformers changes on re-saving are benign drift (drift.h).
#include <set>
#include <string>
#include <vector>

#include "qloom/validate/drift.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

namespace {

using json = nlohmann::json;
using oj = nlohmann::ordered_json;

constexpr const char* kMetadataKeys[] = {"transformers_version", "_name_or_path", "_commit_hash"};
constexpr const char* kRopeKeys[] = {"rope_theta", "rope_scaling", "rope_parameters",
                                     "partial_rotary_factor"};

std::optional<json> get(const json& j, const std::string& k) {
  const auto it = j.find(k);
  if (it == j.end()) return std::nullopt;
  return *it;
}

// The keys of `keys` that `cfg` holds, with their values.
json form_of(const json& cfg, std::initializer_list<const char*> keys) {
  json f = json::object();
  for (const char* k : keys)
    if (const auto v = get(cfg, k)) f[k] = *v;
  return f;
}

void take_metadata(json& s, json& q, Comparison& out) {
  for (const char* k : kMetadataKeys) {
    auto sv = get(s, k), qv = get(q, k);
    if (sv != qv)
      out.drift.push_back({k, "metadata", sv, qv, "written by the saving library, no effect on the model"});
    s.erase(k);
    q.erase(k);
  }
}

// torch_dtype (4.x) <-> dtype (5.x).
void take_dtype(json& s, json& q, Comparison& out) {
  const json sf = form_of(s, {"torch_dtype", "dtype"}), qf = form_of(q, {"torch_dtype", "dtype"});
  auto same_keys = [](const json& a, const json& b) {
    for (const char* k : {"torch_dtype", "dtype"})
      if (a.contains(k) != b.contains(k)) return false;
    return true;
  };
  if (same_keys(sf, qf)) return;  // the plain comparison judges it
  auto canonical = [](json& c) {
    if (!c.contains("dtype") && c.contains("torch_dtype")) c["dtype"] = c["torch_dtype"];
    if (c.contains("torch_dtype") && c["torch_dtype"] == c["dtype"]) c.erase("torch_dtype");
  };
  canonical(s);
  canonical(q);
  if (get(s, "dtype") == get(q, "dtype") && get(s, "torch_dtype") == get(q, "torch_dtype"))
    out.drift.push_back({"dtype", "renamed", sf, qf, "transformers 5 writes torch_dtype as dtype"});
}

// "type" is "rope_type"; a missing type is "default".
void canonical_rope_dict(json& rp) {
  if (!rp.is_object()) return;
  if (rp.contains("type")) {
    if (!rp.contains("rope_type")) rp["rope_type"] = rp["type"];
    if (rp["rope_type"] == rp["type"]) rp.erase("type");
  }
  if (!rp.contains("rope_type")) rp["rope_type"] = "default";
}

bool nested_rope(const json& rp) {
  if (!rp.is_object() || rp.empty()) return false;
  for (auto it = rp.begin(); it != rp.end(); ++it)
    if (!it->is_object()) return false;
  return true;
}

// The 5.x rope_parameters a config means, whichever form it is written in.
json canonical_rope(const json& cfg, const std::string& model_type) {
  const auto theta = get(cfg, "rope_theta");
  const auto prf = get(cfg, "partial_rotary_factor");
  const auto fill = [&](json& rp) {
    canonical_rope_dict(rp);
    if (!rp.contains("rope_theta")) {
      if (theta) rp["rope_theta"] = *theta;
      else if (const auto d = default_rope_theta(model_type)) rp["rope_theta"] = *d;
    }
    if (prf && !rp.contains("partial_rotary_factor")) rp["partial_rotary_factor"] = *prf;
  };
  json rp = json::object();
  if (const auto p = get(cfg, "rope_parameters"); p && p->is_object()) rp = *p;
  else if (const auto sc = get(cfg, "rope_scaling"); sc && sc->is_object()) rp = *sc;
  if (nested_rope(rp)) {
    for (auto it = rp.begin(); it != rp.end(); ++it) fill(*it);
  } else {
    fill(rp);
  }
  return rp;
}

// rope_theta + rope_scaling (4.x) <-> rope_parameters (5.x): normalised only
// when one side has rope_parameters and the other does not.
void take_rope(json& s, json& q, const std::string& model_type, Comparison& out) {
  if (s.contains("rope_parameters") == q.contains("rope_parameters")) return;
  const json sf = form_of(s, {"rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor"});
  const json qf = form_of(q, {"rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor"});
  const json sr = canonical_rope(s, model_type), qr = canonical_rope(q, model_type);
  for (const char* k : kRopeKeys) {
    s.erase(k);
    q.erase(k);
  }
  const auto diffs = json_differences(sr, qr, "rope_parameters");
  if (diffs.empty()) {
    out.drift.push_back({"rope_parameters", "renamed", sf, qf,
                         "the same RoPE settings: transformers 5 writes rope_theta and "
                         "rope_scaling as rope_parameters"});
    return;
  }
  for (const auto& d : diffs) out.real.push_back(d);
}

// Qwen2/Qwen3: sliding_window means nothing while use_sliding_window is false
// (transformers 5 writes it as null then).
void take_unused_window(json& s, json& q, const std::string& model_type, Comparison& out) {
  if (model_type != "qwen2" && model_type != "qwen3") return;
  auto off = [](const json& c) {
    const auto u = get(c, "use_sliding_window");
    return !u || (u->is_boolean() && !u->get<bool>());
  };
  if (!off(s) || !off(q)) return;
  const auto sv = get(s, "sliding_window"), qv = get(q, "sliding_window");
  if (sv == qv) return;
  out.drift.push_back({"sliding_window", "equivalent", sv, qv, "unused while use_sliding_window is false"});
  s.erase("sliding_window");
  q.erase("sliding_window");
}

void compare_rest(const json& s, const json& q, const std::string& model_type, Comparison& out) {
  std::set<std::string> keys;
  for (auto it = s.begin(); it != s.end(); ++it) keys.insert(it.key());
  for (auto it = q.begin(); it != q.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    const auto sv = get(s, k), qv = get(q, k);
    if (sv && qv) {
      for (auto& d : json_differences(*sv, *qv, k)) out.real.push_back(std::move(d));
      continue;
    }
    const json& present = sv ? *sv : *qv;
    const auto d = config_default(model_type, k, sv ? q : s);
    if (d && *d == present) {
      out.drift.push_back({k, "default", sv, qv,
                           "transformers' default for " +
                               (model_type.empty() ? std::string("every model") : model_type) +
                               ", what the side without it loads"});
    } else {
      out.real.push_back({k, sv, qv});
    }
  }
}

}  // namespace

std::vector<RealDifference> json_differences(const json& a, const json& b, const std::string& path) {
  std::vector<RealDifference> out;
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const auto& k : keys) {
      const std::string sub = path.empty() ? k : path + "." + k;
      const auto ia = a.find(k), ib = b.find(k);
      if (ia == a.end()) out.push_back({sub, std::nullopt, *ib});
      else if (ib == b.end()) out.push_back({sub, *ia, std::nullopt});
      else for (auto& d : json_differences(*ia, *ib, sub)) out.push_back(std::move(d));
    }
    return out;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      for (auto& d : json_differences(a[i], b[i], path + "[" + std::to_string(i) + "]"))
        out.push_back(std::move(d));
    return out;
  }
  // Scalars (numbers by value), or different kinds / array lengths.
  if (a != b) out.push_back({path.empty() ? "<root>" : path, a, b});
  return out;
}

Comparison compare_configs(const json& source, const json& quantized) {
  Comparison out;
  if (!source.is_object() || !quantized.is_object()) {
    out.real = json_differences(source, quantized);
    return out;
  }
  json s = source, q = quantized;
  const auto mt = get(s, "model_type");
  const std::string model_type = mt && mt->is_string() ? mt->get<std::string>() : "";
  take_metadata(s, q, out);
  take_dtype(s, q, out);
  take_rope(s, q, model_type, out);
  take_unused_window(s, q, model_type, out);
  compare_rest(s, q, model_type, out);
  return out;
}

std::string drift_line(const DriftItem& d) {
  const auto side = [](const std::optional<json>& v) {
    return v ? detail::json_brief(*v) : std::string("(absent)");
  };
  return d.key + ": " + side(d.source) + " → " + side(d.quantized) + " (" + d.kind + ": " + d.note + ")";
}

oj drift_json(const DriftItem& d) {
  oj j = oj::object();
  j["key"] = d.key;
  j["kind"] = d.kind;
  if (d.source) j["source"] = oj(*d.source);
  if (d.quantized) j["quantized"] = oj(*d.quantized);
  j["note"] = d.note;
  return j;
}

}  // namespace qloom::validate
