// Quark's "scaling_layers" list (AWQConfig / SmoothQuantConfig,
// quark/torch/quantization/config/config.py, amd-quark 0.12.post1): one entry
// per scaling group, names relative to the decoder layer,
//     {"prev_op": "input_layernorm",
//      "layers": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
//      "inp": "self_attn.q_proj",
//      "module2inspect": "self_attn"}        (optional; "" allowed)
// in that key order (Quark's per-model maps, algo_configs.py). Here: the strict
// parser (unknown keys and wrong types are kUsage naming the key), the
// matching of entries to qloom's groups (quant/layer_groups.h), and the record
// of the groups a stage folded, written back in Quark's form. Validators read
// "prev_op" (tensors a fold changed, exempt from byte identity) and "layers"
// (quantized linears whose columns carry the scale) from the written list.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/model/model_config.h"
#include "qloom/quant/layer_groups.h"

namespace qloom::quant {

struct ScalingLayerEntry {
  std::string prev_op;              // "input_layernorm", "self_attn.v_proj"
  std::vector<std::string> layers;  // "self_attn.q_proj", ...
  std::string inp;                  // the module whose input is the group's input
  std::optional<std::string> module2inspect;
};

// `v`: a JSON array of entry objects (null: empty). `item`: the config key
// for errors ("algo_config.awq.scaling_layers"); entry i's key k is named
// item + "[i]." + k. Throws Error(kUsage) for a non-array, a non-object
// entry, an unknown key, a missing prev_op / layers / inp, a value of the
// wrong type, an empty name, or an inp that is not one of its layers.
std::vector<ScalingLayerEntry> parse_scaling_layers(const nlohmann::json& v, const std::string& item);

// Group g of decoder layer `layer` as a Quark entry (inp: its first linear;
// module2inspect when it has several linears or inspects a larger module, as
// Quark's maps write it).
ScalingLayerEntry scaling_entry_of(const ScalingGroup& g, int layer);

// Same prev_op and the same set of layers (order and inp / module2inspect
// are not compared).
bool same_group(const ScalingLayerEntry& a, const ScalingLayerEntry& b);

// Every entry must describe a group qloom knows in some layer of the model
// (applicable or not); throws Error(kUnsupported) naming item[i] otherwise.
void check_scaling_layers(const std::vector<ScalingLayerEntry>& entries, const model::ModelConfig& config,
                          const std::string& item);

nlohmann::ordered_json scaling_entry_json(const ScalingLayerEntry& e);

// Quark's "model_decoder_layers": qloom's engine names decoder layers
// "model.layers"; "" (the dataclass default) means the same. Throws
// Error(kUsage) for a non-string, Error(kUnsupported) for another path.
std::string parse_model_decoder_layers(const nlohmann::json& v, const std::string& item);

// The groups a stage folded, over all layers: each distinct entry once, in
// first-seen order.
class ScalingLayersRecord {
 public:
  void add(const ScalingLayerEntry& e);
  nlohmann::ordered_json to_json() const;  // an array (possibly empty)
  size_t size() const { return entries_.size(); }

 private:
  std::vector<ScalingLayerEntry> entries_;
  std::set<std::string> seen_;
};

// Whether `e` is one of the groups a config chose (every group when `chosen`
// is empty: the stage's defaults).
bool group_selected(const std::vector<ScalingLayerEntry>& chosen, const ScalingLayerEntry& e);

// The groups a stage left unscaled, keyed "prev_op -> first layer[, ...]",
// with the first reason and the number of layers; reported as one warning
// per group by report().
class UnscaledGroups {
 public:
  void note(const ScalingLayerEntry& e, const std::string& why);
  // "<stage> left <key> unscaled in N layer(s): <reason>" for each group.
  void report(const std::string& stage, std::vector<std::string>& warnings) const;

 private:
  std::map<std::string, std::pair<std::string, int>> groups_;
};

}  // namespace qloom::quant
