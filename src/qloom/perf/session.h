// `qloom perf`: the managed quant-perf session (seed 004; mission.md §10), as
// one library call. The pipeline, one FINAL stage on every path:
//
//   open session (lock, state.json: new, or resume with the stored run_spec)
//   -> validate inputs (models load, options fit them)
//   -> baseline health (the base model on the gate metric, cached per runtime
//      fingerprint; below --baseline-floor: base_unhealthy)
//   -> quantize: a fixed recipe (--quant-strategy, through the agent's
//      intent parser, plan, manifest and quantize job) or the mixed-precision
//      search (measured sensitivity, throughput-ordered walk with a KLD proxy)
//   -> land: the real accuracy gate on the exported checkpoint (a rejected
//      search candidate moves the queue on)
//   -> perfopt: throughput of baseline and quantized (measure), then tuning
//      (optimize) when the gain is below --target-gain
//   -> FINAL: reports (reports/final.json, final.md, report.html,
//      session_breakdown.json, session_report.md).
//
// Stages in state.json: quantize | land | perfopt while working; the terminal
// stage done | perf_failed | failed | base_unhealthy; final once the reports
// are written. Terminal stage -> result: done -> success, perf_failed ->
// perf_below_target, failed -> accuracy_failed or performance_failed,
// base_unhealthy -> base_unhealthy.
//
// Resume = the same command with the same --session-dir: every step checks
// state.json first and skips what is recorded as finished; the search never
// re-scores or re-gates a finished candidate. A kill -9 at any moment loses
// at most the step in flight (state.json and the checkpoint are swapped in
// atomically).
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/perf/perf_options.h"

namespace qloom::perf {

struct PerfRunOptions {
  PerfCommand command;            // finished (finish_perf_command)
  std::vector<std::string> argv;  // the invocation as typed, recorded in state.json
  std::ostream* log = nullptr;    // progress lines (stderr in the CLI)
  bool log_is_tty = false;
};

struct PerfOutcome {
  std::filesystem::path session_dir;
  nlohmann::ordered_json final_json;  // reports/final.json
  std::string terminal_result;        // success | perf_below_target | ...
  int exit_code = 0;                  // 0 only for success
};

// Runs or resumes a session. Throws qloom::Error for bad options, a held
// lock, or an unreadable session; every failure of the work itself ends in a
// terminal stage with reports instead.
PerfOutcome run_perf_session(const PerfRunOptions& options);

// `qloom perf status --session DIR`: progress.json (and the state's stage).
nlohmann::ordered_json perf_status(const std::filesystem::path& session_dir);

// `qloom perf report --session DIR`: rebuilds the FINAL reports from
// state.json without re-running work. Refuses (kUsage) a session that is not
// terminal, and one another process is orchestrating.
PerfOutcome rebuild_perf_reports(const std::filesystem::path& session_dir, std::ostream* log);

// Process exit code of a terminal result: 0 success, 6 any other result.
int perf_exit_code(const std::string& terminal_result);

}  // namespace qloom::perf
