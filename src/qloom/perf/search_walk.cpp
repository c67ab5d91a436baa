#include "qloom/perf/search_walk.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

void check_options(const WalkOptions& o) {
  if (!(o.accuracy_gap >= 0) || !std::isfinite(o.accuracy_gap))
    throw Error(ErrorKind::kUsage, "", "--accuracy-gap", "the accuracy gap must be a finite number >= 0",
                "e.g. --accuracy-gap 0.02 (2%)");
}

void check_queue(const std::vector<CandidateEntry>& q) {
  for (size_t i = 0; i < q.size(); ++i)
    check_status(q[i].status, "mix_precision_search.candidate_queue[" + std::to_string(i) + "].status");
}

bool skipped(const CandidateEntry& e) { return e.status == kStatusSkipped; }

// The nearest index from `cur` in direction `dir` (-1 up / faster, +1 down /
// slower) the walk may move to, or nullopt (see the header's boundary rule).
// Moving up lands on the most promising member of the nearest faster group
// of equal modelled gain: the queue orders a group by predicted KLD, so
// that is the group's first candidate the walk may still reach.
std::optional<size_t> move_from(const std::vector<CandidateEntry>& q, const WalkOptions& o,
                                const std::set<size_t>& visited, size_t cur, bool passed) {
  const long dir = passed ? -1 : 1;
  std::optional<size_t> found;
  for (long i = long(cur) + dir; i >= 0 && i < long(q.size()); i += dir) {
    const size_t at = size_t(i);
    if (found && q[at].search_metrics.modelled_gain != q[*found].search_metrics.modelled_gain) break;
    if (skipped(q[at])) continue;
    if (!visited.count(at)) {
      found = at;
      if (!passed) break;  // moving down: the nearest slower is its group's best
      continue;
    }
    if (passes_proxy(q[at], o) != passed) break;  // the boundary
  }
  return found;
}

}  // namespace

double kld_budget(const WalkOptions& o) {
  check_options(o);
  return o.eval_task == "kld" ? o.accuracy_gap : std::log1p(o.accuracy_gap);
}

double relative_change(std::string_view eval_task, double proxy_kld, double proxy_ppl_ratio) {
  if (eval_task == "kld") return proxy_kld;
  return std::max(0.0, proxy_ppl_ratio - 1.0);
}

bool passes_proxy(const CandidateEntry& e, const WalkOptions& o) {
  return e.relative_change && *e.relative_change <= o.accuracy_gap;
}

std::optional<size_t> walk_start(const std::vector<CandidateEntry>& q, const WalkOptions& o) {
  const double budget = kld_budget(o);
  std::optional<size_t> best;
  for (size_t i = 0; i < q.size(); ++i) {
    if (skipped(q[i])) continue;
    if (q[i].search_metrics.predicted_kld <= budget) return i;
    if (!best || q[i].search_metrics.predicted_kld < q[*best].search_metrics.predicted_kld) best = i;
  }
  return best;
}

std::vector<size_t> walk_path(const std::vector<CandidateEntry>& q, const WalkOptions& o) {
  check_queue(q);
  std::vector<size_t> path;
  std::optional<size_t> cur = walk_start(q, o);
  std::set<size_t> visited;
  while (cur) {
    path.push_back(*cur);
    if (!q[*cur].proxied()) break;
    visited.insert(*cur);
    cur = move_from(q, o, visited, *cur, passes_proxy(q[*cur], o));
  }
  return path;
}

std::vector<size_t> gate_order(const std::vector<CandidateEntry>& q, const WalkOptions& o) {
  std::vector<size_t> out;
  for (size_t i = 0; i < q.size(); ++i)
    if (passes_proxy(q[i], o) && q[i].status != kStatusRejected && !skipped(q[i])) out.push_back(i);
  return out;
}

WalkStep next_step(const std::vector<CandidateEntry>& q, const WalkOptions& o) {
  const std::vector<size_t> path = walk_path(q, o);
  const size_t done = proxied_count(q);
  if (!path.empty() && !q[path.back()].proxied() &&
      (o.max_search_candidates == 0 || done < o.max_search_candidates))
    return {WalkStep::Kind::kProxy, path.back(),
            "proxy-score candidate rank " + std::to_string(q[path.back()].rank) + " (" +
                std::to_string(done + 1) + (o.max_search_candidates ? "/" + std::to_string(o.max_search_candidates) : "") +
                ")"};
  for (size_t i = 0; i < q.size(); ++i)
    if (q[i].status == kStatusAccepted)
      return {WalkStep::Kind::kAccepted, i, "candidate rank " + std::to_string(q[i].rank) + " passed the real gate"};
  for (size_t i : gate_order(q, o))
    if (q[i].status == kStatusPending || q[i].status == kStatusExported)
      return {WalkStep::Kind::kGate, i,
              std::string(q[i].status == kStatusPending ? "export and gate" : "gate") + " candidate rank " +
                  std::to_string(q[i].rank)};
  return {WalkStep::Kind::kExhausted, 0,
          std::to_string(done) + " candidates proxy-scored, none left to gate: " + kTerminationExhausted};
}

const char* step_kind_name(WalkStep::Kind k) {
  switch (k) {
    case WalkStep::Kind::kProxy: return "proxy";
    case WalkStep::Kind::kGate: return "gate";
    case WalkStep::Kind::kAccepted: return "accepted";
    case WalkStep::Kind::kExhausted: return "exhausted";
  }
  return "exhausted";
}

}  // namespace qloom::perf
