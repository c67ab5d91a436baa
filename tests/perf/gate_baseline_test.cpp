// Baseline health on a copy of the demo model: the fingerprint (what changes
// it and what does not), a cache hit that does not run the model (the copy's
// weights are changed behind the cache's back, same header and size, and the
// hit still returns the first score; a recheck sees the change), a corrupt
// cache re-evaluated, health rules (ppl vs the vocabulary, gsm8k below the
// floor, kld by definition), and the JSON contract.
#include "qloom/perf/baseline_health.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

class GateBaseline : public ::testing::Test {
 protected:
  void SetUp() override { fs::copy(QLOOM_DEMO_MODEL_DIR, model(), fs::copy_options::recursive); }
  fs::path model() const { return tmp_ / "model"; }
  fs::path cache() const { return tmp_ / "cache"; }
  static GateSpec ppl_spec() {
    GateSpec s;
    s.task = "ppl";
    s.limit = 2;
    s.seq_len = 128;
    s.threads = 2;
    return s;
  }
  // Zeroes the last `bytes` of the weights' data (the header and size stay).
  void change_weights(size_t bytes) {
    const fs::path f = model() / "model.safetensors";
    const auto size = fs::file_size(f);
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(std::streamoff(size - bytes));
    const std::string zeros(bytes, '\0');
    io.write(zeros.data(), std::streamsize(bytes));
  }

  test::TempDir tmp_{"gate-base"};
  std::ostringstream log_;
};

TEST_F(GateBaseline, FingerprintCoversWhatDeterminesTheScore) {
  const GateSpec spec = ppl_spec();
  const std::string fp = baseline_fingerprint(model(), spec);
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(baseline_fingerprint(model(), spec), fp);
  GateSpec threads = spec;
  threads.threads = 1;
  EXPECT_EQ(baseline_fingerprint(model(), threads), fp);  // the score does not depend on it
  // A copy elsewhere is the same model.
  fs::copy(model(), tmp_ / "copy", fs::copy_options::recursive);
  EXPECT_EQ(baseline_fingerprint(tmp_ / "copy", spec), fp);

  GateSpec limit = spec;
  limit.limit = 3;
  EXPECT_NE(baseline_fingerprint(model(), limit), fp);
  GateSpec task = spec;
  task.task = "gsm8k";
  EXPECT_NE(baseline_fingerprint(model(), task), fp);
  GateSpec dataset = spec;
  dataset.dataset = "tinystories";
  EXPECT_NE(baseline_fingerprint(model(), dataset), fp);

  const nlohmann::ordered_json inputs = fingerprint_inputs(model(), spec);
  EXPECT_EQ(inputs["model"]["weights"][0]["name"], "model.safetensors");
  EXPECT_EQ(inputs["model"]["weights"][0]["header_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(inputs["limit"], 2);
  EXPECT_FALSE(inputs["qloom"]["version"].get<std::string>().empty());

  {
    std::ofstream cfg(model() / "config.json", std::ios::app);
    cfg << "\n";  // other bytes, same meaning
  }
  EXPECT_NE(baseline_fingerprint(model(), spec), fp);
  std::ofstream(tmp_ / "copy" / "tokenizer_config.json", std::ios::app) << " ";
  EXPECT_NE(baseline_fingerprint(tmp_ / "copy", spec), fp);
}

TEST_F(GateBaseline, ACacheHitDoesNotRunTheModel) {
  const GateSpec spec = ppl_spec();
  const BaselineHealth first = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "b1", &log_);
  EXPECT_FALSE(first.cached);
  EXPECT_TRUE(fs::is_regular_file(cache() / (first.fingerprint + ".json")));
  EXPECT_EQ(first.n, 2 * 127);
  EXPECT_TRUE(first.healthy) << first.reason;
  EXPECT_FALSE(first.floor.has_value());  // not applicable to perplexity
  EXPECT_NE(first.reason.find("does not apply"), std::string::npos) << first.reason;

  // Weights changed behind the cache's back (same header, same size): a run
  // would score differently; a hit returns the cached score.
  change_weights(4096);
  const BaselineHealth hit = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "b2", &log_);
  EXPECT_TRUE(hit.cached);
  EXPECT_EQ(hit.fingerprint, first.fingerprint);
  EXPECT_EQ(hit.score, first.score);
  EXPECT_EQ(hit.evaluated_at, first.evaluated_at);
  EXPECT_EQ(hit.samples_path, fs::absolute(tmp_ / "b2") / kSamplesFile);
  // out_dir rebuilt from the cache: the first run's files, byte for byte.
  for (const char* f : {kSamplesFile, kEvalReportFile})
    EXPECT_EQ(read_file(tmp_ / "b2" / f), read_file(tmp_ / "b1" / f)) << f;
  EXPECT_EQ(load_task_score(tmp_ / "b2").score, first.score);
  EXPECT_NE(log_.str().find("cache hit"), std::string::npos) << log_.str();

  // recheck runs the (changed) model and rewrites the cache.
  const BaselineHealth re = check_baseline(model(), spec, 0.03, cache(), true, tmp_ / "b3", &log_);
  EXPECT_FALSE(re.cached);
  EXPECT_NE(re.score, first.score);
  const BaselineHealth after = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "b4", &log_);
  EXPECT_TRUE(after.cached);
  EXPECT_EQ(after.score, re.score);
}

TEST_F(GateBaseline, ACorruptCacheIsReEvaluated) {
  const GateSpec spec = ppl_spec();
  const BaselineHealth first = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "b1", nullptr);
  const fs::path file = cache() / (first.fingerprint + ".json");
  nlohmann::ordered_json c = nlohmann::ordered_json::parse(read_file(file));
  c["task_score"]["score"] = 1.5;  // no longer what the samples say
  std::ofstream(file) << c.dump();
  const BaselineHealth again = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "b2", &log_);
  EXPECT_FALSE(again.cached);
  EXPECT_EQ(again.score, first.score);
  EXPECT_NE(log_.str().find("unusable"), std::string::npos) << log_.str();
  EXPECT_TRUE(check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "b3", nullptr).cached);  // repaired
}

TEST_F(GateBaseline, AccuracyBelowTheFloorIsUnhealthy) {
  GateSpec spec;
  spec.task = "gsm8k";
  spec.limit = 2;
  spec.threads = 2;
  // A 260K-parameter story model solves no grade-school maths.
  const BaselineHealth h = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "g1", &log_);
  EXPECT_EQ(h.metric, "exact_match,strict-match");
  EXPECT_EQ(h.score, 0.0);
  EXPECT_EQ(h.n, 2);
  EXPECT_FALSE(h.healthy);
  EXPECT_EQ(h.floor, 0.03);
  EXPECT_NE(h.reason.find("is below --baseline-floor 0.03"), std::string::npos) << h.reason;
  EXPECT_NE(log_.str().find("UNHEALTHY"), std::string::npos);
  // The same score at a floor of 0 (cached: no second run) is healthy.
  const BaselineHealth zero = check_baseline(model(), spec, 0.0, cache(), false, tmp_ / "g2", nullptr);
  EXPECT_TRUE(zero.cached);
  EXPECT_TRUE(zero.healthy);
  EXPECT_EQ(zero.fingerprint, h.fingerprint);  // the floor judges the score, it does not make it

  EXPECT_EQ(catch_error([&] { check_baseline(model(), spec, 1.5, cache(), false, tmp_ / "g3", nullptr); }).item(),
            "--baseline-floor");
  EXPECT_EQ(catch_error([&] { check_baseline(model(), spec, -0.1, cache(), false, tmp_ / "g3", nullptr); }).kind(),
            ErrorKind::kUsage);
}

TEST_F(GateBaseline, KldIsHealthyByDefinition) {
  GateSpec spec;
  spec.task = "kld";
  spec.reference_dir = model().string();
  const BaselineHealth h = check_baseline(model(), spec, 0.03, cache(), false, tmp_ / "k", nullptr);
  EXPECT_TRUE(h.healthy);
  EXPECT_EQ(h.score, 0.0);
  EXPECT_FALSE(h.floor.has_value());
  EXPECT_EQ(load_task_score(tmp_ / "k").reference, load_task_score(tmp_ / "k").model);
}

TEST_F(GateBaseline, JsonHasTheContractKeysAndRoundTrips) {
  const BaselineHealth h = check_baseline(model(), ppl_spec(), 0.03, cache(), false, tmp_ / "b", nullptr);
  const nlohmann::ordered_json j = to_json(h);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"fingerprint", "task", "metric", "score", "stderr", "n", "floor", "healthy",
                                            "reason", "cached", "evaluated_at", "samples_path"}));
  EXPECT_TRUE(j["floor"].is_null());
  EXPECT_EQ(to_json(baseline_health_from_json(nlohmann::json::parse(j.dump()), "state.json")).dump(), j.dump());
  // A hit gives the same JSON but for "cached" and the out_dir.
  nlohmann::ordered_json hit = to_json(check_baseline(model(), ppl_spec(), 0.03, cache(), false, tmp_ / "b", nullptr));
  EXPECT_TRUE(hit["cached"].get<bool>());
  hit["cached"] = false;
  EXPECT_EQ(hit.dump(), j.dump());

  nlohmann::json gsm = nlohmann::json::parse(j.dump());
  gsm["floor"] = 0.03;
  EXPECT_EQ(baseline_health_from_json(gsm, "state.json").floor, 0.03);
  gsm.erase("floor");
  EXPECT_EQ(catch_error([&] { baseline_health_from_json(gsm, "state.json"); }).item(), "floor");
}

}  // namespace
}  // namespace qloom::perf
