// The perf report facts from the three state fixtures: schema validity,
// the figures final.json takes from the state (gate, winner, search totals,
// ABBA gain, warnings, reproduction commands), the Pareto / winner marks,
// missing sections as null, determinism, comparable_facts, and typed errors
// naming the field for malformed states.
#include "qloom/perf/report_facts.h"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "perf/report_fixture.h"
#include "qloom/agent/artifact_schema.h"
#include "qloom/core/error.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

std::string violations(const std::vector<agent::SchemaViolation>& v) {
  std::string s;
  for (const auto& x : v) s += x.path + ": " + x.message + "\n";
  return s;
}

TEST(ReportFacts, EveryFixtureMatchesBothSchemas) {
  for (const char* name : {"search", "fixed", "failed"}) {
    const Json state = test::perf_state(name);
    const Json f = build_final_facts(state, test::perf_context());
    const Json b = build_session_breakdown(state, test::perf_context());
    EXPECT_EQ(violations(agent::check_artifact("perf_final", f)), "") << name;
    EXPECT_EQ(violations(agent::check_artifact("perf_session_breakdown", b)), "") << name;
    EXPECT_NO_THROW(check_breakdown_facts(b, "b.json")) << name;
  }
}

TEST(ReportFacts, SchemaRejectsWhatTheFactsNeverHold) {
  Json f = build_final_facts(test::perf_state("search"), test::perf_context());
  f["result"] = "maybe";
  EXPECT_FALSE(agent::check_artifact("perf_final", f).empty());
  f = build_final_facts(test::perf_state("search"), test::perf_context());
  f.erase("reproduction");
  EXPECT_EQ(test::catch_error([&] { check_final_facts(f, "final.json"); }).kind(), ErrorKind::kInvalidInput);
}

TEST(ReportFacts, SearchSessionFigures) {
  const Json f = build_final_facts(test::perf_state("search"), test::perf_context());
  EXPECT_EQ(f["result"], "success");
  EXPECT_EQ(f["terminal_stage"], "done");
  EXPECT_EQ(f["quant_ckpt_dir"], "/tmp/qloom-perf-fixture/search/quant_ckpt");
  const Json& a = f["accuracy"];
  EXPECT_EQ(a["task"], "ppl");
  EXPECT_EQ(a["metric"], "perplexity");
  EXPECT_DOUBLE_EQ(a["gap"].get<double>(), 0.0112);
  EXPECT_DOUBLE_EQ(a["threshold"].get<double>(), 0.02);
  EXPECT_EQ(a["n"], 20480);
  EXPECT_DOUBLE_EQ(a["stderr"].get<double>(), 0.0021);
  EXPECT_EQ(a["passed"], true);
  EXPECT_EQ(a["attempts"], 2);
  const Json& best = f["best_candidate"];
  EXPECT_EQ(best["kind"], "search");
  EXPECT_EQ(best["rank"], 3);
  EXPECT_DOUBLE_EQ(best["bits_per_weight"].get<double>(), 0.25 * 8 + 0.75 * 4.125);
  EXPECT_EQ(best["config"]["dense_mlp"], "int4_wo_128");
  EXPECT_EQ(f["search"]["total_configs_evaluated"], 8);
  EXPECT_EQ(f["search"]["total_configs_available"], 31);
  EXPECT_EQ(f["search"]["gated"], 2);
  const Json& p = f["performance"];
  EXPECT_EQ(p["mode"], "optimize");
  EXPECT_EQ(p["runtime"], "simulate");
  EXPECT_DOUBLE_EQ(p["baseline_tokens_per_s"].get<double>(), std::sqrt(402.1 * 398.7));
  EXPECT_DOUBLE_EQ(p["quantized_tokens_per_s"].get<double>(), std::sqrt(838.5 * 845.0));
  EXPECT_DOUBLE_EQ(p["gain"].get<double>(), 2.1023);  // performance_validation.gain, passed through
  EXPECT_EQ(p["target_met"], true);
  EXPECT_EQ(p["measurements"], 4);
  EXPECT_EQ(p["trials"], 3);
  EXPECT_EQ(f["timings"]["stages"].size(), 8u);
  EXPECT_NEAR(f["timings"]["total_seconds"].get<double>(), 1215.3, 1e-9);
  EXPECT_EQ(f["generated_at"], "2026-12-02T05:30:00Z");
}

TEST(ReportFacts, WarningsNameNotApplicableOptionsAndTheSimulatedRuntime) {
  ReportContext ctx = test::perf_context();
  ctx.extra_warnings = {"resumed after an interruption", "--gpu-type MI300X: not applicable to qloom's native engine (recorded, not used)"};
  const Json w = build_final_facts(test::perf_state("search"), ctx)["warnings"];
  ASSERT_EQ(w.size(), 3u) << w.dump(1);  // the duplicate appears once
  EXPECT_EQ(w[0], "--gpu-type MI300X: not applicable to qloom's native engine (recorded, not used)");
  EXPECT_NE(w[1].get<std::string>().find("simulated runtime"), std::string::npos);
  EXPECT_EQ(w[2], "resumed after an interruption");
  const Json fw = build_final_facts(test::perf_state("failed"), test::perf_context())["warnings"];
  EXPECT_EQ(fw[0], "sensitivity skipped: the demo model has 2 layers, measured weights would be noise");
  EXPECT_EQ(fw[3], "--framework vllm: not applicable to qloom's native engine (recorded, not used)");
}

TEST(ReportFacts, ReproductionQuotesArgvAndCompletesTheResumeCommand) {
  const Json r = build_final_facts(test::perf_state("search"), test::perf_context())["reproduction"];
  EXPECT_EQ(r["command"],
            "qloom perf --model /work/main/build/real/smollm2-bf16 --accuracy-gap 2% --performance-mode optimize "
            "--target-gain 2x --layer-precision-candidates native fp8 int8 int4_wo_128 --eval-task ppl "
            "--gpu-type MI300X --session-dir /tmp/qloom-perf-fixture/search");
  EXPECT_EQ(r["resume"], r["command"]);  // argv already names the session
  EXPECT_EQ(r["report"], "qloom perf report --session /tmp/qloom-perf-fixture/search");
  ReportContext ctx = test::perf_context();
  ctx.session_dir = "/runs/my session";
  const Json fixed = build_final_facts(test::perf_state("fixed"), ctx)["reproduction"];
  EXPECT_EQ(fixed["command"], "qloom perf --model /work/main/build/real/smollm2-bf16 --quant-strategy "
                              "'fp8 with fp8 kv cache' --eval-task ppl");
  EXPECT_EQ(fixed["resume"], fixed["command"].get<std::string>() + " --session-dir '/runs/my session'");
  EXPECT_EQ(fixed["report"], "qloom perf report --session '/runs/my session'");
  EXPECT_TRUE(build_final_facts(test::perf_state("fixed"), test::perf_context())["reproduction"]["report"].is_null());
}

TEST(ReportFacts, ParetoFrontAndWinner) {
  const Json b = build_session_breakdown(test::perf_state("search"), test::perf_context());
  std::vector<int> front, winners;
  for (const auto& c : b["candidates"]) {
    if (c["pareto"].get<bool>()) front.push_back(c["rank"].get<int>());
    if (c["winner"].get<bool>()) winners.push_back(c["rank"].get<int>());
  }
  // (bits/w, proxy gap): #1 (4.125, 3.1%), #3 (5.094, 1.4%), #5 (7.031, 0.9%),
  // #8 (8.0, 0.3%) are dominated by nobody; #2 and #4 lose to #3, #6 to #5, #7 to #8.
  EXPECT_EQ(front, (std::vector<int>{1, 3, 5, 8}));
  EXPECT_EQ(winners, (std::vector<int>{3}));
  EXPECT_EQ(b["candidates"][1]["real_passed"], false);
  EXPECT_DOUBLE_EQ(b["candidates"][1]["real_gap"].get<double>(), 0.026);
}

TEST(ReportFacts, BreakdownHoldsEveryDetailButTheEnvironment) {
  const Json b = build_session_breakdown(test::perf_state("search"), test::perf_context());
  EXPECT_EQ(b["candidates"].size(), 8u);
  EXPECT_EQ(b["sensitivity"]["entries"].size(), 8u);
  EXPECT_EQ(b["accuracy_attempts"].size(), 2u);
  EXPECT_EQ(b["performance"]["measurements"].size(), 4u);
  EXPECT_EQ(b["performance"]["trials"].size(), 3u);
  EXPECT_FALSE(b["performance"]["validation"].contains("trials"));
  EXPECT_EQ(b["phase_timeline"][6]["stage"], "perfopt");
  EXPECT_EQ(b["not_applicable"][0]["flag"], "--gpu-type");
  EXPECT_FALSE(b["invocation"].contains("env"));
  EXPECT_FALSE(b["final"].contains("generated_at"));
  EXPECT_EQ(b["final"]["result"], "success");
}

TEST(ReportFacts, MissingSectionsAreNull) {
  const Json fixed = build_final_facts(test::perf_state("fixed"), test::perf_context());
  EXPECT_TRUE(fixed["search"].is_null());
  EXPECT_EQ(fixed["best_candidate"]["kind"], "fixed_recipe");
  EXPECT_EQ(fixed["best_candidate"]["quant_strategy"], "fp8 with fp8 kv cache");
  EXPECT_DOUBLE_EQ(fixed["best_candidate"]["bits_per_weight"].get<double>(), 8.0);
  EXPECT_EQ(fixed["performance"]["status"], "not_requested");
  EXPECT_TRUE(fixed["performance"]["gain"].is_null());
  EXPECT_TRUE(fixed["performance"]["runtime"].is_null());
  const Json failed = build_final_facts(test::perf_state("failed"), test::perf_context());
  EXPECT_EQ(failed["result"], "accuracy_failed");
  EXPECT_TRUE(failed["quant_ckpt_dir"].is_null());
  EXPECT_TRUE(failed["best_candidate"].is_null());
  EXPECT_EQ(failed["search"]["termination_reason"], "mix_precision_candidates_exhausted");
  EXPECT_EQ(failed["accuracy"]["passed"], false);
  EXPECT_TRUE(failed["performance"]["baseline_tokens_per_s"].is_null());
  EXPECT_TRUE(build_session_breakdown(test::perf_state("failed"), test::perf_context())["sensitivity"].is_null());
  // A session that stopped at base_unhealthy: no gate, no search, no throughput.
  Json st = test::perf_state("failed");
  st["terminal_stage"] = "base_unhealthy";
  st["terminal_result"] = "base_unhealthy";
  st["mix_precision_search"] = nullptr;
  st["accuracy_validation"] = nullptr;
  st["accuracy_attempts"] = Json::array();
  const Json bu = build_final_facts(st, test::perf_context());
  EXPECT_TRUE(bu["accuracy"].is_null());
  EXPECT_TRUE(bu["search"].is_null());
  EXPECT_EQ(violations(agent::check_artifact("perf_final", bu)), "");
}

TEST(ReportFacts, DeterministicAndComparableAcrossRuns) {
  const Json state = test::perf_state("search");
  EXPECT_EQ(build_session_breakdown(state, test::perf_context()).dump(),
            build_session_breakdown(state, test::perf_context()).dump());
  Json later = state;  // the same session resumed: other wall-clock figures
  later["phase_timeline"][2]["seconds"] = 99.0;
  later["mix_precision_search"]["result"]["search_time_seconds"] = 99.0;
  later["performance_validation"]["gain"] = 2.2;
  const Json a = build_final_facts(state, test::perf_context("2026-12-02T05:30:00Z"));
  const Json b = build_final_facts(later, test::perf_context("2026-12-03T00:00:00Z"));
  EXPECT_NE(a.dump(), b.dump());
  EXPECT_EQ(comparable_facts(a).dump(), comparable_facts(b).dump());
  later["best_candidate"]["rank"] = 4;  // a different winner is a different result
  EXPECT_NE(comparable_facts(a).dump(), comparable_facts(build_final_facts(later, test::perf_context())).dump());
}

Error error_for(const std::function<void(Json&)>& edit) {
  Json st = test::perf_state("search");
  edit(st);
  return test::catch_error([&] { build_session_breakdown(st, test::perf_context()); });
}

TEST(ReportFacts, MalformedStateNamesTheField) {
  Error e = error_for([](Json& s) { s["run_spec"].erase("model"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "state.json");
  EXPECT_EQ(e.item(), "run_spec.model");
  EXPECT_NE(e.message().find("missing"), std::string::npos);
  e = error_for([](Json& s) { s["mix_precision_search"]["candidate_queue"][2]["rank"] = "3"; });
  EXPECT_EQ(e.item(), "mix_precision_search.candidate_queue[2].rank");
  EXPECT_NE(e.message().find("integer"), std::string::npos);
  e = error_for([](Json& s) { s["terminal_result"] = "success"; s["terminal_stage"] = "failed"; });
  EXPECT_EQ(e.item(), "terminal_result");
  e = error_for([](Json& s) { s["performance_status"] = "great"; });
  EXPECT_EQ(e.item(), "performance_status");
  e = error_for([](Json& s) { s["performance_measurements"][1].erase("role"); });
  EXPECT_EQ(e.item(), "performance_measurements[1].role");
  e = error_for([](Json& s) { s["mix_precision_search"]["sensitivity"]["entries"][3]["kld"] = -1; });
  EXPECT_EQ(e.item(), "mix_precision_search.sensitivity.entries[3].kld");
  e = error_for([](Json& s) { s["schema_version"] = 2; });
  EXPECT_EQ(e.item(), "schema_version");
  e = error_for([](Json& s) { s["invocation"].erase("argv"); });
  EXPECT_EQ(e.item(), "invocation.argv");
  e = error_for([](Json& s) { s["accuracy_validation"].erase("stderr"); });
  EXPECT_EQ(e.item(), "accuracy_validation.stderr");
  e = error_for([](Json& s) { s = Json::array(); });
  EXPECT_EQ(e.item(), "/");
}

}  // namespace
}  // namespace qloom::perf
