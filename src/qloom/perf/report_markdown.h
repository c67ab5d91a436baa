// The Markdown reports of a `qloom perf` session, rendered from the JSON facts
// only (report_facts.h), never from state.json or other data:
//   reports/final.md   — short: result, accuracy gap vs threshold with n and
//                        stderr, the winner, the gain, where the checkpoint
//                        is, how to reproduce / resume / rebuild the reports;
//   session_report.md  — detailed: run spec, baseline, search summary and
//                        tables of every candidate, the sensitivity table,
//                        every accuracy attempt, throughput measurement and
//                        tuning trial, and the phase timeline,
// in the style of lm-eval's result tables (GitHub-flavoured Markdown).
// Sections a session never reached read "not run" / "not applicable".
// Every string from the facts is escaped (code spans or backslash escapes),
// so a hostile model name cannot inject Markdown or HTML.
//
// Inputs: final.json facts / session_breakdown.json facts. Errors: a facts
// document missing a field the report reads -> qloom::Error(kInvalidInput)
// naming "final.json" / "session_breakdown.json" and the field.
// Deterministic: same facts -> same bytes. Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace qloom::perf {

std::string render_final_md(const nlohmann::ordered_json& final_facts);
std::string render_session_report_md(const nlohmann::ordered_json& breakdown);

// Shared by both reports (and by tests): one line each.
// "**success** — terminal stage `done`, path `mix_precision_search`"
std::string md_result_line(const nlohmann::ordered_json& final_facts);
// "1.12% ± 0.21% (n = 20480) against a threshold of 2.00%: passed", or
// "not run".
std::string md_gap_line(const nlohmann::ordered_json& accuracy);
// "2.10x (target 2.00x: met) on runtime `simulate`", "not applicable
// (--performance-mode off)" or "not run (...)".
std::string md_gain_line(const nlohmann::ordered_json& performance);

}  // namespace qloom::perf
