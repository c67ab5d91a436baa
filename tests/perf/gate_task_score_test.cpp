// task_score on the demo model: the gate metric a spec resolves to, score_task
// -> load_task_score round trip (ppl and a tiny gsm8k run), the files it
// writes, the same samples from the same inputs, the kld base that is not
// run, and a tampered or missing directory refused.
#include "qloom/perf/task_score.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {

namespace fs = std::filesystem;
using test::catch_error;
using test::read_file;

GateSpec ppl_spec() {
  GateSpec s;
  s.task = "ppl";
  s.limit = 2;
  s.seq_len = 128;
  s.threads = 2;
  return s;
}

TEST(GateTaskScore, ResolvesTasksDefaultsAndErrors) {
  GateSpec s;
  s.task = "gsm8k";
  GateMetric m = resolve_gate_metric(s);
  EXPECT_EQ(m.metric, "exact_match,strict-match");
  EXPECT_EQ(m.direction, agent::MetricDirection::kHigherIsBetter);
  EXPECT_EQ(m.limit, kGsm8kDefaultLimit);  // 0 = --gsm8k-num-samples' default
  EXPECT_EQ(m.unit, "questions");
  s.task = "gsm8k_flexible";
  s.limit = 5;
  m = resolve_gate_metric(s);
  EXPECT_EQ(m.metric, "exact_match,flexible-extract");
  EXPECT_EQ(m.limit, 5);
  s = GateSpec{};
  s.task = "wikitext2_ppl";
  m = resolve_gate_metric(s);
  EXPECT_EQ(m.task, "ppl");
  EXPECT_EQ(m.metric, "perplexity");
  EXPECT_EQ(m.dataset, "wikitext2");
  EXPECT_EQ(m.direction, agent::MetricDirection::kLowerIsBetter);
  EXPECT_FALSE(m.limit.has_value());  // every window
  s.task = "hellaswag";
  m = resolve_gate_metric(s);
  EXPECT_EQ(m.metric, "acc_norm");
  EXPECT_EQ(m.unit, "documents");

  s.task = "kld";
  Error e = catch_error([&] { resolve_gate_metric(s); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("reference_dir"), std::string::npos) << e.what();
  s.reference_dir = QLOOM_DEMO_MODEL_DIR;
  EXPECT_EQ(resolve_gate_metric(s).metric, "kld_mean");
  s.task = "bleu";
  e = catch_error([&] { resolve_gate_metric(s); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--eval-task bleu");
  EXPECT_EQ(std::string(e.what()).find("\xE2\x80\x8B"), std::string::npos);  // no zero-width spaces
  s.task = "ppl";
  s.limit = -1;
  EXPECT_EQ(catch_error([&] { resolve_gate_metric(s); }).kind(), ErrorKind::kUsage);
}

TEST(GateTaskScore, PplScoreRoundTripsThroughItsDirectory) {
  test::TempDir tmp("gate-ts");
  std::ostringstream log;
  const fs::path out = tmp / "evaluation/baseline/attempt-1";
  const TaskScore s = score_task(QLOOM_DEMO_MODEL_DIR, ppl_spec(), out, &log);
  for (const char* f : {kSamplesFile, kScoreFile, kEvalReportFile}) EXPECT_TRUE(fs::is_regular_file(out / f)) << f;
  EXPECT_EQ(s.task, "ppl");
  EXPECT_EQ(s.metric, "perplexity");
  EXPECT_EQ(s.direction, agent::MetricDirection::kLowerIsBetter);
  EXPECT_EQ(s.units_used, 2);
  EXPECT_GT(s.units_total, 2);
  EXPECT_EQ(s.n, 2 * 127);  // every position but each window's first
  EXPECT_GT(s.score, 1.0);
  EXPECT_LT(s.score, 512.0);
  EXPECT_GT(s.stderr_, 0.0);
  EXPECT_EQ(s.samples_path, fs::absolute(out) / kSamplesFile);
  EXPECT_EQ(s.model, fs::absolute(QLOOM_DEMO_MODEL_DIR).lexically_normal().string());
  EXPECT_TRUE(s.reference.empty());
  EXPECT_EQ(s.evaluated_at.size(), 20u) << s.evaluated_at;  // 2026-12-02T05:15:00Z

  // The score is the run's perplexity (run_eval's NllStats over the same tokens).
  const nlohmann::json report = nlohmann::json::parse(read_file(out / kEvalReportFile));
  EXPECT_NEAR(report["ppl"].get<double>(), s.score, 1e-9 * s.score);
  const nlohmann::json samples = nlohmann::json::parse(read_file(out / kSamplesFile));
  EXPECT_EQ(samples["token_nll"].size(), size_t(s.n));
  EXPECT_EQ(samples["units_used"], 2);
  EXPECT_EQ(samples["seq_len"], 128);
  EXPECT_EQ(samples["tokenizer_sha256"].get<std::string>().size(), 64u);

  const TaskScore back = load_task_score(out);
  EXPECT_EQ(to_json(back).dump(), to_json(s).dump());
  EXPECT_EQ(task_score_from_json(nlohmann::json::parse(read_file(out / kScoreFile)), "score.json").score, s.score);

  // The same inputs give the same samples, byte for byte.
  const fs::path again = tmp / "again";
  score_task(QLOOM_DEMO_MODEL_DIR, ppl_spec(), again, nullptr);
  EXPECT_EQ(read_file(again / kSamplesFile), read_file(out / kSamplesFile));

  // A moved directory still loads, with samples_path where it now is.
  const fs::path moved = tmp / "moved";
  fs::rename(out, moved);
  EXPECT_EQ(load_task_score(moved).samples_path, fs::absolute(moved) / kSamplesFile);
}

TEST(GateTaskScore, TinyGsm8kRun) {
  test::TempDir tmp("gate-gsm");
  GateSpec spec;
  spec.task = "gsm8k";
  spec.limit = 2;
  spec.threads = 2;
  const TaskScore s = score_task(QLOOM_DEMO_MODEL_DIR, spec, tmp / "g", nullptr);
  EXPECT_EQ(s.metric, "exact_match,strict-match");
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.units_used, 2);
  EXPECT_EQ(s.units_total, 1319);
  EXPECT_GE(s.score, 0.0);
  EXPECT_LE(s.score, 1.0);
  const nlohmann::json samples = nlohmann::json::parse(read_file(tmp / "g" / kSamplesFile));
  EXPECT_EQ(samples["strict_correct"].size(), 2u);
  EXPECT_EQ(samples["flexible_correct"].size(), 2u);
  EXPECT_EQ(samples["max_gen_toks"], 256);
  EXPECT_EQ(to_json(load_task_score(tmp / "g")).dump(), to_json(s).dump());
}

TEST(GateTaskScore, KldOfTheBaseIsZeroWithoutARun) {
  test::TempDir tmp("gate-kb");
  GateSpec spec;
  spec.task = "kld";
  spec.reference_dir = QLOOM_DEMO_MODEL_DIR;
  std::ostringstream log;
  const TaskScore s = score_task(QLOOM_DEMO_MODEL_DIR, spec, tmp / "k", &log);
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.n, 0);
  EXPECT_EQ(s.seconds, 0.0);
  EXPECT_EQ(s.reference, s.model);
  EXPECT_FALSE(fs::exists(tmp / "k" / kEvalReportFile));
  EXPECT_NE(log.str().find("not run"), std::string::npos) << log.str();
  EXPECT_EQ(load_task_score(tmp / "k").score, 0.0);
}

TEST(GateTaskScore, LoadRefusesATamperedOrMissingDirectory) {
  test::TempDir tmp("gate-tamper");
  const fs::path out = tmp / "s";
  score_task(QLOOM_DEMO_MODEL_DIR, ppl_spec(), out, nullptr);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_file(out / kScoreFile));
  j["score"] = j["score"].get<double>() * 0.9;
  std::ofstream(out / kScoreFile) << j.dump(2);
  Error e = catch_error([&] { load_task_score(out); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "score");

  j.erase("n");
  std::ofstream(out / kScoreFile) << j.dump(2);
  e = catch_error([&] { load_task_score(out); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "n");

  fs::remove(out / kSamplesFile);
  EXPECT_EQ(catch_error([&] { read_task_samples(out / kSamplesFile); }).kind(), ErrorKind::kNotFound);
  EXPECT_EQ(catch_error([&] { load_task_score(tmp / "nowhere"); }).kind(), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace qloom::perf
