// The agent's outcome ids (seed 000 §6–§8, mission.md §8): names and numbers
// exactly as the seed has them, each with the class that says what happens
// next, and the classifier that reads a workspace the way the seed's Python
// runner does.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/io/hub_error.h"

namespace qloom::agent {

enum class OutcomeClass {
  kAutoRecover,  // fixed in the same attempt (seed §6), never a stop
  kAutoFail,     // blocked.md and stop, no retry (seed §7)
  kRetry,        // blocked.md + fix_hypothesis_attempt_<N+1>.md, the runner retries (seed §8)
  kDecision,     // a decision point: blocked.md, never retried (#2, #21)
};

struct OutcomeInfo {
  int number;             // 1..30; 0 for upstream_change_required (no number in the seed)
  std::string_view id;    // e.g. "exec_oom"
  OutcomeClass cls;
  std::string_view what;  // one line: the trigger
};

// All 31 outcomes, #1..#30 in order, then upstream_change_required.
const std::vector<OutcomeInfo>& outcome_catalog();
// By id ("exec_oom") or by "#3" / "3"; nullptr when unknown.
const OutcomeInfo* find_outcome(std::string_view id_or_number);
const char* outcome_class_name(OutcomeClass c);  // auto_recover | auto_fail | retry | decision

// The outcome a Hugging Face Hub failure becomes in `phase` ("intake" reads
// config.json only; "exec" downloads the weights). Unreachable, unknown,
// private or gated repos and network/offline failures are
// model_path_unreachable (#9) at intake; at exec a failure to obtain intact
// weights (missing file, checksum mismatch, bad reply, disk full, cache not
// writable) is exec_model_load_failed (#4). An interrupted transfer is
// unclassified_failure (#30, retried): the partial blob is kept and the next
// attempt resumes it.
const OutcomeInfo& outcome_for_hub_failure(io::HubFailure failure, std::string_view phase);

// What the classifier concluded from a workspace.
struct Classification {
  const OutcomeInfo* outcome = nullptr;  // nullptr: a clean success (every self-check holds)
  std::string reason;                    // the evidence (file and what it says / lacks)
  std::string last_phase;                // last_phase.txt, "" when absent
};

// Reads <workspace>: blocked.md ("outcome_id: <id>" on its first line wins),
// eval_skipped.txt (substrings: "oom" -> #29 eval_oom; "vllm" / "sglang" /
// "quantized_load" -> #28 quantized_load_failed; anything else -> #22
// eval_env_unavailable), then the seed §10 self-check in phase order:
// model_analysis.json (#10), quant_plan.json (#11), run_manifest.yaml and its
// outputs.quantized_model_dir (#12), the quantized dir's config.json (#14),
// tokenizer files (#15), weights (#16), validation_report.md (#25; a FAIL in
// step 4 -> #26, step 2 -> #18, step 3 -> #17, step 1 -> #19; a MUST step
// reported skipped -> #27), eval_report.json (#21 when relative_gap exceeds
// the resolved threshold). Artifacts a phase not yet reached would write are
// not required (last_phase.txt tells how far the run got). Never throws for
// missing or malformed files: those are outcomes.
Classification classify_workspace(const std::filesystem::path& workspace,
                                  std::optional<double> caller_threshold = std::nullopt);

}  // namespace qloom::agent
