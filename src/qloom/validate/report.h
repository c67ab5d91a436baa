// The validation report: one StepResult per check, rendered as
// validation_report.md (what people and the agent's classifier read) and
// validation_report.json (the same facts for programs).
//
// The Markdown keeps the layout of Quark's result validator so tools that read
// its reports read qloom's too:
//
//   **Step 4 — fuzzy tensor names**: ok — <summary>
//     - <detail>
//
// one block per step in run order, then a verdict line and, for a report with
// a vLLM step, the deployability under it:
//
//   **Verdict**: PASS — ok: 5, FAIL: 1, skipped: 0; Step 6 reports deployability only (deployment target: none)
//     - deployable on vLLM 0.33: no — <reason>
//
// Nothing in either file depends on the time, the machine or thread
// scheduling: the same inputs give byte-identical reports.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::validate {

struct StepResult {
  enum Status { kOk, kFail, kSkipped };

  int number = 0;      // Quark's step number (4, 1, 3, 2), 5 for qloom's numeric step
  std::string title;   // "fuzzy tensor names", ...
  Status status = kSkipped;
  std::string summary;  // one line: what was found, or why the step was skipped
  // Human-readable lines under the step. Lines starting with '|' are rows of a
  // Markdown table and are rendered as such; every other line is a bullet.
  std::vector<std::string> details;
  // Machine-readable facts of the step (counts, lists, per-pattern tables).
  nlohmann::ordered_json data = nlohmann::ordered_json::object();
};

// "ok", "FAIL", "skipped" — the words the report uses.
const char* status_name(StepResult::Status s);

// The deployment target a verdict covers (ValidateOptions::target, `qloom
// validate --target`):
//   kNone  the checkpoint itself: steps 1–5 decide PASS / FAIL; the vLLM step
//          (6) still runs and is reported as deployability, without failing
//          the verdict.
//   kVllm  the checkpoint and its deployment on vLLM: a failed vLLM step
//          fails the verdict too.
enum class DeployTarget { kNone, kVllm };
// "none" | "vllm".
const char* target_name(DeployTarget t);
// "none" | "vllm" -> the target; anything else throws qloom::Error (kUsage)
// naming --target.
DeployTarget parse_deploy_target(std::string_view name);

// Whether a serving engine loads the checkpoint, from the step that checks
// its loader's rules.
struct Deployability {
  enum Answer { kYes, kNo, kUnknown };

  int step = 0;         // the step it comes from (6 for vLLM)
  std::string engine;   // "vLLM"
  std::string version;  // "0.33"
  Answer answer = kUnknown;
  // kNo: what the loader refuses first ("<layer or field>: <what>", then
  // "(and N more findings)"); kUnknown: why the step did not decide; kYes: "".
  std::string reason;
};

// "deployable on vLLM 0.33: yes", "deployable on vLLM 0.33: no — <reason>",
// "deployable on vLLM 0.33: unknown — <reason>".
std::string deployability_line(const Deployability& d);

struct ValidationReport {
  std::string source;     // as given (an empty string when no source model was given)
  std::string quantized;  // as given
  std::vector<StepResult> steps;  // in run order
  // The first line of the Markdown and the word before each step number; the
  // self-test uses its own ("Case").
  std::string heading = "Validation Report — qloom validate";
  std::string step_label = "Step";

  // What the verdict covers; validate_checkpoint copies ValidateOptions::target.
  DeployTarget target = DeployTarget::kNone;
  // Deployability on vLLM from step 6 (validate_checkpoint fills it); none in
  // a report without a vLLM step (the self-test's), where every step decides.
  std::optional<Deployability> vllm;

  // True when no deciding step failed (skipped steps do not fail a report).
  bool passed() const;
  // Whether step s decides the verdict: every step but the vLLM one when the
  // target is kNone.
  bool decides(const StepResult& s) const;
  // nullptr when there is no step with that number.
  const StepResult* step(int number) const;
};

// validation_report.md.
std::string render_markdown(const ValidationReport& report);
// validation_report.json: {"report", "heading", "source", "quantized",
// "passed", "verdict", "target", "deployable", "order", "counts", "steps":
// [{"step", "title", "status", "ok", "summary", "details", "data"}]}.
// "passed" / "verdict" follow passed(); "counts" counts every step's status;
// "target" is "none" | "vllm"; "deployable" is {"vllm": {"version": "0.33",
// "step": 6, "ok": true | false | null (unknown), "reason": "..."}}, or {}
// for a report without a vLLM step.
nlohmann::ordered_json report_to_json(const ValidationReport& report);
// Writes validation_report.md and validation_report.json into `dir` (created
// when missing), each atomically. Throws qloom::Error (kIo) naming the file.
void write_validation_report(const ValidationReport& report, const std::filesystem::path& dir);

inline constexpr const char* kReportMarkdownName = "validation_report.md";
inline constexpr const char* kReportJsonName = "validation_report.json";

}  // namespace qloom::validate
