// The perf session end to end on the bundled demo model: a fixed recipe, a
// mixed-precision search, base_unhealthy, the lock, resume and reports.
#include "qloom/perf/session.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "qloom/agent/artifact_schema.h"
#include "qloom/perf/session_store.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {
namespace fs = std::filesystem;

const fs::path kDemo = QLOOM_DEMO_MODEL_DIR;

class PerfSession : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("QLOOM_CACHE_DIR", (tmp_ / "cache").c_str(), 1); }
  void TearDown() override { ::unsetenv("QLOOM_CACHE_DIR"); }

  PerfRunOptions options(std::vector<std::string> extra, const std::string& session = "s") {
    PerfRunOptions o;
    o.command.spec.model = kDemo.string();
    o.command.session_dir = (tmp_ / session).string();
    o.command.spec.eval_task = "ppl";
    o.command.spec.eval_limit = 4;
    o.command.spec.threads = 2;
    o.command.spec.num_calib_data = 16;
    o.command.spec.calib_seqlen = 64;
    o.command.accuracy_gap_text = "10%";
    for (size_t i = 0; i + 1 < extra.size(); i += 2) {
      if (extra[i] == "strategy") o.command.spec.quant_strategy = extra[i + 1];
      if (extra[i] == "precisions") o.command.spec.layer_precision_candidates = {extra[i + 1]};
      if (extra[i] == "gap") o.command.accuracy_gap_text = extra[i + 1];
    }
    finish_perf_command(o.command);
    o.argv = {"qloom", "perf", "--model", kDemo.string()};
    return o;
  }

  static void expect_valid(const fs::path& file, const std::string& schema) {
    ASSERT_TRUE(fs::exists(file)) << file;
    auto j = read_session_file(file.parent_path(), file.filename().string());
    auto v = agent::check_artifact(schema, j);
    EXPECT_TRUE(v.empty()) << file << ": " << (v.empty() ? "" : v[0].path + " " + v[0].message);
  }

  static void expect_session_files_valid(const fs::path& dir) {
    expect_valid(dir / "state.json", "perf_state");
    expect_valid(dir / "progress.json", "perf_progress");
    expect_valid(dir / "reports" / "final.json", "perf_final");
    expect_valid(dir / "session_breakdown.json", "perf_session_breakdown");
    for (const char* f : {"reports/final.md", "reports/report.html", "session_report.md"})
      EXPECT_TRUE(fs::exists(dir / f)) << f;
  }

  test::TempDir tmp_{"perf-session"};
};

TEST_F(PerfSession, FixedRecipeRunsTheAgentPathAndTheGate) {
  PerfOutcome out = run_perf_session(options({"strategy", "fp8 with fp8 kv cache"}));
  EXPECT_EQ(out.terminal_result, "success");
  EXPECT_EQ(out.exit_code, 0);
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["path"], "direct_ptq");
  EXPECT_EQ(state["stage"], "final");
  EXPECT_EQ(state["terminal_stage"], "done");
  EXPECT_EQ(state["fixed_recipe"]["status"], "exported");
  EXPECT_TRUE(fs::exists(out.session_dir / "quant_ckpt" / "config.json"));
  EXPECT_TRUE(fs::exists(out.session_dir / "agent" / "invocation-1" / "assessment.json"));
  ASSERT_TRUE(state["accuracy_validation"].is_object());
  EXPECT_TRUE(state["accuracy_validation"]["passed"].get<bool>());
  EXPECT_GT(state["accuracy_validation"]["n"].get<int64_t>(), 0);
  EXPECT_EQ(state["performance_status"], "not_requested");
  expect_session_files_valid(out.session_dir);
  EXPECT_EQ(out.final_json["result"], "success");
}

TEST_F(PerfSession, SearchMeetsTheGapAndResumeRedoesNothing) {
  PerfRunOptions o = options({});
  o.command.spec.layer_precision_candidates = {"native", "fp8", "int8", "mxfp4"};
  finish_perf_command(o.command);
  PerfOutcome out = run_perf_session(o);
  ASSERT_EQ(out.terminal_result, "success") << out.final_json.dump(2);
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["path"], "mix_precision_search");
  const auto& search = state["mix_precision_search"];
  EXPECT_GE(search["result"]["total_configs_available"].get<int64_t>(), 3);
  EXPECT_GE(search["result"]["total_configs_evaluated"].get<int64_t>(), 1);
  int accepted = 0;
  for (const auto& c : search["candidate_queue"]) accepted += c["status"] == "accepted";
  EXPECT_EQ(accepted, 1);
  EXPECT_LE(state["accuracy_validation"]["gap"].get<double>(), 0.10);
  expect_session_files_valid(out.session_dir);

  // The same command again: terminal, nothing re-run, the same facts.
  const size_t steps = state["phase_timeline"].size();
  PerfOutcome again = run_perf_session(o);
  auto state2 = read_session_file(again.session_dir, "state.json");
  EXPECT_EQ(state2["phase_timeline"].size(), steps);
  EXPECT_EQ(state2["invocations"], 2);
  auto strip = [](nlohmann::ordered_json j) {
    j.erase("generated_at");
    j.erase("timings");
    return j;
  };
  EXPECT_EQ(strip(again.final_json), strip(out.final_json));
}

TEST_F(PerfSession, BaseBelowTheFloorIsBaseUnhealthyAndStaysSo) {
  PerfRunOptions o = options({"strategy", "int8"});
  o.command.spec.eval_task = "gsm8k";
  o.command.spec.gsm8k_num_samples = 1;
  o.command.spec.baseline_floor = 0.5;
  PerfOutcome out = run_perf_session(o);
  EXPECT_EQ(out.terminal_result, "base_unhealthy");
  EXPECT_NE(out.exit_code, 0);
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["terminal_stage"], "base_unhealthy");
  EXPECT_FALSE(fs::exists(out.session_dir / "quant_ckpt"));
  expect_session_files_valid(out.session_dir);
  // Resumed without --recheck-baseline: still terminal, the baseline not re-run.
  PerfOutcome again = run_perf_session(o);
  EXPECT_EQ(again.terminal_result, "base_unhealthy");
  EXPECT_EQ(read_session_file(out.session_dir, "state.json")["baseline_reference"],
            state["baseline_reference"]);
}

TEST_F(PerfSession, RetryAccuracyGateReopensAFailedSessionAndReexportsAMissingCheckpoint) {
  PerfRunOptions o = options({"strategy", "int8", "gap", "0.0001"});
  PerfOutcome out = run_perf_session(o);
  ASSERT_EQ(out.terminal_result, "accuracy_failed");
  PerfRunOptions retry = o;
  retry.command.retry_accuracy_gate = true;
  PerfOutcome again = run_perf_session(retry);
  EXPECT_EQ(again.terminal_result, "accuracy_failed");
  auto state = read_session_file(out.session_dir, "state.json");
  ASSERT_EQ(state["accuracy_attempts"].size(), 2u);
  EXPECT_EQ(state["accuracy_attempts"][1]["attempt"], 2);
  EXPECT_EQ(state["accuracy_attempts"][0]["gap"], state["accuracy_attempts"][1]["gap"]);  // deterministic
  fs::remove_all(out.session_dir / "quant_ckpt");
  run_perf_session(retry);
  state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["accuracy_attempts"].size(), 3u);
  EXPECT_TRUE(fs::exists(out.session_dir / "quant_ckpt" / "config.json"));
  EXPECT_TRUE(fs::exists(out.session_dir / "agent" / "invocation-3" / "assessment.json"));
  // Without the flag a failed session stays as it is.
  run_perf_session(o);
  EXPECT_EQ(read_session_file(out.session_dir, "state.json")["accuracy_attempts"].size(), 3u);
  expect_session_files_valid(out.session_dir);
}

TEST_F(PerfSession, SearchTimeoutEndsPartialTimeoutWithTheBestSoFar) {
  PerfRunOptions o = options({});
  o.command.spec.layer_precision_candidates = {"native", "fp8", "int8"};
  o.command.spec.search_timeout = 1e-6;  // spent before the sensitivity measurement ends
  PerfOutcome out = run_perf_session(o);
  EXPECT_EQ(out.terminal_result, "accuracy_failed");  // nothing was proxy-scored, so nothing to salvage
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["mix_precision_search"]["status"], "partial_timeout");
  EXPECT_EQ(state["mix_precision_search"]["termination_reason"], "partial_timeout");
  EXPECT_EQ(state["mix_precision_search"]["result"]["total_configs_evaluated"], 0);
  EXPECT_FALSE(state["mix_precision_search"]["sensitivity"]["complete"].get<bool>());  // stopped, kept
  EXPECT_EQ(state["failure"]["reason"], "--search-timeout reached while measuring sensitivity");
  expect_session_files_valid(out.session_dir);
}

TEST_F(PerfSession, ASessionInsideTheModelDirectoryIsRefused) {
  test::TempDir copy("perf-model-copy");
  for (const auto& e : fs::directory_iterator(kDemo)) fs::copy(e.path(), copy / e.path().filename());
  PerfRunOptions o = options({"strategy", "int8"});
  o.command.spec.model = copy.path().string();
  o.command.spec.base_model = copy.path().string();
  o.command.session_dir = (copy / "runs" / "s").string();
  Error e = test::catch_error([&] { run_perf_session(o); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_FALSE(fs::exists(copy / "runs"));
}

TEST_F(PerfSession, OneOrchestratorPerSession) {
  SessionStore first(tmp_ / "locked");
  Error e = test::catch_error([&] { SessionStore second(tmp_ / "locked"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(e.message().find("another qloom perf"), std::string::npos);
}

TEST_F(PerfSession, ReportRebuildsATerminalSessionAndRefusesAnUnfinishedOne) {
  PerfOutcome out = run_perf_session(options({"strategy", "int8"}));
  fs::remove(out.session_dir / "reports" / "final.json");
  PerfOutcome rebuilt = rebuild_perf_reports(out.session_dir, nullptr);
  auto strip = [](nlohmann::ordered_json j) {
    j.erase("generated_at");
    return j;
  };
  EXPECT_EQ(strip(rebuilt.final_json), strip(out.final_json));
  // The same session put back before its gate: not terminal, refused.
  auto state = read_session_file(out.session_dir, "state.json");
  state["stage"] = "land";
  state["terminal_stage"] = nullptr;
  state["terminal_result"] = nullptr;
  test::TempDir other("perf-unfinished");
  other.write("state.json", state.dump(2));
  Error e = test::catch_error([&] { rebuild_perf_reports(other.path(), nullptr); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "terminal_stage");
  Error missing = test::catch_error([&] { rebuild_perf_reports(tmp_ / "nowhere", nullptr); });
  EXPECT_EQ(missing.kind(), ErrorKind::kNotFound);
}

TEST_F(PerfSession, StoredRunSpecWinsOnResume) {
  PerfRunOptions o = options({"strategy", "fp8"});
  PerfOutcome out = run_perf_session(o);
  PerfRunOptions changed = o;
  changed.command.spec.accuracy_gap = 0.5;
  run_perf_session(changed);
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_DOUBLE_EQ(state["run_spec"]["accuracy_gap"].get<double>(), 0.10);
  bool warned = false;
  for (const auto& w : state["warnings"]) warned |= w.get<std::string>().find("accuracy_gap") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(PerfSession, MeasureRecordsAbbaLegsAndOptimizeBelowTargetIsPerfBelowTarget) {
  PerfRunOptions o = options({"strategy", "int8"});
  o.command.spec.isl = 8;
  o.command.spec.osl = 4;
  o.command.spec.bench_concurrency = 2;
  o.command.target_gain_text = "50x";  // out of reach on the simulated runtime
  finish_perf_command(o.command);
  ASSERT_EQ(o.command.spec.performance_mode, "optimize");
  PerfOutcome out = run_perf_session(o);
  EXPECT_EQ(out.terminal_result, "perf_below_target");
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["terminal_stage"], "perf_failed");
  EXPECT_EQ(state["performance_status"], "target_not_met");
  ASSERT_EQ(state["performance_measurements"].size(), 4u);
  EXPECT_EQ(state["performance_measurements"][0]["role"], "baseline");
  EXPECT_EQ(state["performance_measurements"][1]["order"], "B1");
  EXPECT_EQ(state["performance_measurements"][1]["runtime"], "native");
  EXPECT_GT(state["performance_validation"]["gain"].get<double>(), 0);
  EXPECT_TRUE(state["performance_validation"].contains("trials"));
  // optimize starts from the measure step's ABBA instead of measuring it again.
  EXPECT_EQ(state["performance_validation"]["tuning"]["initial_abba"]["gain"],
            state["performance_validation"]["abba"]["gain"]);
  expect_session_files_valid(out.session_dir);
  EXPECT_EQ(out.final_json["result"], "perf_below_target");
}

TEST_F(PerfSession, LayerGranularitySearchExportsPerLayerConfigs) {
  PerfRunOptions o = options({});
  o.command.spec.layer_precision_candidates = {"native", "fp8", "int8"};
  o.command.spec.granularity = "layer";
  o.command.spec.kv_cache_precision_candidates = {"native"};
  finish_perf_command(o.command);
  PerfOutcome out = run_perf_session(o);
  ASSERT_EQ(out.terminal_result, "success") << out.final_json.dump(2);
  auto state = read_session_file(out.session_dir, "state.json");
  EXPECT_EQ(state["mix_precision_search"]["result"]["granularity"], "layer");
  EXPECT_EQ(state["mix_precision_search"]["sensitivity"]["granularity"], "layer");
  int layer_variants = 0;  // candidates that move single layers off their partition's precision
  for (const auto& c : state["mix_precision_search"]["candidate_queue"]) layer_variants += c["config"].contains("layers");
  EXPECT_GT(layer_variants, 0);
  expect_session_files_valid(out.session_dir);
}

}  // namespace
}  // namespace qloom::perf
