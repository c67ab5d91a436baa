#include "qloom/quant/scaling_layers_config.h"

#include <algorithm>

#include "qloom/core/error.h"

namespace qloom::quant {
namespace {

[[noreturn]] void bad_scaling_layers_key(const std::string& item, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", item, msg,
              "each scaling_layers entry is {\"prev_op\": str, \"layers\": [str, ...], \"inp\": str"
              "[, \"module2inspect\": str]}, names relative to the decoder layer");
}

std::string name_of(const nlohmann::json& v, const std::string& item) {
  if (!v.is_string() || v.get<std::string>().empty()) bad_scaling_layers_key(item, "must be a non-empty string");
  return v.get<std::string>();
}

// "model.layers.3.self_attn.q_proj" -> "self_attn.q_proj"; a norm tensor
// loses its ".weight".
std::string relative(const std::string& name, const std::string& prefix) {
  std::string r = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
  const std::string suffix = ".weight";
  if (r.size() > suffix.size() && r.compare(r.size() - suffix.size(), suffix.size(), suffix) == 0)
    r.resize(r.size() - suffix.size());
  return r;
}

std::string key_of(const ScalingLayerEntry& e) {
  std::vector<std::string> l = e.layers;
  std::sort(l.begin(), l.end());
  std::string k = e.prev_op;
  for (const auto& s : l) k += "|" + s;
  return k;
}

}  // namespace

std::vector<ScalingLayerEntry> parse_scaling_layers(const nlohmann::json& v, const std::string& item) {
  std::vector<ScalingLayerEntry> out;
  if (v.is_null()) return out;
  if (!v.is_array()) bad_scaling_layers_key(item, "must be a list of scaling layer entries");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = item + "[" + std::to_string(i) + "]";
    const nlohmann::json& e = v[i];
    if (!e.is_object()) bad_scaling_layers_key(at, "must be an object");
    ScalingLayerEntry s;
    bool has_prev = false, has_layers = false, has_inp = false;
    for (const auto& [key, val] : e.items()) {
      const std::string k = at + "." + key;
      if (key == "prev_op") {
        s.prev_op = name_of(val, k);
        has_prev = true;
      } else if (key == "layers") {
        if (!val.is_array() || val.empty()) bad_scaling_layers_key(k, "must be a non-empty list of module names");
        for (const auto& m : val) s.layers.push_back(name_of(m, k));
        has_layers = true;
      } else if (key == "inp") {
        s.inp = name_of(val, k);
        has_inp = true;
      } else if (key == "module2inspect") {
        if (!val.is_string()) bad_scaling_layers_key(k, "must be a string");
        s.module2inspect = val.get<std::string>();
      } else {
        bad_scaling_layers_key(k, "unknown scaling_layers key '" + key + "'");
      }
    }
    if (!has_prev) bad_scaling_layers_key(at + ".prev_op", "is missing");
    if (!has_layers) bad_scaling_layers_key(at + ".layers", "is missing");
    if (!has_inp) bad_scaling_layers_key(at + ".inp", "is missing");
    if (std::find(s.layers.begin(), s.layers.end(), s.inp) == s.layers.end())
      bad_scaling_layers_key(at + ".inp", "'" + s.inp + "' is not one of the entry's layers");
    out.push_back(std::move(s));
  }
  return out;
}

ScalingLayerEntry scaling_entry_of(const ScalingGroup& g, int layer) {
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  ScalingLayerEntry e;
  e.prev_op = relative(g.prev_op, prefix);
  for (const std::string& l : g.linears) e.layers.push_back(relative(l, prefix));
  e.inp = e.layers.front();
  if (g.linears.size() > 1 || g.inspect != g.linears.front()) e.module2inspect = relative(g.inspect, prefix);
  return e;
}

bool same_group(const ScalingLayerEntry& a, const ScalingLayerEntry& b) { return key_of(a) == key_of(b); }

void check_scaling_layers(const std::vector<ScalingLayerEntry>& entries, const model::ModelConfig& config,
                          const std::string& item) {
  std::set<std::string> known;
  for (int i = 0; i < static_cast<int>(config.num_layers); ++i)
    for (const ScalingGroup& g : layer_scaling_groups(config, i)) known.insert(key_of(scaling_entry_of(g, i)));
  for (size_t i = 0; i < entries.size(); ++i) {
    if (known.count(key_of(entries[i]))) continue;
    std::string list;
    for (const ScalingGroup& g : layer_scaling_groups(config, 0)) {
      const ScalingLayerEntry e = scaling_entry_of(g, 0);
      if (!list.empty()) list += "; ";
      list += e.prev_op + " -> " + e.layers.front() + (e.layers.size() > 1 ? ", ..." : "");
    }
    throw Error(ErrorKind::kUnsupported, "", item + "[" + std::to_string(i) + "]",
                "no scaling group of this " + config.model_type + " model has prev_op '" + entries[i].prev_op +
                    "' with exactly these layers",
                "qloom's groups (layer 0): " + list + "; or omit scaling_layers");
  }
}

nlohmann::ordered_json scaling_entry_json(const ScalingLayerEntry& e) {
  nlohmann::ordered_json j;
  j["prev_op"] = e.prev_op;
  j["layers"] = e.layers;
  j["inp"] = e.inp;
  if (e.module2inspect) j["module2inspect"] = *e.module2inspect;
  return j;
}

std::string parse_model_decoder_layers(const nlohmann::json& v, const std::string& item) {
  if (!v.is_string()) throw Error(ErrorKind::kUsage, "", item, "must be a string", "use \"model.layers\"");
  const std::string s = v.get<std::string>();
  if (!s.empty() && s != "model.layers")
    throw Error(ErrorKind::kUnsupported, "", item, "qloom's engine names decoder layers model.layers, not '" + s + "'",
                "use \"model.layers\" (or omit the key)");
  return "model.layers";
}

void ScalingLayersRecord::add(const ScalingLayerEntry& e) {
  if (seen_.insert(key_of(e)).second) entries_.push_back(e);
}

nlohmann::ordered_json ScalingLayersRecord::to_json() const {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& e : entries_) a.push_back(scaling_entry_json(e));
  return a;
}

bool group_selected(const std::vector<ScalingLayerEntry>& chosen, const ScalingLayerEntry& e) {
  if (chosen.empty()) return true;
  for (const auto& u : chosen)
    if (same_group(u, e)) return true;
  return false;
}

void UnscaledGroups::note(const ScalingLayerEntry& e, const std::string& why) {
  std::string key = e.prev_op + " -> " + e.layers.front();
  if (e.layers.size() > 1) key += ", ...";
  auto& v = groups_[key];
  if (v.first.empty()) v.first = why;
  ++v.second;
}

void UnscaledGroups::report(const std::string& stage, std::vector<std::string>& warnings) const {
  for (const auto& [key, g] : groups_)
    warnings.push_back(stage + " left " + key + " unscaled in " + std::to_string(g.second) + " layer(s): " + g.first);
}

}  // namespace qloom::quant
