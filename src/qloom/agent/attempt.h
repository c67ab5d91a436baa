// One attempt of the phase chain (seed 000 §3), driven by workflow.cpp.
// Internal to the agent: phases write last_phase.txt first, then their
// artifact; an outcome that stops the attempt is written to blocked.md (and,
// for the retry class with a concrete fix, fix_hypothesis_attempt_<N+1>.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/agent/fix_hypothesis.h"
#include "qloom/agent/workflow.h"
#include "qloom/agent/workspace.h"

namespace qloom::agent {

struct PhaseTime {
  std::string phase;
  double seconds = 0;
};

struct AttemptReport {
  int attempt = 1;
  std::string outcome_id;  // "" when the attempt ran to the end
  std::string reason;
  bool fix_written = false;               // fix_hypothesis_attempt_<N+1>.md
  std::vector<PhaseTime> phases;
  std::vector<std::string> recovered;     // auto-recover outcomes applied: "id: what was done"
  std::vector<std::string> notes;
  nlohmann::ordered_json eval;            // eval facts (null when eval did not run)
  nlohmann::ordered_json validation;      // step statuses
  nlohmann::ordered_json model;           // sizes, paths
  std::string quantized_dir;
  std::string source_dir;
  bool eval_unresolved = false;           // gate verdict "unresolved"
  bool eval_skipped = false;
};

AttemptReport run_attempt(const std::string& prompt, const RunOptions& opts, const Workspace& ws, int attempt,
                          const std::optional<FixHypothesis>& fix);

}  // namespace qloom::agent
