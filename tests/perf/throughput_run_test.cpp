// perf/throughput.h on the demo model: the prompt pool and golden prompts,
// real in-process measurements (baseline and a Quark checkpoint), ABBA, and
// refusals of bad specs before any run.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/throughput.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {

namespace fs = std::filesystem;

ThroughputSpec tiny() {
  ThroughputSpec s;
  s.isl = 8;
  s.osl = 4;
  s.concurrency = 2;
  s.threads = 1;
  return s;
}

model::ModelConfig demo_config() {
  return model::ModelConfig::parse(io::ModelDir::open(QLOOM_DEMO_MODEL_DIR).config());
}

TEST(ThroughputRun, DemoPoolDropsSpecialTokens) {
  const text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  const std::vector<int32_t> pool = prompt_token_pool(tok, demo_config());
  // stories260K: 512 ids, of which <unk> 0, <s> 1 (bos) and </s> 2 (eos) are special.
  EXPECT_EQ(pool.size(), 509u);
  EXPECT_EQ(pool.front(), 3);
  EXPECT_EQ(pool.back(), 511);
  EXPECT_TRUE(std::is_sorted(pool.begin(), pool.end()));
}

TEST(ThroughputRun, DemoPromptsAreGolden) {
  const auto w = open_workload(QLOOM_DEMO_MODEL_DIR, tiny());
  ASSERT_EQ(w->prompts().size(), 20u);  // concurrency 2 x factor 10
  for (const auto& p : w->prompts()) EXPECT_EQ(p.size(), 8u);
  // Pool 3..511 drawn with mt19937_64(1234); cross-checked in Python.
  EXPECT_EQ(w->prompts()[0], (std::vector<int32_t>{38, 484, 264, 190, 355, 321, 269, 87}));
  EXPECT_EQ(prompts_hash(w->prompts()), "f5bd06b249e8ec43");
  EXPECT_EQ(open_workload(QLOOM_DEMO_MODEL_DIR, tiny())->prompts(), w->prompts());
}

void expect_sane(const ThroughputMeasurement& m, const ThroughputSpec& s, int64_t prompts) {
  EXPECT_EQ(m.runtime, s.runtime);
  EXPECT_EQ(m.backend, "qloom");
  EXPECT_NE(m.note.find("runtime " + s.runtime), std::string::npos) << m.note;
  ASSERT_GE(m.timed_samples, 3);
  ASSERT_LE(m.timed_samples, 4);
  ASSERT_EQ(m.runs.size(), size_t(m.timed_samples));
  std::vector<double> rates;
  for (const RunSample& r : m.runs) {
    EXPECT_EQ(r.output_tokens, prompts * s.osl);
    EXPECT_EQ(r.prompt_tokens, prompts * s.isl);
    EXPECT_GT(r.seconds, 0);
    EXPECT_DOUBLE_EQ(r.tokens_per_s, double(r.output_tokens) / r.seconds);
    EXPECT_DOUBLE_EQ(r.total_tokens_per_s, double(r.output_tokens + r.prompt_tokens) / r.seconds);
    ASSERT_TRUE(r.ttft_ms_median && r.tpot_ms_median);
    EXPECT_GE(*r.ttft_ms_median, 0);
    EXPECT_FALSE(r.latency_ms_median.has_value());
    rates.push_back(r.tokens_per_s);
  }
  // The 4th run happens exactly when the first three's MAD is over 0.01.
  const std::vector<double> first3(rates.begin(), rates.begin() + 3);
  EXPECT_EQ(m.timed_samples == 4, relative_mad(first3) > 0.01);
  EXPECT_DOUBLE_EQ(m.median_tokens_per_s, median(rates));
  EXPECT_DOUBLE_EQ(m.relative_mad, relative_mad(rates));
  EXPECT_EQ(m.stable, m.relative_mad <= 0.015);
  EXPECT_EQ(m.warmup.output_tokens, prompts * s.osl);
  EXPECT_EQ(m.num_prompts, prompts);
}

TEST(ThroughputRun, InProcessBaselineOnTheDemoModel) {
  const ThroughputSpec s = tiny();
  const ThroughputMeasurement m = measure_throughput(QLOOM_DEMO_MODEL_DIR, "baseline", s);
  expect_sane(m, s, 20);
  EXPECT_EQ(m.label, "baseline");
  EXPECT_EQ(m.model_dir, fs::absolute(QLOOM_DEMO_MODEL_DIR).lexically_normal().string());
  EXPECT_EQ(m.settings.threads, 1u);
  EXPECT_EQ(m.settings.decode_batch, 2);  // min(64, concurrency)
  // JSON: the contract's fields, and a lossless round trip.
  const auto j = m.to_json();
  for (const char* k : {"label", "model_dir", "runtime", "runs", "warmup", "median_tokens_per_s", "relative_mad",
                        "stable", "timed_samples", "spec", "note"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["runs"][0].size(), 8u);
  EXPECT_EQ(ThroughputMeasurement::from_json(j, "m.json").to_json().dump(), j.dump());
}

TEST(ThroughputRun, BatchLayoutsProduceTheSameWork) {
  ThroughputSpec s = tiny();
  s.concurrency = 3;
  s.num_prompts_override = 5;  // slots free at different times
  for (int64_t batch : {1, 2, 3}) {
    RunnerSettings rs;
    rs.decode_batch = batch;
    const auto w = open_workload(QLOOM_DEMO_MODEL_DIR, s, rs);
    EXPECT_EQ(w->settings().decode_batch, batch);
    const RunSample r = w->run();
    EXPECT_EQ(r.output_tokens, 5 * s.osl) << "decode_batch " << batch;
    EXPECT_EQ(r.prompt_tokens, 5 * s.isl);
  }
}

TEST(ThroughputRun, QuarkCheckpointRunsOnTheNativeRuntime) {
  test::TempDir tmp("tput");
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = tmp / "int8";
  o.quant_scheme = "int8";
  o.exclude_layers = {"*down_proj"};
  job::quantize_model(o);
  const ThroughputSpec s = tiny();
  const ThroughputMeasurement m = measure_throughput(tmp / "int8", "quantized", s);
  expect_sane(m, s, 20);
  EXPECT_NE(m.note.find("quark (native)"), std::string::npos) << m.note;
  EXPECT_NE(m.note.find("on native kernels"), std::string::npos) << m.note;
  ThroughputSpec sim = s;
  sim.runtime = "simulate";
  const ThroughputMeasurement ms = measure_throughput(tmp / "int8", "quantized", sim);
  expect_sane(ms, sim, 20);
  EXPECT_NE(ms.note.find("quark (simulate)"), std::string::npos) << ms.note;
  // Same vocabulary, same prompts: ABBA against the source model.
  const AbbaResult r = abba(QLOOM_DEMO_MODEL_DIR, tmp / "int8", s);
  ASSERT_EQ(r.legs.size(), 4u);
  EXPECT_EQ(r.legs[0].label, "baseline (A1)");
  EXPECT_EQ(r.legs[2].label, "quantized (B2)");
  EXPECT_EQ(r.legs[1].prompts_hash, r.legs[0].prompts_hash);
  EXPECT_DOUBLE_EQ(r.gain, abba_gain(r.a1, r.b1, r.b2, r.a2));
  EXPECT_DOUBLE_EQ(r.a1, r.legs[0].median_tokens_per_s);
  EXPECT_DOUBLE_EQ(r.a2, r.legs[3].median_tokens_per_s);
  double mad = 0;
  for (const auto& l : r.legs) mad = std::max(mad, l.relative_mad);
  EXPECT_DOUBLE_EQ(r.max_relative_mad, mad);
  EXPECT_EQ(AbbaResult::from_json(r.to_json(), "abba").to_json().dump(), r.to_json().dump());
}

TEST(ThroughputRun, BadSpecsAreRefusedBeforeRunning) {
  ThroughputSpec s = tiny();
  s.isl = 0;
  EXPECT_EQ(test::catch_error([&] { open_workload(QLOOM_DEMO_MODEL_DIR, s); }).item(), "--isl");
  s = tiny();
  s.concurrency = 0;
  Error e = test::catch_error([&] { measure_throughput(QLOOM_DEMO_MODEL_DIR, "x", s); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--bench-concurrency");
  s = tiny();
  s.isl = 510;  // + osl 4 > the demo's 512 positions
  e = test::catch_error([&] { open_workload(QLOOM_DEMO_MODEL_DIR, s); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--isl,--osl");
  s = tiny();
  s.server = "http://127.0.0.1:9";  // never contacted
  e = test::catch_error([&] { abba(QLOOM_DEMO_MODEL_DIR, QLOOM_DEMO_MODEL_DIR, s); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--server");
  ProtocolLimits l;
  l.max_timed_samples = 1;
  EXPECT_EQ(test::catch_error([&] { measure_throughput(QLOOM_DEMO_MODEL_DIR, "x", tiny(), l); }).kind(),
            ErrorKind::kUsage);
}

}  // namespace
}  // namespace qloom::perf
