// quark-quant-perf's walk over the throughput-ordered candidate queue, as
// PURE functions of the persisted queue (candidates.h order: index 0 =
// fastest). Nothing else is needed to resume after a kill -9: the next step
// is recomputed from the statuses and proxy results stored in the queue.
//
// Proxy phase:
//   start  the fastest candidate whose predicted_kld fits the budget
//          kld_budget(accuracy_gap, eval_task); when none fits, the one with
//          the smallest predicted_kld (fastest on ties).
//   move   a candidate PASSES the proxy when relative_change <= accuracy_gap;
//          a pass moves up (to the nearest faster group of equal modelled
//          gain, at its best-predicted member not yet on the path — the
//          queue orders a group by predicted KLD, so a tie never sends the
//          walk to the group's worst candidate first), a fail moves down
//          (nearest slower). A move stops at the
//          boundary: moving up never crosses a candidate already failed on
//          the path, moving down never crosses one already passed (the
//          fastest pass next to a fail is then known).
//   stop   when no move is left, or max_search_candidates proxies are done
//          (0 = no cap).
// The path is REPLAYED from the start with the stored results, so the walk
// needs no cursor: the first candidate on the replayed path without a proxy
// result is the next to score. Entries with status "skipped" are stepped
// over (never scored, never gated).
//
// Gate phase: the gate order is the proxy-passing candidates, fastest first,
// without rejected / skipped ones; the next gate is the first of them still
// pending or exported; an accepted one ends the search; none left ->
// termination "mix_precision_candidates_exhausted".
//
// relative_change (the proxy's estimate of the real gate's gap):
//   ppl gate           max(0, proxy ppl ratio - 1)
//   kld gate           the proxy's mean KLD
//   gsm8k / multiple-choice gates: max(0, proxy ppl ratio - 1) — an ESTIMATE
//                      (the proxy runs no task; a relative rise in perplexity
//                      stands in for the relative drop in accuracy)
// kld_budget: kld gate: the gap itself; other gates: ln(1 + gap), the mean
// KLD that raises the perplexity of text drawn from the base model by the
// factor 1 + gap (E[NLL_q - NLL_base] = KLD under the base distribution).
//
// Errors: kUsage for a negative gap or an unknown status in the queue.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/perf/candidate_entry.h"

namespace qloom::perf {

inline constexpr const char* kTerminationExhausted = "mix_precision_candidates_exhausted";

struct WalkOptions {
  double accuracy_gap = 0.02;
  std::string eval_task = "ppl";          // ppl | kld | gsm8k | <multiple-choice task>
  uint64_t max_search_candidates = 20;    // proxies at most; 0 = no cap
};

double kld_budget(const WalkOptions& o);
// The estimate above from the proxy's mean KLD and PPL ratio.
double relative_change(std::string_view eval_task, double proxy_kld, double proxy_ppl_ratio);
bool passes_proxy(const CandidateEntry& e, const WalkOptions& o);  // proxied and relative_change <= gap

// Index of the walk's first candidate; nullopt when every entry is skipped.
std::optional<size_t> walk_start(const std::vector<CandidateEntry>& queue, const WalkOptions& o);

// The replayed path: indices in walk order, up to and including the first
// candidate without a proxy result (the next to score), if any.
std::vector<size_t> walk_path(const std::vector<CandidateEntry>& queue, const WalkOptions& o);

// Proxy-passing, non-rejected, non-skipped candidates, fastest first.
std::vector<size_t> gate_order(const std::vector<CandidateEntry>& queue, const WalkOptions& o);

struct WalkStep {
  enum class Kind {
    kProxy,      // score queue[index] with the proxy
    kGate,       // export (status pending) or gate (status exported) queue[index]
    kAccepted,   // queue[index] passed the real gate: the search is done
    kExhausted,  // nothing left: termination = kTerminationExhausted
  };
  Kind kind = Kind::kExhausted;
  size_t index = 0;
  std::string reason;  // one line for progress.json / logs
};

WalkStep next_step(const std::vector<CandidateEntry>& queue, const WalkOptions& o);

const char* step_kind_name(WalkStep::Kind k);  // "proxy" | "gate" | "accepted" | "exhausted"

}  // namespace qloom::perf
