// ModelRotation's plan: which tensor gets which steps (rotation.h). The
// arithmetic is in rotation_apply.cpp.
#include "qloom/quant/rotation.h"

#include <algorithm>

#include "qloom/core/error.h"
#include "qloom/quant/hadamard.h"

namespace qloom::quant {
namespace {

int64_t config_int(const nlohmann::json& c, const char* key, const std::string& file) {
  if (!c.contains(key) || !c.at(key).is_number_integer())
    throw Error(ErrorKind::kInvalidInput, file, key, "config.json lacks the integer " + std::string(key),
                "rotation needs the model's sizes");
  return c.at(key).get<int64_t>();
}

std::string substitute(std::string name, int64_t layer) {
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at = name.find(from); at != std::string::npos; at = name.find(from, at + to.size()))
      name.replace(at, from.size(), to);
  };
  replace_all("pre_layer_id", std::to_string(layer - 1));  // before layer_id (Quark's order)
  replace_all("layer_id", std::to_string(layer));
  return name;
}

bool is_embedding(const std::string& module) {
  return module == "embed_tokens" || (module.size() > 13 && module.compare(module.size() - 13, 13, ".embed_tokens") == 0);
}

}  // namespace

ModelRotation::ModelRotation(const io::ModelDir& src, RotationConfig config) : src_(src), config_(std::move(config)) {
  const nlohmann::json& c = src.config();
  const std::string file = (src.path() / "config.json").string();
  const std::string type = src.model_type();
  if (type.rfind("gemma", 0) == 0 || type == "qwen3_5" || type == "qwen3_5_moe")
    throw Error(ErrorKind::kUnsupported, file, "model_type",
                "rotation of '" + type + "' (centered 1 + w norms) is not implemented in qloom",
                "rotation runs on llama-family models (Quark's defaults are for llama)");
  for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"})
    if (c.contains(k) && !c.at(k).is_null())
      throw Error(ErrorKind::kUnsupported, file, k, "rotation of mixture-of-experts models is not implemented in qloom",
                  "rotate a dense model, or quantize without rotation");
  layers_ = config_int(c, "num_hidden_layers", file);
  hidden_ = config_int(c, "hidden_size", file);
  head_dim_ = c.contains("head_dim") && c.at("head_dim").is_number_integer()
                  ? c.at("head_dim").get<int64_t>()
                  : hidden_ / config_int(c, "num_attention_heads", file);
  const bool tied = c.value("tie_word_embeddings", false);
  names_ = src.weights().tensor_names();
  untie_ = tied && src.weights().find("lm_head.weight") == nullptr;
  if (config_.r1) plan_r1();
  if (config_.r2) plan_r2();
  if (untie_ && ops_.count("lm_head.weight")) names_.push_back("lm_head.weight");
}

bool ModelRotation::module_exists(const std::string& module) const {
  if (module == "lm_head" && untie_) return true;
  return src_.weights().find(module + ".weight") != nullptr;
}

void ModelRotation::add(const std::string& module, RotationOp op, bool with_bias) {
  ops_[module + ".weight"].push_back(op);
  if (with_bias && src_.weights().find(module + ".bias") != nullptr) ops_[module + ".bias"].push_back(op);
}

std::string ModelRotation::source_of(const std::string& tensor) const {
  if (untie_ && tensor == "lm_head.weight") return "model.embed_tokens.weight";
  return tensor;
}

void ModelRotation::plan_r1() {
  const int64_t size = config_.rotation_size.value_or(hidden_);
  (void)hadamard_size(size);  // refuses sizes without Quark's matrix now
  if (hidden_ % size != 0)
    throw Error(ErrorKind::kInvalidInput, "", "algo_config.rotation.rotation_size",
                "rotation_size " + std::to_string(size) + " does not divide hidden_size " + std::to_string(hidden_),
                "choose a rotation_size dividing the hidden size");
  std::set<std::string> requested, resolved;
  auto resolve = [&](const std::vector<std::string>& templates, int64_t layer) {
    std::vector<std::string> out;
    for (const auto& t : templates) {
      requested.insert(t);
      const std::string m = substitute(t, layer);
      if (!module_exists(m)) continue;
      resolved.insert(t);
      out.push_back(m);
    }
    return out;
  };
  auto apply_group = [&](const RotationGroup& g, int64_t layer) {
    if (!g.norm_module)
      throw Error(ErrorKind::kInvalidInput, "", "algo_config.rotation.scaling_layers",
                  "a group has no norm_module (offline R1 needs prev_modules, norm_module and next_modules)", "");
    const std::vector<std::string> prev = resolve(g.prev_modules, layer), next = resolve(g.next_modules, layer);
    if (next.empty() || prev.empty()) return;  // the group belongs to layers without these modules
    const std::string norm = substitute(*g.norm_module, layer) + ".weight";
    if (src_.weights().find(norm) == nullptr)
      throw Error(ErrorKind::kNotFound, "", norm, "the group's norm_module has no weight in the checkpoint",
                  "check scaling_layers against the model's tensor names");
    if (src_.weights().find(substitute(*g.norm_module, layer) + ".bias") != nullptr)
      throw Error(ErrorKind::kUnsupported, "", norm, "norms with a bias (LayerNorm) are not rotated by qloom", "");
    // 1. fold the norm into the next linears, the norm becomes ones
    for (const auto& m : next) add(m, {RotationOp::kScaleColumns, norm, 0}, false);
    ops_[norm].push_back({RotationOp::kOnes, "", 0});
    // 2. the producers' outputs (each once), 3. the readers' inputs
    std::vector<std::string> done;
    for (const auto& m : prev) {
      if (std::find(done.begin(), done.end(), m) != done.end()) continue;
      if (is_embedding(m)) add(m, {RotationOp::kRotateIn, "", size}, false);
      else add(m, {RotationOp::kRotateOut, "", size}, true);
      done.push_back(m);
    }
    for (const auto& m : next)
      if (std::find(done.begin(), done.end(), m) == done.end()) {
        add(m, {RotationOp::kRotateIn, "", size}, false);
        done.push_back(m);
      }
  };
  const RotationScalingLayers& s = config_.scaling_layers;
  for (int64_t i = 0; i < layers_; ++i) {
    for (const auto& g : i == 0 ? s.first_layer : s.middle_layers) apply_group(g, i);
    if (i == layers_ - 1 && i > 0)
      for (const auto& g : s.last_layer) apply_group(g, i);
  }
  std::vector<std::string> missing;
  for (const auto& t : requested)
    if (!resolved.count(t)) missing.push_back(t);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error(ErrorKind::kInvalidInput, "", "algo_config.rotation.scaling_layers",
                "module path(s) found in no layer: " + list, "check scaling_layers against the model's tensor names");
  }
  if (ops_.empty())
    throw Error(ErrorKind::kInvalidInput, "", "algo_config.rotation.scaling_layers",
                "no scaling_layers group matched a module of this model", "check model_decoder_layers and the names");
}

void ModelRotation::plan_r2() {
  (void)hadamard_size(head_dim_);
  for (int64_t i = 0; i < layers_; ++i) {
    const std::string p = config_.model_decoder_layers + "." + std::to_string(i) + ".";
    const std::string v = p + config_.v_proj, o = p + config_.o_proj;
    for (const auto& m : {v, o})
      if (!module_exists(m))
        throw Error(ErrorKind::kNotFound, "", m + ".weight", "R2 needs this projection",
                    "check v_proj / o_proj / model_decoder_layers in the rotation config");
    add(v, {RotationOp::kRotateOut, "", head_dim_}, true);
    add(o, {RotationOp::kRotateIn, "", head_dim_}, false);
  }
}

}  // namespace qloom::quant
