// The agent's front door: `qloom run "<prompt>"` and the library call
// qloom::quantize_via_prompt (seed 000: the quantization-agent contract,
// mission.md §1, §2, §8). One call runs attempts of the phase chain
//   pre -> intake -> plan -> manifest -> exec -> export -> validate -> eval
// in <workspace> (seed 000 §9 file names), with the runner's retry loop:
// an attempt that stops with a retry-class outcome and wrote
// fix_hypothesis_attempt_<N+1>.md is followed by attempt N+1, which applies
// the hypothesis' fix block, while requantize_attempts.txt (counted by the
// runner only) is below max_requantize_attempts. Decision points
// (checkpoint_aborted, eval_gap_exceeded) and auto-fail outcomes never retry.
// Finally assessment.json (schemas/assessment.schema.json) and a human
// summary.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>
#include <iosfwd>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/agent/checkpoint.h"

namespace qloom::agent {

struct RunOptions {
  std::filesystem::path workspace;  // required; created when missing
  // Where local model names resolve (each subdirectory is a model a prompt
  // may name by its directory name); empty: none.
  std::optional<std::filesystem::path> model_root;
  Interactive interactive = Interactive::kAuto;
  std::optional<double> acceptable_eval_gap;  // caller threshold (wins over the prompt's)
  int max_requantize_attempts = 1;            // re-quantizations after the first attempt
  // Seed 000's quark_root (the Quark checkout its backend reads): qloom is its
  // own backend and never reads or writes it; recorded in the assessment
  // ("quark_root") when given.
  std::optional<std::filesystem::path> quark_root;
  unsigned threads = 0;                       // 0: all cores
  double eval_time_budget_s = 300;            // per model and attempt
  // Tier-3 evaluation servers (EvalPhaseOptions): the source's and the
  // quantized model's OpenAI-compatible endpoints; empty: in-process.
  std::string eval_server, quantized_eval_server, eval_server_api_key;
  // Memory the run may use (bytes); the effective budget is the smallest of
  // this, the available memory and the cgroup limit (agent/environment.h).
  // The exec phase stops with exec_oom before quantizing when the plan's
  // peak-memory estimate exceeds it (the fix halves num_calib_data while
  // calibration dominates), and the eval phase with eval_oom when both
  // models' fp32 weights would not fit; real allocation failures map to the
  // same outcomes.
  std::optional<uint64_t> memory_limit_bytes;
  // Validation step 5 (dequantize every weight, load in the engine); off:
  // reported skipped, noted as nice_to_have_skipped (#20).
  bool numeric_validation = true;
  // I/O of checkpoints and progress (stderr / stdin in the CLI).
  std::istream* in = nullptr;
  std::ostream* log = nullptr;
  bool stdin_is_tty = false;
  bool log_is_tty = false;
  // Called at the start of every phase, after last_phase.txt is written:
  // (phase, attempt, workspace, quantized model dir or "" before the
  // manifest names it). For observers and for tests that inject faults
  // (a file removed, a memory limit) the way the real world would.
  std::function<void(std::string_view phase, int attempt, const std::filesystem::path& workspace,
                     const std::filesystem::path& quantized_dir)>
      on_phase;
};

struct RunResult {
  nlohmann::ordered_json assessment;  // what assessment.json holds
  std::string outcome_id;             // "" for a success
  std::string verdict;                // success | success_unverified | failed | aborted
  int exit_code = 0;                  // 0 only for verdict "success"
  std::string summary;                // the human summary printed at the end
};

// Exit codes: 0 success (every self-check holds and the eval gate passed);
// 4 a stop (blocked.md names the outcome); 5 finished but unverified (eval
// skipped, or the gap not resolved at the sample size). Throws qloom::Error
// only for bad options (kUsage). A runtime pre-flight failure (the embedded
// schemas, QLOOM_DATA_DIR / QLOOM_MAX_ISA unusable) is sdk_runtime_error (#24:
// blocked.md, exit 4). An unusable workspace is the outcome
// workspace_unwritable (#23): returned (exit code 4) with an empty
// assessment, since nothing can be written into it.
RunResult quantize_via_prompt(const std::string& prompt, const RunOptions& options);

// The bundled demo model's directory: $QLOOM_DEMO_MODEL, else
// stories260K-hf-bf16 under the model roots of io/data_files.h
// (<exe>/../share/qloom/models, the source tree's models/ when running from
// the build tree); "" when none exists.
std::filesystem::path bundled_demo_model();

}  // namespace qloom::agent

namespace qloom {
// The public entry point under the name the seed gives it.
using agent::quantize_via_prompt;
using agent::RunOptions;
using agent::RunResult;
}  // namespace qloom
