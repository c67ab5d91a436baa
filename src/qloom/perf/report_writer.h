// The FINAL stage's report files of a `qloom perf` session (issue 13 item 8),
// all built from state.json (report_facts.h) and written under the session
// directory:
//   reports/final.json, reports/final.md, session_breakdown.json,
//   session_report.md, reports/report.html.
// Everything is rendered and schema-checked in memory first, so a malformed
// state writes nothing; then each file is written atomically
// (io::write_file_atomic: temp + fsync + rename), reports/final.json last,
// so its presence means the set is complete. Rewriting over an earlier set
// (`qloom perf report --session DIR`) replaces each file in place.
//
// Inputs: the state document and the session directory (which must exist).
// warnings in <session>/progress.json, when that file exists, join the
// state's. Errors: malformed state / progress.json -> Error(kInvalidInput)
// naming the file and field; write failures -> Error(kIo) naming the file.
// Thread-safety: one writer per session directory (the orchestrator's lock).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace qloom::perf {

struct ReportPaths {
  std::filesystem::path final_json;
  std::filesystem::path final_md;
  std::filesystem::path session_breakdown_json;
  std::filesystem::path session_report_md;
  std::filesystem::path report_html;
};

// {"final_json": ..., "final_md": ..., "session_breakdown_json": ...,
//  "session_report_md": ..., "report_html": ...} for state.reporting.paths.
nlohmann::ordered_json to_json(const ReportPaths& paths);

struct WriteReportsOptions {
  // The facts' generated_at; empty = now (UTC, to the second).
  std::string generated_at;
};

ReportPaths write_reports(const nlohmann::ordered_json& state, const std::filesystem::path& session_dir);
ReportPaths write_reports(const nlohmann::ordered_json& state, const std::filesystem::path& session_dir,
                          const WriteReportsOptions& options);

}  // namespace qloom::perf
