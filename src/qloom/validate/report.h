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
// one block per step in run order, then a verdict line. Nothing in either file
// depends on the time, the machine or thread scheduling: the same inputs give
// byte-identical reports.
#pragma once

#include <filesystem>
#include <string>
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

struct ValidationReport {
  std::string source;     // as given (an empty string when no source model was given)
  std::string quantized;  // as given
  std::vector<StepResult> steps;  // in run order
  // The first line of the Markdown and the word before each step number; the
  // self-test uses its own ("Case").
  std::string heading = "Validation Report — qloom validate";
  std::string step_label = "Step";

  // True when no step failed (skipped steps do not fail a report).
  bool passed() const;
  // nullptr when there is no step with that number.
  const StepResult* step(int number) const;
};

// validation_report.md.
std::string render_markdown(const ValidationReport& report);
// validation_report.json: {"report", "heading", "source", "quantized",
// "passed", "verdict", "order", "counts", "steps": [{"step", "title",
// "status", "ok", "summary", "details", "data"}]}.
nlohmann::ordered_json report_to_json(const ValidationReport& report);
// Writes validation_report.md and validation_report.json into `dir` (created
// when missing), each atomically. Throws qloom::Error (kIo) naming the file.
void write_validation_report(const ValidationReport& report, const std::filesystem::path& dir);

inline constexpr const char* kReportMarkdownName = "validation_report.md";
inline constexpr const char* kReportJsonName = "validation_report.json";

}  // namespace qloom::validate
