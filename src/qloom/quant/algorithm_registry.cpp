#include "qloom/quant/algorithm_registry.h"

#include <algorithm>

#include "qloom/core/error.h"
#include "qloom/quant/autosmoothquant_stage.h"
#include "qloom/quant/awq_stage.h"
#include "qloom/quant/gptaq_stage.h"
#include "qloom/quant/gptq_stage.h"
#include "qloom/quant/qronos_stage.h"
#include "qloom/quant/rotation_stage.h"
#include "qloom/quant/smoothquant_stage.h"

namespace qloom::quant {
namespace {

// Quark's algorithm names (quark/torch/quantization/config/algo_configs.py,
// ALGORITHM_CONFIG_MAPS, amd-quark 0.13).
const std::vector<std::string>& quark_algorithms() {
  static const std::vector<std::string> names = {"awq",      "gptq",      "gptaq",       "qronos",      "smoothquant",
                                                 "autosmoothquant", "rotation", "autoround", "twobitscalar"};
  return names;
}

std::string implemented_list() {
  std::string out;
  for (const auto& n : implemented_algorithms()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::vector<std::string> implemented_algorithms() {
  return {"awq", "gptq", "gptaq", "qronos", "smoothquant", "autosmoothquant", "rotation"};
}

std::unique_ptr<AlgorithmStage> make_algorithm_stage(const std::string& name, const nlohmann::json& config,
                                                     const std::string& model_type) {
  if (name == "gptq") {
    GptqConfig c = GptqConfig::from_json(config);
    c.template_modules = quark_gptq_modules(model_type);
    return make_gptq_stage(c);
  }
  if (name == "awq") return make_awq_stage(AwqStageConfig::from_json(config));
  if (name == "smoothquant") return make_smoothquant_stage(SmoothQuantStageConfig::from_json(config, model_type));
  if (name == "autosmoothquant")
    return make_autosmoothquant_stage(AutoSmoothQuantStageConfig::from_json(config, model_type));
  if (name == "rotation") return make_rotation_stage(RotationConfig::from_json(config, model_type));
  if (name == "gptaq") {
    GptaqConfig c = GptaqConfig::from_json(config);
    c.common.template_modules = quark_gptaq_modules(model_type);
    return make_gptaq_stage(c);
  }
  if (name == "qronos") {
    QronosConfig c = QronosConfig::from_json(config);
    c.common.template_modules = quark_gptaq_modules(model_type);
    return make_qronos_stage(c);
  }
  const auto& known = quark_algorithms();
  if (std::find(known.begin(), known.end(), name) != known.end())
    throw Error(ErrorKind::kUnsupported, "", "--quant_algo",
                "'" + name + "' is not implemented in qloom yet (implemented: " + implemented_list() + ")",
                "use --quant_algo " + implemented_list() +
                    " (comma-separated, run in the order given), or omit --quant_algo for round-to-nearest");
  std::string list;
  for (const auto& k : known) {
    if (!list.empty()) list += ", ";
    list += k;
  }
  throw Error(ErrorKind::kUsage, "", "--quant_algo", "unknown algorithm '" + name + "'", "Quark's algorithms: " + list);
}

std::vector<std::string> split_quant_algo(const std::string& quant_algo) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= quant_algo.size()) {
    const size_t comma = quant_algo.find(',', start);
    const size_t end = comma == std::string::npos ? quant_algo.size() : comma;
    std::string item = quant_algo.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty())
      throw Error(ErrorKind::kUsage, "", "--quant_algo", "empty algorithm name in '" + quant_algo + "'",
                  "pass names separated by commas, e.g. gptq");
    if (std::find(out.begin(), out.end(), item) != out.end())
      throw Error(ErrorKind::kUsage, "", "--quant_algo", "algorithm '" + item + "' is given twice", "");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace qloom::quant
