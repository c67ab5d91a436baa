#include "qloom/quant/rotation_config.h"

#include "qloom/core/error.h"

namespace qloom::quant {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr const char* kRotationPrefix = "algo_config.rotation.";

[[noreturn]] void bad_rotation_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", kRotationPrefix + key, msg,
              "fix the rotation config (Quark 0.13's RotationConfig keys: r1, r2, r3, r4, rotation_size, random_r1, "
              "random_r2, scaling_layers, backbone, model_decoder_layers, v_proj, o_proj, self_attn, mlp, "
              "online_r1_rotation, online_config, trainable, train_smooth, smooth_positions)");
}

[[noreturn]] void rotation_unsupported(const std::string& key, const std::string& why, const std::string& remedy) {
  throw Error(ErrorKind::kUnsupported, "", kRotationPrefix + key, why, remedy);
}

bool rotation_boolean(const json& v, const std::string& key) {
  if (!v.is_boolean()) bad_rotation_key(key, "must be true or false");
  return v.get<bool>();
}

std::string text(const json& v, const std::string& key) {
  if (!v.is_string() || v.get<std::string>().empty()) bad_rotation_key(key, "must be a non-empty string");
  return v.get<std::string>();
}

std::vector<std::string> names(const json& v, const std::string& key) {
  if (!v.is_array()) bad_rotation_key(key, "must be a list of module names");
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(text(e, key));
  return out;
}

RotationGroup parse_group(const json& g, const std::string& key) {
  if (!g.is_object()) bad_rotation_key(key, "each entry must be an object with prev_modules, norm_module, next_modules");
  RotationGroup r;
  for (const auto& [k, v] : g.items()) {
    const std::string item = key + "." + k;
    if (k == "prev_modules") r.prev_modules = names(v, item);
    else if (k == "norm_module") r.norm_module = text(v, item);
    else if (k == "next_modules") r.next_modules = names(v, item);
    else if (k == "target_modules") r.target_modules = names(v, item);
    else bad_rotation_key(item, "unknown scaling_layers key '" + k + "'");
  }
  return r;
}

RotationScalingLayers parse_scaling_layers(const json& v) {
  if (!v.is_object()) bad_rotation_key("scaling_layers", "must be an object with first_layer, middle_layers, last_layer");
  RotationScalingLayers s;
  bool first = false, middle = false, last = false;
  for (const auto& [k, list] : v.items()) {
    std::vector<RotationGroup>* dst = nullptr;
    if (k == "first_layer") dst = &s.first_layer, first = true;
    else if (k == "middle_layers") dst = &s.middle_layers, middle = true;
    else if (k == "last_layer") dst = &s.last_layer, last = true;
    else bad_rotation_key("scaling_layers." + k, "unknown scaling_layers key '" + k + "'");
    if (!list.is_array()) bad_rotation_key("scaling_layers." + k, "must be a list of groups");
    for (size_t i = 0; i < list.size(); ++i)
      dst->push_back(parse_group(list[i], "scaling_layers." + k + "[" + std::to_string(i) + "]"));
  }
  if (!first || !middle || !last)
    bad_rotation_key("scaling_layers", "needs first_layer, middle_layers and last_layer (Quark reads all three)");
  return s;
}

RotationGroup group(std::vector<std::string> prev, std::string norm, std::vector<std::string> next) {
  RotationGroup g;
  g.prev_modules = std::move(prev);
  g.norm_module = std::move(norm);
  g.next_modules = std::move(next);
  return g;
}

ojson group_json(const RotationGroup& g) {
  ojson o;
  if (!g.prev_modules.empty() || g.norm_module) o["prev_modules"] = g.prev_modules;
  if (g.norm_module) o["norm_module"] = *g.norm_module;
  o["next_modules"] = g.next_modules;
  if (g.target_modules) o["target_modules"] = *g.target_modules;
  return o;
}

// Quark's checks of RotationConfig.__post_init__, then what qloom refuses.
void check(const RotationConfig& c, const json& j) {
  if ((c.random_r1 || c.random_r2) && c.rotation_size)
    rotation_unsupported("rotation_size", "random_r1 / random_r2 with a custom rotation_size is not supported (Quark refuses it too)",
                "drop rotation_size or the random rotations");
  if (!c.r1 && c.online_r1_rotation)
    bad_rotation_key("online_r1_rotation", "online_r1_rotation has no effect with r1 false (Quark refuses it)");
  if (c.rotation_size && *c.rotation_size < 1) bad_rotation_key("rotation_size", "must be a positive integer or null");
  if (c.random_r1 || c.random_r2)
    rotation_unsupported(c.random_r1 ? "random_r1" : "random_r2",
                "random Hadamard rotations are drawn from torch's random number generator, which qloom does not "
                "reproduce",
                "set random_r1 and random_r2 to false (Quark's default)");
  if (c.trainable)
    rotation_unsupported("trainable", "trainable rotations (SpinQuant / OSTQuant training) are not implemented in qloom",
                "set trainable to false (Quark's default): fixed Hadamard rotations");
  if (c.online_r1_rotation.value_or(false))
    rotation_unsupported("online_r1_rotation",
                "online R1 (a Hadamard applied to each linear's input at run time, exported as input_rotation "
                "buffers) is not implemented in qloom",
                "set online_r1_rotation to false (Quark's default): R1 fused offline into the weights");
  if (c.r3)
    rotation_unsupported("r3", "R3 (a Hadamard on q and k after RoPE, patched into the attention forward) is not implemented",
                "set r3 to false (Quark's default for every model type)");
  if (c.r4)
    rotation_unsupported("r4", "R4 (an online Hadamard on down_proj's input) is not implemented in qloom",
                "set r4 to false (Quark's default for every model type)");
  for (const char* k : {"online_config", "smooth_positions"})
    if (j.contains(k) && !j.at(k).is_null())
      rotation_unsupported(k, std::string(k) + " applies to online or trainable rotations only", "set it to null");
  if (j.contains("train_smooth") && !j.at("train_smooth").is_null() && rotation_boolean(j.at("train_smooth"), "train_smooth"))
    bad_rotation_key("train_smooth", "train_smooth needs trainable (Quark refuses it otherwise)");
}

}  // namespace

std::optional<RotationConfig> RotationConfig::defaults(std::string_view model_type) {
  if (model_type != "llama") return std::nullopt;
  RotationConfig c;
  const std::string L = "model.layers.layer_id.";
  const std::vector<std::string> qkv = {L + "self_attn.q_proj", L + "self_attn.k_proj", L + "self_attn.v_proj"};
  const std::vector<std::string> up_gate = {L + "mlp.up_proj", L + "mlp.gate_proj"};
  const RotationGroup post_attn = group({L + "self_attn.o_proj"}, L + "post_attention_layernorm", up_gate);
  c.scaling_layers.first_layer = {group({"model.embed_tokens"}, L + "input_layernorm", qkv), post_attn};
  c.scaling_layers.middle_layers = {group({"model.layers.pre_layer_id.mlp.down_proj"}, L + "input_layernorm", qkv),
                                    post_attn};
  c.scaling_layers.last_layer = {group({L + "mlp.down_proj"}, "model.norm", {"lm_head"})};
  c.online_r1_rotation = false;
  return c;
}

RotationConfig RotationConfig::from_json(const json& j, std::string_view model_type) {
  if (!j.is_null() && !j.is_object()) bad_rotation_key("", "the rotation config must be a JSON object");
  std::optional<RotationConfig> base = defaults(model_type);
  const bool has_layers = j.is_object() && j.contains("scaling_layers") && !j.at("scaling_layers").is_null();
  if (!base && !has_layers)
    rotation_unsupported("scaling_layers",
                "Quark 0.13 has rotation defaults for model type 'llama' only, not '" + std::string(model_type) + "'",
                "give a full rotation config with scaling_layers: --quant_algo_config_file rotation FILE.json");
  RotationConfig c = base.value_or(RotationConfig{});
  if (j.is_null()) return c;
  bool online_given = false;
  for (const auto& [key, v] : j.items()) {
    if (key == "name") {
      if (text(v, key) != "rotation") bad_rotation_key(key, "must be \"rotation\"");
    } else if (key == "r1") c.r1 = rotation_boolean(v, key);
    else if (key == "r2") c.r2 = rotation_boolean(v, key);
    else if (key == "r3") c.r3 = rotation_boolean(v, key);
    else if (key == "r4") c.r4 = rotation_boolean(v, key);
    else if (key == "random_r1") c.random_r1 = rotation_boolean(v, key);
    else if (key == "random_r2") c.random_r2 = rotation_boolean(v, key);
    else if (key == "trainable") c.trainable = rotation_boolean(v, key);
    else if (key == "rotation_size") {
      if (v.is_null()) c.rotation_size.reset();
      else if (!v.is_number_integer()) bad_rotation_key(key, "must be an integer or null");
      else c.rotation_size = v.get<int64_t>();
    } else if (key == "scaling_layers") {
      if (!v.is_null()) c.scaling_layers = parse_scaling_layers(v);
    } else if (key == "backbone") c.backbone = text(v, key);
    else if (key == "model_decoder_layers") c.model_decoder_layers = text(v, key);
    else if (key == "v_proj") c.v_proj = text(v, key);
    else if (key == "o_proj") c.o_proj = text(v, key);
    else if (key == "self_attn") c.self_attn = text(v, key);
    else if (key == "mlp") c.mlp = text(v, key);
    else if (key == "online_r1_rotation") {
      online_given = true;
      if (v.is_null()) c.online_r1_rotation.reset();
      else c.online_r1_rotation = rotation_boolean(v, key);
    } else if (key == "online_config" || key == "train_smooth" || key == "smooth_positions") {
      // checked below: only their inert values are accepted
    } else {
      bad_rotation_key(key, "unknown rotation config key '" + key + "'");
    }
  }
  if (!online_given) c.online_r1_rotation.reset();
  // RotationConfig.__post_init__: online_r1_rotation defaults to false when r1.
  if (c.r1 && !c.online_r1_rotation) c.online_r1_rotation = false;
  check(c, j);
  return c;
}

nlohmann::ordered_json RotationConfig::to_json() const {
  ojson j;
  ojson layers;
  for (const auto& [key, list] : {std::pair<const char*, const std::vector<RotationGroup>*>{"first_layer", &scaling_layers.first_layer},
                                  {"middle_layers", &scaling_layers.middle_layers},
                                  {"last_layer", &scaling_layers.last_layer}}) {
    ojson arr = ojson::array();
    for (const auto& g : *list) arr.push_back(group_json(g));
    layers[key] = arr;
  }
  j["scaling_layers"] = layers;
  j["name"] = "rotation";
  j["r1"] = r1;
  j["r2"] = r2;
  j["r3"] = r3;
  j["r4"] = r4;
  j["rotation_size"] = rotation_size ? ojson(*rotation_size) : ojson(nullptr);
  j["random_r1"] = random_r1;
  j["random_r2"] = random_r2;
  j["backbone"] = backbone;
  j["model_decoder_layers"] = model_decoder_layers;
  j["v_proj"] = v_proj;
  j["o_proj"] = o_proj;
  j["self_attn"] = self_attn;
  j["mlp"] = mlp;
  j["online_r1_rotation"] = online_r1_rotation ? ojson(*online_r1_rotation) : ojson(nullptr);
  j["online_config"] = nullptr;
  j["trainable"] = trainable;
  j["train_smooth"] = nullptr;
  j["smooth_positions"] = nullptr;
  return j;
}

}  // namespace qloom::quant
