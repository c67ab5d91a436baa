// The fast proxy score of one whole candidate: every unit fake-quantized at
// its precision (and the fp8 KV cache through the output hook when the
// config asks for it), run on the Reference's windows (simulation.h; the
// base logits are cached there, computed once — the same windows as the
// sensitivity table or a separate Reference with more windows), compared
// with the unquantized model: mean KLD and its standard error, top-1
// agreement, PPL ratio (eval/kld.h summarize). apply_proxy() writes the
// score into a queue entry: search_metrics.proxy_* and proxy_seconds, and
// relative_change = search_walk.h's estimate of the gate gap for the task.
//
// Errors: kUsage for a config naming a partition the plan lacks, missing one
// it has, an unknown precision or a layer override for an unknown unit;
// simulation errors as thrown. Deterministic (simulation.h); thread-safety:
// independent calls may run concurrently.
#pragma once

#include <string_view>

#include "qloom/perf/candidate_entry.h"
#include "qloom/perf/partitions.h"
#include "qloom/perf/simulation.h"

namespace qloom::perf {

struct ProxyScore {
  double kld = 0, kld_stderr = 0, top1 = 1, ppl_ratio = 1, ppl_ratio_stderr = 0;
  int64_t tokens = 0;
  double seconds = 0;
  bool stopped = false;  // `stop` interrupted it: the score is not usable
};

// Module -> precision of every unit linear for `config` (kUsage as above).
Assignment assignment_of(const PartitionPlan& plan, const CandidateConfig& config);

ProxyScore score_candidate(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                           const CandidateConfig& config, unsigned threads, const StopFn& stop = {});

// Fills entry.search_metrics.proxy_* / proxy_seconds and relative_change.
// kUsage for a stopped score.
void apply_proxy(CandidateEntry& entry, const ProxyScore& score, std::string_view eval_task);

}  // namespace qloom::perf
