// Internal to the perf session: the gate spec of a run and one real accuracy
// gate on an exported checkpoint (perf/gate_stage.cpp), shared by the direct
// path and the search's gate loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "qloom/perf/perf_options.h"
#include "qloom/perf/task_score.h"

namespace qloom::perf {

struct SessionCtx;

// The gate metric of a run: --eval-task, --gsm8k-num-samples (gsm8k) or
// --eval-limit, the base model's tokenizer for both sides.
GateSpec gate_spec(const RunSpec& spec);

// Scores `checkpoint` as attempt N = accuracy_attempts.size() + 1, pairs it
// with the baseline, appends the result (with attempt, candidate_rank,
// checkpoint) to accuracy_attempts, lets `on_result` record what follows from
// it, then saves once (a kill before that save redoes attempt N whole).
nlohmann::ordered_json gate_checkpoint(SessionCtx& ctx, const std::filesystem::path& checkpoint, int64_t rank,
                                       const std::function<void(const nlohmann::ordered_json&)>& on_result);

}  // namespace qloom::perf
