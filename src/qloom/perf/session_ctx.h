// Internal to the perf session (perf/session*.cpp, *_stage.cpp): what every
// step of the orchestrator shares — the store (state.json, progress.json),
// the stored run_spec and the log — and the few state transitions every step
// uses (stage, timeline, terminal). Not thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/perf/perf_options.h"
#include "qloom/perf/session.h"
#include "qloom/perf/session_store.h"

namespace qloom::perf {

struct SessionCtx {
  SessionStore& store;
  RunSpec spec;  // the stored run_spec (the first stored one wins)
  const PerfRunOptions& options;
  std::ostream* log = nullptr;

  nlohmann::ordered_json& st() { return store.state(); }
  const std::filesystem::path& dir() const { return store.dir(); }

  // A line on the log ("qloom perf: <text>").
  void say(const std::string& text) const;
  // Sets state.stage (saved) and progress.json's stage / stage_detail.
  void set_stage(const std::string& stage, const std::string& detail);
  // Updates progress.json's stage_detail only.
  void detail(const std::string& text);
  // Runs `work`, then appends {stage, step, started_at, ended_at, seconds} to
  // phase_timeline and saves the state.
  void timed(const std::string& step, const std::function<void()>& work);
  // Records the terminal stage and result (and why), saves.
  void terminate(const std::string& terminal_stage, const std::string& result, const std::string& why);
  // Whether a terminal stage is recorded.
  bool terminal() { return st().contains("terminal_stage") && !st()["terminal_stage"].is_null(); }
};

// The steps (perf/session_*.cpp, perf/*_stage.cpp). Each reads what state.json
// records and skips finished work.
// Throws kNotFound naming --model / --base-model for one that is not a directory.
void require_model_dirs(const RunSpec& spec);
void init_or_resume_state(SessionCtx& ctx, const RunSpec& given);
void apply_reopen_actions(SessionCtx& ctx, bool retry_accuracy_gate, bool recheck_baseline);
void validate_inputs(SessionCtx& ctx);
void baseline_health_step(SessionCtx& ctx, bool recheck);
void direct_recipe_step(SessionCtx& ctx);
void mixed_precision_search_step(SessionCtx& ctx);
void direct_gate_step(SessionCtx& ctx);
void performance_step(SessionCtx& ctx);
void final_reports_step(SessionCtx& ctx);

}  // namespace qloom::perf
