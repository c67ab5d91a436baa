// The search walk on hand-made queues: the start, pass moves up, fail moves
// down, the boundary, the cap, skipped entries, the gate order, rejection,
// acceptance, exhaustion, and resuming from the persisted JSON.
#include <gtest/gtest.h>

#include <cmath>

#include "qloom/perf/search_walk.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using test::catch_error;
using Kind = WalkStep::Kind;

// A queue of n candidates (index 0 fastest) with the given predicted KLDs.
std::vector<CandidateEntry> queue(const std::vector<double>& predicted) {
  std::vector<CandidateEntry> q(predicted.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i].config.partitions = {{"self_attn", "p" + std::to_string(i)}};
    q[i].rank = int(i) + 1;
    q[i].search_metrics.predicted_kld = predicted[i];
    q[i].search_metrics.modelled_gain = 3.0 - 0.1 * double(i);
  }
  return q;
}

WalkOptions gap(double g, uint64_t cap = 20, std::string task = "ppl") {
  WalkOptions o;
  o.accuracy_gap = g;
  o.max_search_candidates = cap;
  o.eval_task = std::move(task);
  return o;
}

void score(std::vector<CandidateEntry>& q, size_t i, bool pass, const WalkOptions& o) {
  q[i].relative_change = pass ? o.accuracy_gap / 2 : o.accuracy_gap * 2;
}

// Runs the proxy phase with an oracle; returns the indices proxied in order.
std::vector<size_t> run_proxies(std::vector<CandidateEntry>& q, const WalkOptions& o, const std::vector<bool>& passes) {
  std::vector<size_t> order;
  for (WalkStep s = next_step(q, o); s.kind == Kind::kProxy; s = next_step(q, o)) {
    order.push_back(s.index);
    score(q, s.index, passes[s.index], o);
  }
  return order;
}

TEST(SearchWalk, BudgetAndRelativeChange) {
  EXPECT_DOUBLE_EQ(kld_budget(gap(0.02)), std::log1p(0.02));
  EXPECT_DOUBLE_EQ(kld_budget(gap(0.02, 20, "gsm8k")), std::log1p(0.02));
  EXPECT_DOUBLE_EQ(kld_budget(gap(0.05, 20, "kld")), 0.05);
  EXPECT_DOUBLE_EQ(relative_change("ppl", 0.3, 1.04), 1.04 - 1.0);
  EXPECT_DOUBLE_EQ(relative_change("ppl", 0.3, 0.98), 0.0);
  EXPECT_DOUBLE_EQ(relative_change("kld", 0.3, 1.04), 0.3);
  EXPECT_DOUBLE_EQ(relative_change("gsm8k", 0.3, 1.07), 1.07 - 1.0);
  EXPECT_DOUBLE_EQ(relative_change("hellaswag", 0.3, 1.07), 1.07 - 1.0);
  EXPECT_EQ(catch_error([] { (void)kld_budget(gap(-0.1)); }).kind(), ErrorKind::kUsage);
}

TEST(SearchWalk, StartsAtTheFastestCandidateWithinBudget) {
  const WalkOptions o = gap(0.02);  // budget ln(1.02) = 0.0198
  auto q = queue({0.5, 0.3, 0.019, 0.05, 0.01, 0.001});
  EXPECT_EQ(walk_start(q, o), 2u);
  const WalkStep s = next_step(q, o);
  EXPECT_EQ(s.kind, Kind::kProxy);
  EXPECT_EQ(s.index, 2u);
  // None within budget: the smallest predicted KLD.
  auto far = queue({0.5, 0.3, 0.2, 0.4});
  EXPECT_EQ(walk_start(far, o), 2u);
  // Skipped entries are never the start.
  q[2].status = "skipped";
  EXPECT_EQ(walk_start(q, o), 4u);
}

TEST(SearchWalk, PassMovesUpFailMovesDown) {
  const WalkOptions o = gap(0.02);
  auto q = queue({0.5, 0.3, 0.2, 0.01, 0.005, 0.002, 0.001});
  score(q, 3, true, o);  // start passes -> faster neighbour
  EXPECT_EQ(next_step(q, o).index, 2u);
  score(q, 2, true, o);
  EXPECT_EQ(next_step(q, o).index, 1u);
  auto f = queue({0.5, 0.3, 0.2, 0.01, 0.005, 0.002, 0.001});
  score(f, 3, false, o);  // start fails -> slower neighbour
  EXPECT_EQ(next_step(f, o).index, 4u);
  score(f, 4, false, o);
  EXPECT_EQ(next_step(f, o).index, 5u);
  EXPECT_EQ(walk_path(f, o), (std::vector<size_t>{3, 4, 5}));
}

TEST(SearchWalk, StopsAtTheBoundaryAndGatesTheFastestPass) {
  const WalkOptions o = gap(0.02);
  auto q = queue({0.5, 0.3, 0.2, 0.01, 0.005, 0.002, 0.001});
  // 3 passes, 2 passes, 1 fails: moving down from 1 would cross the pass at 2.
  const auto order = run_proxies(q, o, {false, false, true, true, true, true, true});
  EXPECT_EQ(order, (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(gate_order(q, o), (std::vector<size_t>{2, 3}));
  const WalkStep s = next_step(q, o);
  EXPECT_EQ(s.kind, Kind::kGate);
  EXPECT_EQ(s.index, 2u);
  // Fail, fail, pass: moving up from the pass would cross the fail at 4.
  auto f = queue({0.5, 0.3, 0.2, 0.01, 0.005, 0.002, 0.001});
  EXPECT_EQ(run_proxies(f, o, {true, true, true, false, false, true, true}), (std::vector<size_t>{3, 4, 5}));
  EXPECT_EQ(next_step(f, o).index, 5u);
  EXPECT_EQ(next_step(f, o).kind, Kind::kGate);
}

TEST(SearchWalk, WalksOffEitherEnd) {
  const WalkOptions o = gap(0.02);
  auto up = queue({0.01, 0.005, 0.001});
  EXPECT_EQ(run_proxies(up, o, {true, true, true}), (std::vector<size_t>{0}));  // nothing faster
  auto down = queue({0.5, 0.3, 0.01});
  EXPECT_EQ(run_proxies(down, o, {false, false, false}), (std::vector<size_t>{2}));  // nothing slower
  EXPECT_EQ(next_step(down, o).kind, Kind::kExhausted);
}

TEST(SearchWalk, CapLimitsTheProxies) {
  auto q = queue({0.5, 0.3, 0.2, 0.01, 0.005, 0.002, 0.001});
  const WalkOptions capped = gap(0.02, 2);
  EXPECT_EQ(run_proxies(q, capped, {false, false, false, false, false, true, true}), (std::vector<size_t>{3, 4}));
  EXPECT_EQ(next_step(q, capped).kind, Kind::kExhausted);  // no pass among the two
  const WalkOptions uncapped = gap(0.02, 0);  // 0 = all
  EXPECT_EQ(run_proxies(q, uncapped, {false, false, false, false, false, true, true}), (std::vector<size_t>{5}));
  EXPECT_EQ(next_step(q, uncapped).index, 5u);
  EXPECT_EQ(next_step(q, uncapped).kind, Kind::kGate);
}

TEST(SearchWalk, SkippedEntriesAreSteppedOver) {
  const WalkOptions o = gap(0.02);
  auto q = queue({0.5, 0.3, 0.2, 0.01, 0.005});
  q[2].status = "skipped";
  score(q, 3, true, o);
  EXPECT_EQ(next_step(q, o).index, 1u);
  score(q, 1, true, o);
  score(q, 2, true, o);  // a skipped entry with a result is still never gated
  EXPECT_EQ(next_step(q, o).index, 0u);
  score(q, 0, false, o);
  EXPECT_EQ(gate_order(q, o), (std::vector<size_t>{1, 3}));
}

TEST(SearchWalk, GateRejectionMovesOnAcceptanceEndsExhaustionTerminates) {
  const WalkOptions o = gap(0.02, 20, "kld");
  auto q = queue({0.5, 0.3, 0.2, 0.01, 0.005, 0.002});
  (void)run_proxies(q, o, {false, true, true, true, true, true});
  ASSERT_EQ(gate_order(q, o), (std::vector<size_t>{1, 2, 3}));
  WalkStep s = next_step(q, o);
  EXPECT_EQ(s.kind, Kind::kGate);
  EXPECT_EQ(s.index, 1u);
  EXPECT_NE(s.reason.find("export and gate"), std::string::npos);
  q[1].status = "exported";
  s = next_step(q, o);
  EXPECT_EQ(s.index, 1u);
  EXPECT_EQ(s.reason, "gate candidate rank 2");
  q[1].status = "rejected";
  EXPECT_EQ(gate_order(q, o), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(next_step(q, o).index, 2u);
  q[2].status = "accepted";
  s = next_step(q, o);
  EXPECT_EQ(s.kind, Kind::kAccepted);
  EXPECT_EQ(s.index, 2u);
  q[2].status = "rejected";
  q[3].status = "rejected";
  s = next_step(q, o);
  EXPECT_EQ(s.kind, Kind::kExhausted);
  EXPECT_NE(s.reason.find(kTerminationExhausted), std::string::npos);
  EXPECT_STREQ(step_kind_name(s.kind), "exhausted");
}

TEST(SearchWalk, ResumeFromThePersistedQueueGivesTheSameNextStep) {
  const WalkOptions o = gap(0.02, 5);
  auto q = queue({0.9, 0.5, 0.3, 0.2, 0.01, 0.005, 0.002, 0.001});
  const std::vector<bool> passes = {false, false, true, true, true, true, true, true};
  for (int step = 0; step < 12; ++step) {
    const WalkStep live = next_step(q, o);
    const auto stored = candidate_queue_from_json(nlohmann::ordered_json::parse(to_json(q).dump()));
    const WalkStep resumed = next_step(stored, o);
    EXPECT_EQ(resumed.kind, live.kind) << step;
    EXPECT_EQ(resumed.index, live.index) << step;
    EXPECT_EQ(walk_path(stored, o), walk_path(q, o));
    if (live.kind == Kind::kProxy) score(q, live.index, passes[live.index], o);
    else if (live.kind == Kind::kGate) q[live.index].status = live.index == 3 ? "accepted" : "rejected";
    else break;
  }
  EXPECT_EQ(next_step(q, o).kind, Kind::kAccepted);
  EXPECT_EQ(next_step(q, o).index, 3u);
}

TEST(SearchWalk, APassMovesToTheBestPredictedMemberOfTheNearestFasterTie) {
  // Index 0 alone, indices 1-3 one group of equal gain (predicted 0.1, 0.5,
  // 0.9: the queue orders a group by predicted KLD), index 4 the start.
  std::vector<CandidateEntry> q = queue({0.8, 0.1, 0.5, 0.9, 0.01});
  for (size_t i = 1; i <= 3; ++i) q[i].search_metrics.modelled_gain = 2.5;
  const WalkOptions o = gap(0.02);
  // 4 passes -> 1 (not 3, the group's worst) passes -> 0 fails -> down: 1 is a
  // pass already on the path, the boundary: stop; the fastest pass is 1.
  EXPECT_EQ(run_proxies(q, o, {false, true, true, true, true}), (std::vector<size_t>{4, 1, 0}));
  EXPECT_EQ(next_step(q, o).kind, Kind::kGate);
  EXPECT_EQ(next_step(q, o).index, 1u);
  // When the group's best fails, the walk moves down to the next slower.
  std::vector<CandidateEntry> r = queue({0.8, 0.1, 0.5, 0.9, 0.01});
  for (size_t i = 1; i <= 3; ++i) r[i].search_metrics.modelled_gain = 2.5;
  EXPECT_EQ(run_proxies(r, o, {false, false, true, true, true}), (std::vector<size_t>{4, 1, 2}));
}

TEST(SearchWalk, UnknownStatusIsRefused) {
  auto q = queue({0.1});
  q[0].status = "done";
  const Error e = catch_error([&] { (void)next_step(q, gap(0.02)); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "mix_precision_search.candidate_queue[0].status");
}

}  // namespace
}  // namespace qloom::perf
