#include "qloom/validate/report.h"

#include <string>
#include <string_view>
#include <system_error>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"

namespace qloom::validate {

namespace fs = std::filesystem;

const char* status_name(StepResult::Status s) {
  switch (s) {
    case StepResult::kOk: return "ok";
    case StepResult::kFail: return "FAIL";
    case StepResult::kSkipped: return "skipped";
  }
  return "?";
}

const char* target_name(DeployTarget t) { return t == DeployTarget::kVllm ? "vllm" : "none"; }

DeployTarget parse_deploy_target(std::string_view name) {
  if (name == "none") return DeployTarget::kNone;
  if (name == "vllm") return DeployTarget::kVllm;
  throw Error(ErrorKind::kUsage, "", "--target", "unknown deployment target \"" + std::string(name) + "\"",
              "pass --target none (the checkpoint alone) or --target vllm (also vLLM's loader rules)");
}

std::string deployability_line(const Deployability& d) {
  std::string s = "deployable on " + d.engine + " " + d.version + ": ";
  switch (d.answer) {
    case Deployability::kYes: return s + "yes";
    case Deployability::kNo: return s + "no — " + d.reason;
    case Deployability::kUnknown: break;
  }
  return s + "unknown — " + d.reason;
}

bool ValidationReport::decides(const StepResult& s) const {
  return !(vllm && s.number == vllm->step && target == DeployTarget::kNone);
}

bool ValidationReport::passed() const {
  for (const auto& s : steps)
    if (s.status == StepResult::kFail && decides(s)) return false;
  return true;
}

const StepResult* ValidationReport::step(int number) const {
  for (const auto& s : steps)
    if (s.number == number) return &s;
  return nullptr;
}

namespace {

struct StepTally {
  int ok = 0, fail = 0, skipped = 0;
  std::vector<int> failed;          // failed steps that decide the verdict
  std::vector<int> failed_outside;  // failed steps that do not (ValidationReport::decides)
};

StepTally tally(const ValidationReport& r) {
  StepTally t;
  for (const auto& s : r.steps) {
    if (s.status == StepResult::kOk) ++t.ok;
    else if (s.status == StepResult::kFail) ++t.fail, (r.decides(s) ? t.failed : t.failed_outside).push_back(s.number);
    else ++t.skipped;
  }
  return t;
}

std::string verdict_word(const ValidationReport& r) { return r.passed() ? "PASS" : "FAIL"; }

std::string verdict_line(const ValidationReport& r) {
  const StepTally t = tally(r);
  std::string counts = "ok: " + std::to_string(t.ok) + ", FAIL: " + std::to_string(t.fail) +
                       ", skipped: " + std::to_string(t.skipped);
  std::string out = "**Verdict**: " + verdict_word(r) + " — ";
  if (t.failed.empty()) {
    out += counts;
  } else {
    out += "failed: ";
    for (size_t i = 0; i < t.failed.size(); ++i) {
      if (i) out += ", ";
      out += r.step_label + " " + std::to_string(t.failed[i]);
    }
    out += " (" + counts + ")";
  }
  for (int n : t.failed_outside)
    out += "; " + r.step_label + " " + std::to_string(n) + " reports deployability only (deployment target: " +
           target_name(r.target) + ")";
  return out;
}

nlohmann::ordered_json deployable_json(const ValidationReport& r) {
  using oj = nlohmann::ordered_json;
  oj j = oj::object();
  if (!r.vllm) return j;
  const Deployability& d = *r.vllm;
  j["vllm"] = {{"version", d.version},
               {"step", d.step},
               {"ok", d.answer == Deployability::kUnknown ? oj(nullptr) : oj(d.answer == Deployability::kYes)},
               {"reason", d.reason}};
  return j;
}

std::string code_span(const std::string& s) {
  // A path with a backtick in it needs a longer fence.
  return s.find('`') == std::string::npos ? "`" + s + "`" : "`` " + s + " ``";
}

}  // namespace

std::string render_markdown(const ValidationReport& r) {
  std::string md = "## " + r.heading + "\n\n";
  md += "- source: " + (r.source.empty() ? std::string("(none given)") : code_span(r.source)) + "\n";
  md += "- quantized: " + code_span(r.quantized) + "\n";
  if (!r.steps.empty()) {
    md += "- order: ";
    for (size_t i = 0; i < r.steps.size(); ++i) {
      if (i) md += " → ";
      md += std::to_string(r.steps[i].number);
    }
    md += "\n";
  }
  for (const auto& s : r.steps) {
    md += "\n**";
    md += r.step_label;
    md += ' ';
    md += std::to_string(s.number);
    md += " — ";
    md += s.title;
    md += "**: ";
    md += status_name(s.status);
    if (!s.summary.empty()) {
      md += " — ";
      md += s.summary;
    }
    md += '\n';
    bool in_table = false;
    for (const auto& d : s.details) {
      if (d.empty()) {  // a blank detail only ends a table; never an empty bullet
        if (in_table) md += "\n";
        in_table = false;
        continue;
      }
      const bool row = d[0] == '|';
      if (row && !in_table) md += "\n";
      if (!row && in_table) md += "\n";
      in_table = row;
      if (!row) md += "  - ";
      md += d;
      md += '\n';
    }
  }
  md += '\n';
  md += verdict_line(r);
  md += '\n';
  if (r.vllm) md += "  - " + deployability_line(*r.vllm) + "\n";
  return md;
}

nlohmann::ordered_json report_to_json(const ValidationReport& r) {
  using oj = nlohmann::ordered_json;
  const StepTally t = tally(r);
  oj j = oj::object();
  j["report"] = "validation_report";
  j["heading"] = r.heading;
  j["source"] = r.source;
  j["quantized"] = r.quantized;
  j["passed"] = r.passed();
  j["verdict"] = verdict_word(r);
  j["target"] = target_name(r.target);
  j["deployable"] = deployable_json(r);
  oj order = oj::array();
  for (const auto& s : r.steps) order.push_back(s.number);
  j["order"] = order;
  j["counts"] = {{"ok", t.ok}, {"FAIL", t.fail}, {"skipped", t.skipped}};
  oj steps = oj::array();
  for (const auto& s : r.steps) {
    oj e = oj::object();
    e["step"] = s.number;
    e["title"] = s.title;
    e["status"] = status_name(s.status);
    e["ok"] = s.status == StepResult::kOk;
    e["summary"] = s.summary;
    e["details"] = s.details;
    e["data"] = s.data.is_null() ? oj::object() : s.data;
    steps.push_back(std::move(e));
  }
  j["steps"] = std::move(steps);
  return j;
}

void write_validation_report(const ValidationReport& r, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw_errno(ec.value(), dir.string(), "creating the report directory", /*writing=*/true);
  io::write_file_atomic(dir / kReportMarkdownName, render_markdown(r));
  // Invalid UTF-8 in a tensor or file name must not make the writer throw.
  const std::string json =
      report_to_json(r).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
      "\n";
  io::write_file_atomic(dir / kReportJsonName, json);
}

}  // namespace qloom::validate
