// Measured sensitivity on the demo model: native is exactly 0, 4-bit hurts
// more than fp8, unfit pairs are named, the table is byte-identical for 1
// and 2 threads, resumes without re-measuring, stops on request, and its
// JSON round-trips strictly.
#include <gtest/gtest.h>

#include "qloom/io/model_dir.h"
#include "qloom/perf/sensitivity.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using test::catch_error;

const io::ModelDir& demo() {
  static const io::ModelDir d = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR, true);
  return d;
}

const PartitionPlan& plan() {
  static const PartitionPlan p = plan_partitions(demo(), {});
  return p;
}

WindowOptions windows(unsigned threads) {
  WindowOptions w;
  w.windows = 3;
  w.seq_len = 96;
  w.threads = threads;
  return w;
}

const Reference& reference() {
  static const auto r = Reference::build(demo(), plan(), windows(1));
  return *r;
}

SensitivityOptions options(unsigned threads) {
  SensitivityOptions o;
  o.precisions = parse_precision_candidates({"native", "fp8", "int8", "int4_wo_32", "mxfp4"});
  o.kv_fp8 = true;
  o.threads = threads;
  return o;
}

const SensitivityRun& full_run() {
  static const SensitivityRun r = measure_sensitivity(demo(), plan(), reference(), options(1));
  return r;
}

TEST(SearchSensitivity, ReferenceHoldsWindowsLogitsAndObservations) {
  const Reference& ref = reference();
  ASSERT_EQ(ref.windows().size(), 3u);
  EXPECT_EQ(ref.vocab(), 512);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_LE(ref.windows()[i].size(), 96u);
    EXPECT_EQ(ref.base_logits(i).size(), ref.windows()[i].size() * 512);
  }
  EXPECT_EQ(ref.scored_tokens(), int64_t(ref.windows()[0].size() + ref.windows()[1].size() + ref.windows()[2].size() - 3));
  EXPECT_EQ(ref.input_amax().size(), 35u);   // every unit linear
  EXPECT_EQ(ref.output_amax().size(), 10u);  // k_proj and v_proj of 5 layers
  EXPECT_GT(ref.input_amax().at("model.layers.0.self_attn.q_proj"), 0.0f);
}

TEST(SearchSensitivity, NativeIsExactlyZero) {
  const SensitivityEntry e = measure_unit(demo(), plan(), reference(), "dense_mlp", get_precision("native"), 1);
  EXPECT_EQ(e.status, "measured");
  EXPECT_EQ(e.kld_mean, 0.0);
  EXPECT_EQ(e.top1, 1.0);
  EXPECT_EQ(e.ppl_ratio, 1.0);
  EXPECT_EQ(e.tokens, reference().scored_tokens());
  EXPECT_EQ(full_run().table.kld("self_attn", "native"), 0.0);
}

TEST(SearchSensitivity, TableShapeUnfitPairsAndSanity) {
  const SensitivityTable& t = full_run().table;
  EXPECT_TRUE(t.complete);
  EXPECT_EQ(t.precisions, (std::vector<std::string>{"fp8", "int8", "int4_wo_32", "mxfp4"}));
  ASSERT_EQ(t.entries.size(), 2u * 4 + 1);
  EXPECT_EQ(t.entries[0].unit, "self_attn");
  EXPECT_EQ(t.entries[0].precision, "fp8");
  EXPECT_EQ(t.entries.back().unit, "kv_cache");
  EXPECT_EQ(t.entries.back().precision, "fp8");
  // The demo MLP (gate/up [172,64], down [64,172]) cannot hold int4 or MXFP4.
  for (const char* p : {"int4_wo_32", "mxfp4"}) {
    const SensitivityEntry* e = t.find("dense_mlp", p);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->status, "unfit");
    EXPECT_NE(e->reason.find("model.layers.0.mlp."), std::string::npos) << e->reason;
    EXPECT_FALSE(t.fits("dense_mlp", p));
  }
  EXPECT_EQ(full_run().measured, 2u * 4 + 1 - 2);
  for (const SensitivityEntry& e : t.entries) {
    if (e.status != "measured") continue;
    EXPECT_GT(e.kld_mean, 0.0) << e.unit << " " << e.precision;
    EXPECT_GT(e.kld_stderr, 0.0);
    EXPECT_LE(e.top1, 1.0);
    EXPECT_GT(e.top1, 0.5);
  }
  // 4-bit weights hurt more than fp8 on the unit that holds both.
  EXPECT_GT(t.kld("self_attn", "int4_wo_32"), t.kld("self_attn", "fp8"));
  EXPECT_GT(t.kld("self_attn", "mxfp4"), t.kld("self_attn", "fp8"));
  EXPECT_EQ(catch_error([&] { (void)t.kld("dense_mlp", "mxfp4"); }).kind(), ErrorKind::kInternal);
}

TEST(SearchSensitivity, IdenticalJsonForOneAndTwoThreads) {
  const auto ref2 = Reference::build(demo(), plan(), windows(2));
  const SensitivityRun two = measure_sensitivity(demo(), plan(), *ref2, options(2));
  EXPECT_EQ(to_json(two.table).dump(2), to_json(full_run().table).dump(2));
  EXPECT_EQ(ref2->input_amax(), reference().input_amax());
}

TEST(SearchSensitivity, ResumeKeepsStoredEntriesAndMeasuresTheRest) {
  SensitivityTable partial = full_run().table;
  partial.entries.erase(partial.entries.begin() + 2, partial.entries.end());
  partial.complete = false;
  const SensitivityTable stored = sensitivity_from_json(nlohmann::json::parse(to_json(partial).dump()));
  std::vector<size_t> progress_done;
  SensitivityOptions o = options(1);
  o.progress = [&](const SensitivityProgress& p) {
    progress_done.push_back(p.done);
    EXPECT_EQ(p.total, 9u);
    EXPECT_EQ(p.table->entries.size(), p.done);
  };
  const SensitivityRun resumed = measure_sensitivity(demo(), plan(), reference(), o, &stored);
  EXPECT_EQ(resumed.measured, 9u - 2 - 2);  // two stored, two unfit
  EXPECT_EQ(to_json(resumed.table).dump(), to_json(full_run().table).dump());
  EXPECT_EQ(progress_done, (std::vector<size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // A table measured on other windows is not reused.
  SensitivityTable other = stored;
  other.windows = 8;
  const Error e = catch_error([&] { (void)measure_sensitivity(demo(), plan(), reference(), options(1), &other); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "mix_precision_search.sensitivity.windows");
}

TEST(SearchSensitivity, StopReturnsWhatWasMeasured) {
  SensitivityOptions o = options(1);
  int polls = 0;
  o.stop = [&] { return ++polls > 5; };  // entry 1 polls 1 + 3 windows; entry 2 stops mid-way
  const SensitivityRun r = measure_sensitivity(demo(), plan(), reference(), o);
  EXPECT_FALSE(r.table.complete);
  ASSERT_EQ(r.table.entries.size(), 1u);
  EXPECT_EQ(r.table.entries[0].kld_mean, full_run().table.entries[0].kld_mean);
}

TEST(SearchSensitivity, JsonRoundTripAndStrictReading) {
  const auto j = to_json(full_run().table);
  EXPECT_EQ(j["entries"][0].size(), 8u);  // unit precision status kld_mean kld_stderr top1 ppl_ratio tokens
  EXPECT_EQ(to_json(sensitivity_from_json(nlohmann::json::parse(j.dump()))).dump(), j.dump());
  nlohmann::json bad = nlohmann::json::parse(j.dump());
  bad["entries"][3].erase("kld_mean");
  bad["entries"][3]["status"] = "measured";
  Error e = catch_error([&] { (void)sensitivity_from_json(bad); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "mix_precision_search.sensitivity.entries[3].kld_mean");
  bad = nlohmann::json::parse(j.dump());
  bad["entries"][0]["status"] = "guessed";
  e = catch_error([&] { (void)sensitivity_from_json(bad); });
  EXPECT_EQ(e.item(), "mix_precision_search.sensitivity.entries[0].status");
  bad = nlohmann::json::parse(j.dump());
  bad["granularity"] = "block";
  EXPECT_EQ(catch_error([&] { (void)sensitivity_from_json(bad); }).kind(), ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace qloom::perf
