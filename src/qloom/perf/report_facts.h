// The FINAL stage's facts, built from the session's state.json alone
// (issue 13 item 8): reports/final.json (the short verdict: result, accuracy
// gate, winner, search summary, throughput, warnings, versions, how to
// reproduce, stage timings) and session_breakdown.json (everything factual:
// run spec, not-applicable options, baseline, every candidate with its proxy
// metrics, Pareto membership and real gate, the sensitivity table, every
// accuracy attempt, throughput measurement and tuning trial, the phase
// timeline). Schemas: schemas/perf_final.schema.json and
// schemas/perf_session_breakdown.schema.json. The Markdown and HTML reports
// are rendered from these two documents only (report_markdown.h, report_html.h).
//
// Determinism: the same state and context give byte-identical JSON; the only
// timestamp is `generated_at` (from the context). Sections a session never
// reached are null ("not run"), never invented.
//
// Inputs: the state.json document (nlohmann::ordered_json, as the
// orchestrator stores it). Errors: a missing required field, a value of the
// wrong type, an unknown enum value or a terminal_result that does not follow
// from terminal_stage -> qloom::Error(kInvalidInput) with file = ctx.source
// and item = the field's path (e.g. "run_spec.model"). Thread-safety: pure
// functions.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::perf {

inline constexpr int kReportSchemaVersion = 1;

struct ReportContext {
  // ISO-8601 UTC ("2026-12-02T05:30:00Z"): the only timestamp in the facts.
  std::string generated_at;
  // The session directory: completes the resume command when the original
  // argv had no --session-dir, and names the `qloom perf report` command.
  // May be empty (then the argv's --session-dir, if any, is used).
  std::filesystem::path session_dir;
  // Warnings from outside state.json (progress.json's), after the state's own.
  std::vector<std::string> extra_warnings;
  // Names the file in errors.
  std::string source = "state.json";
};

// reports/final.json.
nlohmann::ordered_json build_final_facts(const nlohmann::ordered_json& state, const ReportContext& ctx);

// session_breakdown.json; its "final" member is build_final_facts() without
// generated_at (so session_report.md needs nothing else).
nlohmann::ordered_json build_session_breakdown(const nlohmann::ordered_json& state, const ReportContext& ctx);

// The facts of final.json that two runs of the same session must agree on:
// drops generated_at and the wall-clock figures (timings,
// search.search_time_seconds, and the measured throughput figures under
// performance). For comparing an interrupted-and-resumed session with an
// uninterrupted one.
nlohmann::ordered_json comparable_facts(nlohmann::ordered_json final_facts);

// Throw Error(kInvalidInput) naming `file` and the violations when the
// document does not match schemas/perf_final.schema.json /
// schemas/perf_session_breakdown.schema.json (the breakdown's "final" is
// checked against perf_final too); return the document. The renderers call
// these first, so they read only fields the schema guarantees.
const nlohmann::ordered_json& check_final_facts(const nlohmann::ordered_json& facts, const std::string& file);
const nlohmann::ordered_json& check_breakdown_facts(const nlohmann::ordered_json& facts, const std::string& file);

}  // namespace qloom::perf
