// render_analysis_summary: seed 001's "Model Analysis:" block from
// model_analysis.json (see model_analysis.h).
#include <sstream>
#include <string>
#include <vector>

#include "qloom/agent/model_analysis.h"
#include "qloom/agent/model_analysis_internal.h"
#include "qloom/core/format.h"

namespace qloom::agent {
namespace detail {
namespace {

using json = nlohmann::json;

std::string summary_value(const json& v) {
  if (v.is_null()) return "?";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string summary_model_path(const json& m) {
  std::string path = summary_value(m.at("model_path"));
  if (m.at("resolved_path").is_string() && m.at("resolved_path").get<std::string>() != path &&
      m.at("source") == "local")
    path += " (" + m.at("resolved_path").get<std::string>() + ")";
  return path;
}

std::string summary_model_type(const json& m) {
  std::string type = m.at("model_type").get<std::string>().empty() ? "(none)" : m.at("model_type").get<std::string>();
  if (!m.at("architectures").empty()) {
    std::vector<std::string> arch = m.at("architectures").get<std::vector<std::string>>();
    type += " (" + join_with(arch, ", ") + ")";
  }
  return type;
}

std::string summary_linear_layers(const json& t) {
  if (t.at("linear_layer_count").is_null()) return "unknown (partial analysis)";
  const uint64_t n = t.at("linear_layer_count").get<uint64_t>(), q = t.at("quantization_target_count").get<uint64_t>();
  std::string prefix = t.at("layout_source") == "engine" ? "" : "~";
  return prefix + std::to_string(q) + " (quantization targets; " + std::to_string(n) + " linear layers, " +
         std::to_string(n - q) + " excluded by default)";
}

std::string summary_moe(const json& m) {
  if (!m.at("is_moe").get<bool>()) return "No";
  const json& x = m.at("moe");
  std::string moe = "Yes (" + summary_value(x.at("num_experts")) + " experts";
  if (!x.at("experts_per_token").is_null()) moe += ", " + summary_value(x.at("experts_per_token")) + " per token";
  moe += ", " + summary_value(x.at("moe_layers")) + " MoE layers)";
  return moe;
}

std::string summary_engine(const json& e) {
  if (!e.at("supported").get<bool>()) return "not supported: " + e.at("detail").get<std::string>();
  return e.at("calibration").get<bool>() ? "supported (calibration and evaluation available)"
                                         : "supported, but not for this checkpoint";
}

}  // namespace
}  // namespace detail

std::string render_analysis_summary(const nlohmann::json& a) {
  using json = nlohmann::json;
  using namespace detail;
  std::ostringstream o;
  auto row = [&](const char* label, const std::string& value) {
    std::string l = std::string(label) + ":";
    l.resize(18, ' ');
    o << "  " << l << value << "\n";
  };
  const json& m = a.at("model");
  const json& t = a.at("quantization_targets");
  o << "Model Analysis:\n";
  row("Model path", summary_model_path(m));
  row("Model type", summary_model_type(m));
  row("Hidden layers", summary_value(m.at("num_hidden_layers")));
  row("Linear layers", summary_linear_layers(t));
  row("MoE", summary_moe(m));
  row("Exclude defaults", "[" + join_with(t.at("exclude_defaults").get<std::vector<std::string>>(), ", ") + "]");
  const json& risks = a.at("risks");
  if (risks.empty()) row("Risks", "None");
  for (size_t i = 0; i < risks.size(); ++i) {
    const std::string line = risks[i].at("id").get<std::string>() + " (" + risks[i].at("severity").get<std::string>() +
                             "): " + risks[i].at("message").get<std::string>();
    if (i == 0) row("Risks", line);
    else o << std::string(20, ' ') << line << "\n";
  }
  const std::string c = a.at("compatibility").get<std::string>();
  row("Compatibility", c == "ok" ? "OK" : c == "warning" ? "Warning (see risks)" : "Unsupported (see risks)");
  if (!m.at("estimated_parameters").is_null()) {
    std::string dt = m.at("torch_dtype").is_string() ? m.at("torch_dtype").get<std::string>() : "unknown dtype";
    row("Parameters", "~" + format_count(m.at("estimated_parameters").get<uint64_t>()) + " (weights ~" +
                          format_bytes(m.at("estimated_weights_bytes").get<uint64_t>()) + " " + dt +
                          ", from config.json)");
  }
  row("qloom engine", summary_engine(a.at("engine")));
  return o.str();
}

}  // namespace qloom::agent
