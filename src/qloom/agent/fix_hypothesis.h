// fix_hypothesis_attempt_<N>.md (seed 000 §8): written at the end of a failed
// attempt whose outcome is in the retry class, read by the runner before
// attempt N. Layout as the seed has it —
//
//   # Fix hypothesis for attempt N
//
//   ## Root cause
//   <one sentence>
//
//   ## Concrete fix
//   - <action>
//
//   ## Risk
//   <what could still go wrong>
//
// — followed by qloom's machine-readable block, which the next attempt
// applies to its plan:
//
//   ## Fix block
//   ```json
//   {"plan_overrides": {"num_calib_data": 64}}
//   ```
//
// plan_overrides keys (anything else is refused when read): num_calib_data,
// seq_len (positive integers), quant_algo (string, "" = RTN), exclude_layers
// (patterns appended), threads (non-negative integer), eval_time_budget_s
// (positive number), overwrite_output (bool: replace this workspace's
// earlier output directory).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::agent {

struct FixHypothesis {
  int attempt = 2;  // the attempt that applies it
  std::string root_cause;
  std::vector<std::string> actions;
  std::string risk;
  nlohmann::ordered_json plan_overrides = nlohmann::ordered_json::object();
};

std::string fix_hypothesis_file_name(int attempt);  // "fix_hypothesis_attempt_<N>.md"
std::string render_fix_hypothesis(const FixHypothesis& f);
// Throws Error(kInvalidInput) naming `file` for a missing section or fix
// block, malformed JSON, or an unknown / mistyped override.
FixHypothesis parse_fix_hypothesis(const std::string& text, const std::string& file);

}  // namespace qloom::agent
