#include "qloom/agent/outcomes.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "qloom/core/strings.h"
#include "qloom/agent/eval_gap.h"

namespace qloom::agent {
namespace fs = std::filesystem;
namespace {

using C = OutcomeClass;

const std::vector<OutcomeInfo> kCatalog = {
    {1, "quark_root_missing", C::kAutoFail, "the backend's root is missing (Quark backend only; qloom is its own backend)"},
    {2, "checkpoint_aborted", C::kDecision, "the user declined at a checkpoint"},
    {3, "exec_oom", C::kRetry, "quantization ran out of memory"},
    {4, "exec_model_load_failed", C::kAutoFail, "the source weights cannot be loaded (corrupt safetensors, unsupported dtype)"},
    {5, "exec_calibration_data_missing", C::kAutoFail, "the calibration data set is unreachable or gave 0 samples"},
    {6, "export_crashed", C::kRetry, "the export failed"},
    {7, "quark_skill_unavailable", C::kAutoFail, "a required Quark skill is missing (Quark backend only)"},
    {8, "intent_parse_failed", C::kAutoRecover, "the prompt lacks a required field; a best-effort default is taken"},
    {9, "model_path_unreachable", C::kAutoFail, "intake cannot read the source model"},
    {10, "analysis_artifact_invalid_or_missing", C::kAutoRecover, "model_analysis.json is missing or invalid"},
    {11, "plan_artifact_invalid_or_missing", C::kAutoRecover, "quant_plan.json is missing or invalid"},
    {12, "manifest_artifact_invalid_or_missing", C::kAutoRecover, "run_manifest.yaml is missing or invalid"},
    {13, "validator_self_test_failed", C::kAutoFail, "the validator's self-test failed"},
    {14, "must_have_config_missing_or_invalid", C::kAutoRecover, "the quantized dir's config.json is missing or invalid"},
    {15, "must_have_tokenizer_missing", C::kAutoRecover, "the quantized dir has no tokenizer file"},
    {16, "must_have_weights_missing", C::kRetry, "the quantized dir has no weights"},
    {17, "must_validate_config_mismatch", C::kAutoRecover, "validator step 3: config.json differs from the source"},
    {18, "must_validate_md5_mismatch", C::kAutoFail, "validator step 2: an unquantized tensor differs from the source"},
    {19, "should_have_aux_missing", C::kAutoRecover, "validator step 1: an auxiliary file is missing"},
    {20, "nice_to_have_skipped", C::kAutoRecover, "a nice-to-have check was skipped (noted, not retried)"},
    {21, "eval_gap_exceeded", C::kDecision, "the relative eval gap exceeds the threshold"},
    {22, "eval_env_unavailable", C::kAutoRecover, "evaluation could not run; eval_skipped.txt says why"},
    {23, "workspace_unwritable", C::kAutoFail, "the workspace cannot be written"},
    {24, "sdk_runtime_error", C::kAutoFail, "the runtime failed before the workflow started"},
    {25, "validation_report_absent", C::kAutoRecover, "validation_report.md is missing"},
    {26, "fuzzy_check_failed", C::kRetry, "validator step 4: tensor names do not match the expected patterns"},
    {27, "must_validate_skipped", C::kAutoRecover, "a MUST validation step was skipped"},
    {28, "quantized_load_failed", C::kAutoFail, "the quantized model cannot be loaded by the serving engine"},
    {29, "eval_oom", C::kRetry, "evaluation ran out of memory"},
    {30, "unclassified_failure", C::kRetry, "a failure no other id matches"},
    {0, "upstream_change_required", C::kAutoFail, "a fix would need a change outside the workspace (upstream)"},
};

bool read_text(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}


// Phases in order (seed 000 §3); a phase's index tells which artifacts must exist.
constexpr std::string_view kPhases[] = {"pre", "intake", "plan", "manifest", "exec", "export", "validate", "eval"};
int phase_index(std::string_view p) {
  for (int i = 0; i < 8; ++i)
    if (kPhases[i] == p) return i;
  return -1;
}

Classification make(const char* id, std::string reason, const std::string& phase) {
  Classification c;
  c.outcome = find_outcome(id);
  c.reason = std::move(reason);
  c.last_phase = phase;
  return c;
}

bool json_object_file(const fs::path& p) {
  std::string text;
  if (!read_text(p, text)) return false;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_object() && !j.empty();
}

// outputs.quantized_model_dir from run_manifest.yaml, read as the one line
// "quantized_model_dir: <path>" (optionally quoted) under "outputs:".
std::optional<std::string> manifest_output_dir(const std::string& yaml) {
  std::istringstream in(yaml);
  std::string line;
  bool in_outputs = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') in_outputs = trim(line) == "outputs:";
    const auto k = line.find("quantized_model_dir:");
    if (in_outputs && k != std::string::npos) {
      std::string v = trim(line.substr(k + 20));
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
      if (!v.empty()) return v;
    }
  }
  return std::nullopt;
}

// The status validation_report.md gives step n: "ok", "FAIL", "skipped" or "".
std::string step_status(const std::string& report, int n) {
  const std::string key = "**Step " + std::to_string(n) + " ";
  const size_t at = report.find(key);
  if (at == std::string::npos) return {};
  const size_t colon = report.find("**:", at);
  if (colon == std::string::npos) return {};
  const std::string rest = trim(report.substr(colon + 3, 16));
  for (const char* s : {"ok", "FAIL", "skipped"})
    if (rest.rfind(s, 0) == 0) return s;
  return {};
}

}  // namespace

const std::vector<OutcomeInfo>& outcome_catalog() { return kCatalog; }

const OutcomeInfo* find_outcome(std::string_view key) {
  std::string k(key);
  if (!k.empty() && k[0] == '#') k.erase(0, 1);
  for (const auto& o : kCatalog) {
    if (o.id == k) return &o;
    if (o.number > 0 && std::to_string(o.number) == k) return &o;
  }
  return nullptr;
}

const char* outcome_class_name(OutcomeClass c) {
  switch (c) {
    case C::kAutoRecover: return "auto_recover";
    case C::kAutoFail: return "auto_fail";
    case C::kRetry: return "retry";
    case C::kDecision: return "decision";
  }
  return "?";
}

const OutcomeInfo& outcome_for_hub_failure(io::HubFailure failure, std::string_view phase) {
  using F = io::HubFailure;
  if (failure == F::kInterrupted) return *find_outcome("unclassified_failure");
  // Every other failure means the source model could not be obtained intact:
  // at intake the model path is unreachable; later the load failed.
  const bool exec = phase == "exec" || phase == "export" || phase == "validate" || phase == "eval";
  return *find_outcome(exec ? "exec_model_load_failed" : "model_path_unreachable");
}

Classification classify_workspace(const fs::path& ws, std::optional<double> caller_threshold) {
  std::string phase, text;
  if (read_text(ws / "last_phase.txt", text)) phase = trim(text);
  const int reached = phase_index(phase);

  if (read_text(ws / "blocked.md", text)) {
    std::istringstream in(text);
    std::string first, reason;
    std::getline(in, first);
    std::getline(in, reason);
    const std::string prefix = "outcome_id:";
    first = trim(first);
    if (first.rfind(prefix, 0) == 0) {
      const std::string id = trim(first.substr(prefix.size()));
      if (find_outcome(id)) return make(find_outcome(id)->id.data(), trim(reason), phase);
      return make("unclassified_failure", "blocked.md names an unknown outcome id '" + id + "'", phase);
    }
    return make("unclassified_failure", "blocked.md has no 'outcome_id: <id>' first line", phase);
  }
  if (read_text(ws / "eval_skipped.txt", text)) {
    const std::string t = lower_ascii(text);
    const std::string why = "eval_skipped.txt: " + trim(text);
    if (t.find("oom") != std::string::npos) return make("eval_oom", why, phase);
    if (t.find("vllm") != std::string::npos || t.find("sglang") != std::string::npos ||
        t.find("quantized_load") != std::string::npos)
      return make("quantized_load_failed", why, phase);
    return make("eval_env_unavailable", why, phase);
  }
  if (reached < 0) return make("unclassified_failure", "last_phase.txt is missing or names no phase ('" + phase + "')", phase);

  // Seed §10 self-check, for the artifacts of the phases the run passed.
  if (reached > phase_index("intake") && !json_object_file(ws / "model_analysis.json"))
    return make("analysis_artifact_invalid_or_missing", "model_analysis.json is missing or not a JSON object", phase);
  if (reached > phase_index("plan") && !json_object_file(ws / "quant_plan.json"))
    return make("plan_artifact_invalid_or_missing", "quant_plan.json is missing or not a JSON object", phase);
  if (reached <= phase_index("manifest")) return {nullptr, "stopped after the " + phase + " phase", phase};
  std::optional<std::string> out;
  if (read_text(ws / "run_manifest.yaml", text)) out = manifest_output_dir(text);
  if (!out) return make("manifest_artifact_invalid_or_missing", "run_manifest.yaml lacks outputs.quantized_model_dir", phase);
  if (reached <= phase_index("exec")) return {nullptr, "stopped in the exec phase", phase};
  fs::path qdir = *out;
  if (qdir.is_relative()) qdir = ws / qdir;
  std::error_code ec;
  if (!fs::is_directory(qdir, ec)) return make("must_have_weights_missing", "the quantized dir " + qdir.string() + " does not exist", phase);
  if (!json_object_file(qdir / "config.json"))
    return make("must_have_config_missing_or_invalid", (qdir / "config.json").string() + " is missing or invalid", phase);
  bool tokenizer = false, weights = false;
  for (const auto& e : fs::directory_iterator(qdir, ec)) {
    const std::string n = e.path().filename().string();
    if (n == "tokenizer.json" || n == "tokenizer_config.json" || n == "tokenizer.model" || n == "vocab.json") tokenizer = true;
    if (e.path().extension() == ".safetensors" || e.path().extension() == ".bin") weights = true;
  }
  if (!weights) return make("must_have_weights_missing", "no *.safetensors / *.bin in " + qdir.string(), phase);
  if (!tokenizer) return make("must_have_tokenizer_missing", "no tokenizer file in " + qdir.string(), phase);
  if (reached < phase_index("validate")) return {nullptr, "stopped in the export phase", phase};

  if (!read_text(ws / "validation_report.md", text))
    return make("validation_report_absent", "validation_report.md is missing", phase);
  const std::pair<int, const char*> must[] = {{4, "fuzzy_check_failed"}, {2, "must_validate_md5_mismatch"},
                                              {3, "must_validate_config_mismatch"}, {1, "should_have_aux_missing"}};
  for (const auto& [n, id] : must) {
    const std::string s = step_status(text, n);
    if (s.empty()) return make("validation_report_absent", "validation_report.md lacks step " + std::to_string(n), phase);
    if (s == "FAIL") return make(id, "validation_report.md: step " + std::to_string(n) + " FAIL", phase);
  }
  for (int n : {4, 2, 3})
    if (step_status(text, n) == "skipped")
      return make("must_validate_skipped", "validation_report.md: step " + std::to_string(n) + " skipped", phase);
  if (reached < phase_index("eval")) return {nullptr, "stopped in the validate phase", phase};

  if (!read_text(ws / "eval_report.json", text))
    return make("unclassified_failure", "eval ran but eval_report.json is missing and eval_skipped.txt gives no reason", phase);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("relative_gap") || !j["relative_gap"].is_number() || !j.contains("source_score") ||
      !j.contains("quantized_score"))
    return make("unclassified_failure", "eval_report.json lacks source_score / quantized_score / relative_gap", phase);
  double threshold = 0.03;
  try {
    threshold = resolve_threshold(caller_threshold, ws).value;
  } catch (const std::exception& e) {
    return make("unclassified_failure", e.what(), phase);
  }
  const double gap = j["relative_gap"].get<double>();
  if (gap > threshold)
    return make("eval_gap_exceeded", "relative_gap " + std::to_string(gap) + " > threshold " + std::to_string(threshold),
                phase);
  return {nullptr, "every self-check holds; relative_gap " + std::to_string(gap) + " <= " + std::to_string(threshold), phase};
}

}  // namespace qloom::agent
