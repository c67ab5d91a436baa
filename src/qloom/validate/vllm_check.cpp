// Step 6, "loads in vLLM": runs the rules of vllm_rules.h on the quantized
// checkpoint and renders one line per rule (PASS) or one per finding (FAIL);
// vllm_deployability states its result as the report's deployability line.
#include <exception>
#include <string>

#include "qloom/validate/checks.h"
#include "qloom/validate/step_util.h"
#include "qloom/validate/vllm_rules.h"

namespace qloom::validate {

namespace {

using oj = nlohmann::ordered_json;

oj rule_json(const vllm::RuleResult& rr) {
  oj findings = oj::array();
  for (const auto& f : rr.findings) findings.push_back({{"where", f.where}, {"what", f.what}, {"fix", f.fix}});
  return {{"id", rr.id}, {"title", rr.title}, {"ok", rr.ok()}, {"checked", rr.checked}, {"findings", findings}};
}

void render(StepResult& r, const std::vector<vllm::RuleResult>& rules, size_t max_listed) {
  size_t n_findings = 0, listed = 0;
  std::vector<std::string> failed;
  oj data_rules = oj::array();
  for (const auto& rr : rules) {
    data_rules.push_back(rule_json(rr));
    if (rr.ok()) {
      r.details.push_back(rr.title + ": ok — " + rr.checked);
      continue;
    }
    failed.push_back(rr.title);
    for (const auto& f : rr.findings) {
      ++n_findings;
      if (listed++ < max_listed) r.details.push_back(rr.title + ": FAIL — " + f.where + ": " + f.what + " → " + f.fix);
    }
  }
  if (listed > max_listed) r.details.push_back("… and " + std::to_string(listed - max_listed) + " more findings");
  const std::string v = std::string("vLLM ") + vllm::kVllmVersion;
  if (failed.empty()) {
    r.status = StepResult::kOk;
    r.summary = v + "'s Quark loader accepts this checkpoint (" + std::to_string(rules.size()) + " rules checked)";
  } else {
    r.status = StepResult::kFail;
    r.summary = v + " would refuse or misload this checkpoint: " + detail::plural(n_findings, "finding", "findings") +
                " (" + detail::join(failed, "; ") + ")";
  }
  r.data["vllm_version"] = vllm::kVllmVersion;
  r.data["vllm_commit"] = vllm::kVllmCommit;
  r.data["findings_count"] = n_findings;
  r.data["rules"] = std::move(data_rules);
}

// "0.33.0" -> "0.33": deployability is stated per release series.
std::string release_series(const std::string& version) {
  const size_t first = version.find('.');
  const size_t second = first == std::string::npos ? first : version.find('.', first + 1);
  return second == std::string::npos ? version : version.substr(0, second);
}

// What vLLM refuses first: the first finding of the first failed rule, and
// how many more there are; the summary when the rules did not run.
std::string first_refusal(const StepResult& step) {
  const oj* rules = step.data.contains("rules") ? &step.data["rules"] : nullptr;
  if (rules == nullptr || !rules->is_array()) return step.summary;
  for (const auto& rule : *rules) {
    const oj& findings = rule.value("findings", oj::array());
    if (findings.empty()) continue;
    std::string reason = findings[0].value("where", "") + ": " + findings[0].value("what", "");
    const size_t total = step.data.value("findings_count", size_t(1));
    if (total > 1) reason += " (and " + detail::plural(total - 1, "more finding", "more findings") + ")";
    return reason;
  }
  return step.summary;
}

}  // namespace

Deployability vllm_deployability(const StepResult& step) {
  Deployability d;
  d.step = step.number;
  d.engine = "vLLM";
  d.version = release_series(vllm::kVllmVersion);
  switch (step.status) {
    case StepResult::kOk:
      d.answer = Deployability::kYes;
      break;
    case StepResult::kFail:
      d.answer = Deployability::kNo;
      d.reason = first_refusal(step);
      break;
    case StepResult::kSkipped:
      d.answer = Deployability::kUnknown;
      d.reason = "step " + std::to_string(step.number) + " skipped: " + step.summary;
      break;
  }
  return d;
}

StepResult check_vllm_loadable(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 6;
  r.title = kVllmTitle;
  r.status = StepResult::kSkipped;
  if (!pair.quantized())
    return detail::skipped(std::move(r),
                           "the quantized directory is not a readable model (see step 3): " + pair.quantized_error(),
                           "quantized_unreadable");
  const auto& cfg = pair.quantized()->config();
  const auto qc = cfg.find("quantization_config");
  if (qc == cfg.end() || !qc->is_object() || !qc->contains("quant_method") || (*qc)["quant_method"] != "quark")
    return detail::skipped(std::move(r), "config.json has no Quark quantization_config (see step 3)", "no_quark_config");
  if (!pair.quantized_weights())
    return detail::skipped(std::move(r), "the quantized weights cannot be opened: " + pair.quantized_weights_error(),
                           "quantized_weights_unreadable");
  try {
    const vllm::CheckpointView view = vllm::make_view(*qc, *pair.quantized_weights(), pair.source_weights());
    render(r, vllm::run_rules(view), opts.max_listed);
  } catch (const std::exception& e) {
    r.status = StepResult::kFail;
    r.summary = "the vLLM rules stopped with an error: " + describe_error(e);
    r.data["reason"] = "checker_error";
    r.data["error"] = describe_error(e);
  }
  return r;
}

}  // namespace qloom::validate
