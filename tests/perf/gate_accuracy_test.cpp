// The real accuracy gate: the gap in both metric directions against hand
// computed values (clamped at 0, the zero-base rule), pass / fail at the
// threshold exactly, the paired stderr, unpaired runs refused naming both
// files, the kld rule, JSON round trip and determinism — on scores recorded
// from hand-made reports — and one end-to-end ppl and kld gate of the demo
// model against an int4 copy of it.
#include "qloom/perf/accuracy_gate.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/eval/eval_report.h"
#include "qloom/job/quantize_job.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {

namespace fs = std::filesystem;
using test::catch_error;

class GateAccuracy : public ::testing::Test {
 protected:
  // A ppl score over `nll` (one window of nll.size() + 1 tokens).
  TaskScore ppl_score(const std::string& name, const std::vector<double>& nll, int64_t windows = 1) {
    eval::EvalReport r;
    r.task = "ppl";
    r.model = QLOOM_DEMO_MODEL_DIR;
    r.dataset = "wikitext2";
    r.protocol = "quark";
    r.seq_len = int64_t(nll.size()) + 1;
    r.windows = windows;
    r.windows_total = 10;
    r.samples.token_nll = nll;
    GateSpec spec;
    spec.task = "ppl";
    return record_task_score(r, spec, tmp_ / name);
  }
  // A gsm8k score, 0/1 per question (strict and flexible alike).
  TaskScore gsm8k_score(const std::string& name, const std::vector<uint8_t>& correct) {
    eval::EvalReport r;
    r.task = "gsm8k";
    r.model = QLOOM_DEMO_MODEL_DIR;
    r.dataset = "gsm8k";
    r.n = int64_t(correct.size());
    r.n_total = 1319;
    r.samples.strict_correct = correct;
    r.samples.flexible_correct = correct;
    GateSpec spec;
    spec.task = "gsm8k";
    return record_task_score(r, spec, tmp_ / name);
  }

  test::TempDir tmp_{"gate-acc"};
};

TEST_F(GateAccuracy, PerplexityGapIsTheRelativeIncreaseClampedAtZero) {
  const TaskScore base = ppl_score("b", {1.0, 1.0, 1.0, 1.0});
  const TaskScore worse = ppl_score("w", {1.1, 1.2, 1.1, 1.2});
  const AccuracyValidation v = gate(base, worse, 0.2);
  EXPECT_EQ(v.task, "ppl");
  EXPECT_EQ(v.metric, "perplexity");
  EXPECT_NEAR(v.baseline, std::exp(1.0), 1e-12);
  EXPECT_NEAR(v.quantized, std::exp(1.15), 1e-12);
  EXPECT_NEAR(v.gap, std::exp(0.15) - 1.0, 1e-12);  // (ppl_q - ppl_b) / ppl_b
  // d = 0.1, 0.2, 0.1, 0.2: sd = sqrt(0.01 / 3); se = exp(mean d) * sd / sqrt(4)
  EXPECT_NEAR(v.stderr_, std::exp(0.15) * std::sqrt(0.01 / 3) / 2, 1e-12);
  EXPECT_EQ(v.n, 4);
  EXPECT_TRUE(v.passed);
  EXPECT_EQ(v.threshold, 0.2);
  EXPECT_FALSE(gate(base, worse, 0.16).passed);  // gap 0.1618
  EXPECT_NE(v.note.find("lower is better"), std::string::npos) << v.note;

  const TaskScore better = ppl_score("bt", {0.9, 0.9, 0.9, 0.9});
  const AccuracyValidation b = gate(base, better, 0.0);
  EXPECT_EQ(b.gap, 0.0);  // better than the base: no gap, never negative
  EXPECT_TRUE(b.passed);
}

TEST_F(GateAccuracy, AccuracyGapPassesExactlyAtTheThreshold) {
  const TaskScore base = gsm8k_score("b", {1, 1, 1, 1});
  const TaskScore quant = gsm8k_score("q", {1, 1, 1, 0});
  AccuracyValidation v = gate(base, quant, 0.25);
  EXPECT_EQ(v.baseline, 1.0);
  EXPECT_EQ(v.quantized, 0.75);
  EXPECT_EQ(v.gap, 0.25);  // (1 - 0.75) / 1
  EXPECT_TRUE(v.passed);   // gap <= threshold
  // d = 0, 0, 0, -1: sd = 0.5, se = 0.5 / sqrt(4) / 1
  EXPECT_DOUBLE_EQ(v.stderr_, 0.25);
  EXPECT_EQ(v.n, 4);
  EXPECT_FALSE(gate(base, quant, 0.2499).passed);
  EXPECT_NE(v.note.find("higher is better"), std::string::npos) << v.note;

  EXPECT_EQ(gate(quant, base, 0.0).gap, 0.0);  // the quantized model better: clamped

  const TaskScore zero = gsm8k_score("z", {0, 0, 0, 0});
  v = gate(zero, zero, 0.0);
  EXPECT_EQ(v.gap, 0.0);
  EXPECT_TRUE(v.passed);
  EXPECT_NE(v.note.find("source score is 0"), std::string::npos) << v.note;
  EXPECT_NE(v.note.find("unresolved"), std::string::npos) << v.note;  // nothing to lose, nothing learned
}

TEST_F(GateAccuracy, RefusesRunsThatAreNotPaired) {
  const TaskScore base = ppl_score("b", {1.0, 1.0, 1.0, 1.0});
  // Same token count, but from 2 windows: other samples.
  const TaskScore other = ppl_score("o", {1.0, 1.0, 1.0, 1.0}, 2);
  Error e = catch_error([&] { gate(base, other, 0.1); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "units_used");
  EXPECT_NE(e.file().find(base.samples_path.string()), std::string::npos) << e.file();
  EXPECT_NE(e.file().find(other.samples_path.string()), std::string::npos) << e.file();

  const TaskScore shorter = ppl_score("s", {1.0, 1.0, 1.0});
  EXPECT_EQ(catch_error([&] { gate(base, shorter, 0.1); }).item(), "seq_len");
  const TaskScore gsm = gsm8k_score("g", {1, 0, 1, 0});
  EXPECT_EQ(catch_error([&] { gate(base, gsm, 0.1); }).item(), "task");

  // A task score that says something else than its samples file.
  TaskScore lying = ppl_score("l", {1.1, 1.1, 1.1, 1.1});
  lying.score = base.score;
  e = catch_error([&] { gate(base, lying, 0.1); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), lying.samples_path.string());

  EXPECT_EQ(catch_error([&] { gate(base, base, -0.01); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] { gate(base, base, NAN); }).item(), "--accuracy-gap");
}

TEST_F(GateAccuracy, KldGapIsTheMeanKld) {
  GateSpec spec;
  spec.task = "kld";
  spec.reference_dir = QLOOM_DEMO_MODEL_DIR;
  const TaskScore base = score_task(QLOOM_DEMO_MODEL_DIR, spec, tmp_ / "kb", nullptr);
  eval::EvalReport r;
  r.task = "kld";
  r.model = tmp_.path().string();  // any directory other than the base
  r.source = QLOOM_DEMO_MODEL_DIR;
  r.dataset = "wikitext2";
  r.protocol = "quark";
  r.seq_len = 4;
  r.windows = 1;
  r.windows_total = 10;
  r.kld.count = 3;
  r.kld.kld_mean = 0.01;
  r.kld.kld_mean_stderr = 0.002;
  r.samples.token_nll = {1.0, 2.0, 3.0};
  r.samples.source_token_nll = {1.0, 1.9, 3.0};
  spec.tokenizer_dir = QLOOM_DEMO_MODEL_DIR;
  const TaskScore quant = record_task_score(r, spec, tmp_ / "kq");
  EXPECT_EQ(quant.reference, base.model);
  AccuracyValidation v = gate(base, quant, 0.01);
  EXPECT_EQ(v.metric, "kld_mean");
  EXPECT_EQ(v.baseline, 0.0);
  EXPECT_EQ(v.quantized, 0.01);
  EXPECT_EQ(v.gap, 0.01);
  EXPECT_EQ(v.stderr_, 0.002);
  EXPECT_EQ(v.n, 3);
  EXPECT_TRUE(v.passed);
  EXPECT_FALSE(gate(base, quant, 0.0099).passed);
  EXPECT_NE(v.note.find("mean KL divergence"), std::string::npos) << v.note;

  // Against another base: refused.
  TaskScore elsewhere = quant;
  elsewhere.reference = "/somewhere/else";
  EXPECT_EQ(catch_error([&] { gate(base, elsewhere, 0.1); }).item(), "reference");
  // The quantized run is no baseline.
  EXPECT_EQ(catch_error([&] { gate(quant, quant, 0.1); }).item(), "reference");
}

TEST_F(GateAccuracy, JsonHasTheContractKeysAndRoundTrips) {
  const AccuracyValidation v = gate(gsm8k_score("b", {1, 1, 0, 1}), gsm8k_score("q", {1, 0, 0, 1}), 0.02);
  const nlohmann::ordered_json j = to_json(v);
  std::vector<std::string> keys;
  for (const auto& [k, x] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"task", "metric", "baseline", "quantized", "gap", "passed", "n", "stderr",
                                            "threshold", "note"}));
  EXPECT_FALSE(v.passed);
  const AccuracyValidation back = accuracy_validation_from_json(nlohmann::json::parse(j.dump()), "state.json");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  // The same inputs, the same bytes.
  EXPECT_EQ(to_json(gate(gsm8k_score("b2", {1, 1, 0, 1}), gsm8k_score("q2", {1, 0, 0, 1}), 0.02)).dump(), j.dump());
  nlohmann::json broken = nlohmann::json::parse(j.dump());
  broken["passed"] = "yes";
  const Error e = catch_error([&] { accuracy_validation_from_json(broken, "state.json"); });
  EXPECT_EQ(e.item(), "passed");
  EXPECT_EQ(e.file(), "state.json");
}

// End to end on the demo model and an int4_wo_32 copy: both runs score the
// same tokens, the gap is what the two perplexities say, kld is positive.
TEST(GateAccuracyDemo, Int4CopyAgainstTheBase) {
  test::TempDir tmp("gate-e2e");
  job::QuantizeOptions q;
  q.model_dir = QLOOM_DEMO_MODEL_DIR;
  q.output_dir = tmp / "int4";
  q.quant_scheme = "int4_wo_32";
  q.exclude_layers = {"*down_proj"};  // in_features 172
  q.exclude_unsupported = true;
  q.threads = 2;
  job::quantize_model(q);

  GateSpec spec;
  spec.task = "ppl";
  spec.limit = 3;
  spec.seq_len = 128;
  spec.threads = 2;
  spec.tokenizer_dir = QLOOM_DEMO_MODEL_DIR;
  const TaskScore base = score_task(QLOOM_DEMO_MODEL_DIR, spec, tmp / "eval/baseline/attempt-1", nullptr);
  const TaskScore quant = score_task(tmp / "int4", spec, tmp / "eval/quantized/attempt-1", nullptr);
  const AccuracyValidation v = gate(load_task_score(tmp / "eval/baseline/attempt-1"), quant, 0.5);
  EXPECT_EQ(v.n, 3 * 127);
  EXPECT_EQ(v.baseline, base.score);
  EXPECT_EQ(v.quantized, quant.score);
  EXPECT_NEAR(v.gap, std::max(0.0, quant.score / base.score - 1.0), 1e-9);
  EXPECT_NE(quant.score, base.score);
  EXPECT_GT(v.stderr_, 0.0);

  spec.task = "kld";
  spec.reference_dir = QLOOM_DEMO_MODEL_DIR;
  const TaskScore kb = score_task(QLOOM_DEMO_MODEL_DIR, spec, tmp / "kld/base", nullptr);
  const TaskScore kq = score_task(tmp / "int4", spec, tmp / "kld/quant", nullptr);
  const AccuracyValidation k = gate(kb, kq, 1.0);
  EXPECT_GT(k.gap, 0.0);
  EXPECT_EQ(k.n, 3 * 127);
  EXPECT_EQ(k.gap, kq.score);
  const nlohmann::json report = nlohmann::json::parse(test::read_file(tmp / "kld/quant" / kEvalReportFile));
  EXPECT_EQ(report["kld_mean"].get<double>(), k.gap);
  EXPECT_TRUE(k.passed);
}

}  // namespace
}  // namespace qloom::perf
