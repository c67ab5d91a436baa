// perf/perf_tuning.h: the KEEP floor on scripted ABBA numbers, the knob
// search (order, skipping, target and max_trials stops), and one real
// optimize run on the demo model.
#include <map>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/perf/perf_tuning.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

TEST(ThroughputTuning, KeepFloor) {
  EXPECT_DOUBLE_EQ(keep_floor(0), 0.01);
  EXPECT_DOUBLE_EQ(keep_floor(0.004), 0.01);
  EXPECT_DOUBLE_EQ(keep_floor(0.005), 0.01);
  EXPECT_DOUBLE_EQ(keep_floor(0.02), 0.04);
  double floor = 0;
  std::string reason;
  // gain sqrt(1.02 * 1.02) = 1.02 with quiet legs: kept.
  EXPECT_TRUE(keep_trial(abba_of(100, 102, 102, 100, 0.003, true), &floor, &reason));
  EXPECT_DOUBLE_EQ(floor, 0.01);
  EXPECT_NE(reason.find(">="), std::string::npos) << reason;
  // The same gain with a noisy leg (MAD 0.02 -> floor 0.04): dropped.
  EXPECT_FALSE(keep_trial(abba_of(100, 102, 102, 100, 0.02, false), &floor, &reason));
  EXPECT_DOUBLE_EQ(floor, 0.04);
  EXPECT_NE(reason.find("< 1 + keep floor 0.0400"), std::string::npos) << reason;
  // Exactly on the floor is kept; just under is not.
  EXPECT_TRUE(keep_trial(abba_of(100, 101, 101, 100, 0, true)));
  EXPECT_FALSE(keep_trial(abba_of(100, 100.99, 100.99, 100, 0, true)));
  // A slower trial is never kept.
  EXPECT_FALSE(keep_trial(abba_of(100, 90, 90, 100, 0, true)));
}

TEST(ThroughputTuning, DefaultPlans) {
  RunnerSettings start{16, 64};
  auto plans = default_plans(start, 16, 64, true);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].knob, "threads");
  EXPECT_EQ(plans[0].values, (std::vector<int64_t>{16, 8, 4, 2, 1}));
  EXPECT_EQ(plans[1].knob, "decode_batch");
  EXPECT_EQ(plans[1].values, (std::vector<int64_t>{64, 32, 1}));
  plans = default_plans(start, 6, 5, false);  // rows mix: no batch knob
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].values, (std::vector<int64_t>{6, 3, 1}));
  EXPECT_EQ(default_plans(start, 2, 1, true).size(), 1u);  // one sequence: nothing to batch
}

// Scripted trials: (knob, to) -> (gain, max relative MAD).
struct Script {
  std::map<std::pair<std::string, int64_t>, std::pair<double, double>> table;
  std::vector<std::pair<RunnerSettings, RunnerSettings>> calls;
  TrialCompare fn() {
    return [this](const RunnerSettings& best, const RunnerSettings& trial) {
      calls.emplace_back(best, trial);
      const std::string knob = best.threads != trial.threads ? "threads" : "decode_batch";
      const auto [gain, mad] = table.at({knob, knob_value(trial, knob)});
      return abba_of(100, 100 * gain, 100 * gain, 100, mad, mad <= 0.015);
    };
  }
};

TEST(ThroughputTuning, SearchKeepsOnlyWhatClearsTheFloor) {
  Script s;
  s.table = {{{"threads", 2}, {1.05, 0.004}},       // kept (floor 0.01)
             {{"threads", 1}, {1.03, 0.02}},        // dropped: floor 0.04
             {{"decode_batch", 8}, {0.97, 0.002}},  // dropped: slower
             {{"decode_batch", 1}, {1.02, 0.001}}}; // kept
  const std::vector<KnobPlan> plans = {{"threads", {4, 2, 1}}, {"decode_batch", {8, 4, 1}}};
  const SearchOutcome o = search_knobs(RunnerSettings{4, 4}, plans, 0.9, std::nullopt, 10, s.fn());
  ASSERT_EQ(o.trials.size(), 4u);  // threads 4 and decode_batch 4 are the start: skipped
  EXPECT_EQ(o.trials[0].knob, "threads");
  EXPECT_EQ(o.trials[0].from, 4);
  EXPECT_EQ(o.trials[0].to, 2);
  EXPECT_TRUE(o.trials[0].kept);
  EXPECT_EQ(o.trials[1].from, 2);  // compared against the new best
  EXPECT_EQ(o.trials[1].to, 1);
  EXPECT_FALSE(o.trials[1].kept);
  EXPECT_DOUBLE_EQ(o.trials[1].keep_floor, 0.04);
  EXPECT_FALSE(o.trials[2].kept);
  EXPECT_TRUE(o.trials[3].kept);
  EXPECT_EQ(o.best, (RunnerSettings{2, 1}));
  EXPECT_NEAR(o.estimated_gain, 0.9 * 1.05 * 1.02, 1e-12);
  EXPECT_EQ(o.stop_reason, "all knob values tried");
  // Each trial's A side is the best so far.
  EXPECT_EQ(s.calls[1].first, (RunnerSettings{2, 4}));
  EXPECT_EQ(s.calls[3].first, (RunnerSettings{2, 4}));
  EXPECT_EQ(s.calls[3].second, (RunnerSettings{2, 1}));
  const nlohmann::ordered_json j = o.trials[1].to_json();
  EXPECT_EQ(j["knob"], "threads");
  EXPECT_EQ(j["kept"], false);
  EXPECT_EQ(TuningTrial::from_json(j, "t").to_json().dump(), j.dump());
}

TEST(ThroughputTuning, SearchStopsAtTheTargetAndAtMaxTrials) {
  Script s;
  s.table = {{{"threads", 2}, {1.2, 0.001}}, {{"threads", 1}, {1.5, 0.001}}};
  const std::vector<KnobPlan> plans = {{"threads", {2, 1}}};
  SearchOutcome o = search_knobs(RunnerSettings{4, 1}, plans, 1.0, 1.1, 10, s.fn());
  EXPECT_EQ(o.trials.size(), 1u);  // 1.0 * 1.2 >= 1.1
  EXPECT_EQ(o.stop_reason, "target met");
  o = search_knobs(RunnerSettings{4, 1}, plans, 1.2, 1.1, 10, s.fn());
  EXPECT_TRUE(o.trials.empty());  // already at the target
  EXPECT_EQ(o.stop_reason, "target met");
  o = search_knobs(RunnerSettings{4, 1}, plans, 1.0, 5.0, 1, s.fn());
  EXPECT_EQ(o.trials.size(), 1u);
  EXPECT_EQ(o.stop_reason, "max_trials reached");
}

TEST(ThroughputTuning, OptimizeOnTheDemoModel) {
  ThroughputSpec spec;
  spec.isl = 8;
  spec.osl = 4;
  spec.concurrency = 2;
  spec.threads = 1;
  TuningOptions opt;
  opt.target_gain = 100.0;  // out of reach: every trial runs
  opt.max_trials = 2;
  const TuningResult r = optimize_quantized(QLOOM_DEMO_MODEL_DIR, QLOOM_DEMO_MODEL_DIR, spec, opt);
  EXPECT_EQ(r.initial_settings, (RunnerSettings{1, 2}));
  ASSERT_FALSE(r.trials.empty());
  ASSERT_LE(r.trials.size(), 2u);
  for (const TuningTrial& t : r.trials) {
    EXPECT_NE(t.from, t.to);
    EXPECT_EQ(t.abba.legs.size(), 4u);
    double floor = 0;
    EXPECT_EQ(t.kept, keep_trial(t.abba, &floor));
    EXPECT_DOUBLE_EQ(t.keep_floor, floor);
  }
  EXPECT_FALSE(r.target_met);
  EXPECT_DOUBLE_EQ(r.final_gain, r.final_abba.gain);
  if (r.final_settings == r.initial_settings) {
    EXPECT_DOUBLE_EQ(r.final_gain, r.initial_abba.gain);
  }
  bool kernel_noted = false;
  for (const KnobNote& n : r.not_tunable) kernel_noted = kernel_noted || n.knob == "kernel";
  EXPECT_TRUE(kernel_noted);
  const auto j = r.to_json();
  EXPECT_EQ(j["trials"].size(), r.trials.size());
  EXPECT_EQ(j["target_gain"], 100.0);
  EXPECT_EQ(test::catch_error([&] {
              TuningOptions bad;
              bad.target_gain = 0;
              optimize_quantized(QLOOM_DEMO_MODEL_DIR, QLOOM_DEMO_MODEL_DIR, spec, bad);
            }).item(),
            "--target-gain");
  ThroughputSpec served = spec;
  served.server = "http://127.0.0.1:9";  // never contacted: refused first
  EXPECT_EQ(test::catch_error([&] { optimize_quantized(QLOOM_DEMO_MODEL_DIR, QLOOM_DEMO_MODEL_DIR, served, {}); })
                .item(),
            "--server");
}

}  // namespace
}  // namespace qloom::perf
