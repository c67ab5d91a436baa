// The eval phase of `qloom run` on the demo model (models/stories260K-hf-bf16)
// and an int4_wo_32 copy quantized here: the three files and the schema, the
// gap recomputed from the .md headlines, the source cache across attempts,
// the threshold file, gsm8k with a source score of 0, kld, the skip classes as
// classify_workspace reads them, and the same report from the same inputs.
#include "qloom/agent/eval_phase.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/outcomes.h"
#include "qloom/core/error.h"
#include "qloom/job/quantize_job.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using test::read_file;

class EvalPhase : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new test::TempDir("evalphase");
    job::QuantizeOptions o;
    o.model_dir = QLOOM_DEMO_MODEL_DIR;
    o.output_dir = root_->path() / "int4";
    o.quant_scheme = "int4_wo_32";
    o.exclude_layers = {"*down_proj"};  // in_features 172
    o.exclude_unsupported = true;
    o.threads = 2;
    job::quantize_model(o);
  }
  static void TearDownTestSuite() { delete root_; }

  static fs::path quantized() { return root_->path() / "int4"; }

  // A fresh workspace.
  fs::path workspace(const std::string& name) {
    const fs::path ws = root_->path() / ("ws-" + name);
    fs::create_directories(ws);
    return ws;
  }

  // ppl, 4 windows of 128 tokens.
  EvalPhaseOptions ppl_options(const fs::path& ws) {
    EvalPhaseOptions o;
    o.workspace = ws;
    o.source_dir = QLOOM_DEMO_MODEL_DIR;
    o.quantized_dir = quantized();
    o.metric_name = "ppl";
    o.limit = 4;
    o.seq_len = 128;
    o.threads = 2;
    o.log = &log_;
    return o;
  }

  static nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_file(p)); }

  // The number after "**<label>:** " on the headline line of an .md file.
  static double headline(const fs::path& md, const std::string& label) {
    const std::string text = read_file(md);
    std::smatch m;
    const std::regex re("\\*\\*" + label + ":\\*\\* ([0-9.]+)\\n");
    if (!std::regex_search(text, m, re)) {
      ADD_FAILURE() << "no **" << label << ":** headline in " << md << ":\n" << text;
      return NAN;
    }
    return std::stod(m[1].str());
  }

  static std::string outcome(const fs::path& ws) {
    const Classification c = classify_workspace(ws);
    return c.outcome ? std::string(c.outcome->id) : "success";
  }

  std::ostringstream log_;
  static test::TempDir* root_;
};
test::TempDir* EvalPhase::root_ = nullptr;

TEST_F(EvalPhase, PplWritesTheThreeFilesAndAValidReport) {
  const fs::path ws = workspace("ppl");
  const EvalPhaseResult r = run_eval_phase(ppl_options(ws));
  ASSERT_FALSE(r.skipped) << r.skip_reason << "\n" << log_.str();
  for (const char* f : {"source_eval.md", "quantized_eval.md", "eval_report.json", "source_eval_samples.json",
                        "quantized_eval_samples.json"})
    EXPECT_TRUE(fs::is_regular_file(ws / f)) << f;
  EXPECT_FALSE(fs::exists(ws / "eval_skipped.txt"));
  EXPECT_FALSE(r.source_cached);
  EXPECT_EQ(r.metric.task, "ppl");
  EXPECT_EQ(r.metric.dataset, "wikitext2");
  EXPECT_EQ(r.limit_used, 4);
  EXPECT_EQ(r.samples_used, 4);
  EXPECT_GT(r.samples_total, 4);

  const nlohmann::json j = read_json(ws / "eval_report.json");
  EXPECT_TRUE(check_artifact("eval_report", j).empty()) << j.dump(2);
  // The seed's six keys first, in its order, then n, limit and the standard errors.
  const nlohmann::ordered_json oj = nlohmann::ordered_json::parse(read_file(ws / "eval_report.json"));
  const std::vector<std::string> first = {"metric_name", "dataset",          "backend",   "source_score",
                                          "quantized_score", "relative_gap", "n",         "limit",
                                          "source_stderr",   "quantized_stderr", "gap_stderr"};
  std::vector<std::string> keys;
  for (const auto& [k, v] : oj.items()) keys.push_back(k);
  ASSERT_GE(keys.size(), first.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + long(first.size())), first);
  EXPECT_EQ(j["metric_name"], "ppl");
  EXPECT_EQ(j["dataset"], "wikitext2");
  EXPECT_EQ(j["backend"], "qloom");
  EXPECT_EQ(j["n"], 4 * 127);
  EXPECT_EQ(j["n_unit"], "tokens");
  EXPECT_EQ(j["limit"], 4);
  EXPECT_EQ(j["limit_unit"], "windows");
  EXPECT_EQ(j["seq_len"], 128);
  EXPECT_EQ(j["protocol"], "quark");
  EXPECT_EQ(j["verdict"], verdict_name(r.verdict));
  EXPECT_EQ(j["threshold_source"], "default");
  EXPECT_EQ(j["relative_gap"].get<double>(), r.gap.relative_gap);

  // The gap from the two .md headlines (4 decimals) matches the report's.
  const double s = headline(ws / "source_eval.md", "Perplexity");
  const double q = headline(ws / "quantized_eval.md", "Perplexity");
  EXPECT_NEAR(s, j["source_score"].get<double>(), 5e-5);
  EXPECT_NEAR(q, j["quantized_score"].get<double>(), 5e-5);
  EXPECT_NEAR(std::max(0.0, (q - s) / s), j["relative_gap"].get<double>(), 1e-5);
  EXPECT_GT(j["relative_gap"].get<double>(), 0.0);  // int4 loses something on a 260K model

  // The samples files: per-token NLLs whose exp(mean) is each headline.
  for (const auto& [file, key] : {std::pair{"source_eval_samples.json", "source_score"},
                                  std::pair{"quantized_eval_samples.json", "quantized_score"}}) {
    const nlohmann::json sj = read_json(ws / file);
    const auto nll = sj["token_nll"].get<std::vector<double>>();
    ASSERT_EQ(nll.size(), 508u) << file;
    const double ppl = std::exp(std::accumulate(nll.begin(), nll.end(), 0.0) / double(nll.size()));
    EXPECT_NEAR(ppl / j[key].get<double>(), 1.0, 1e-12) << file;
    EXPECT_EQ(sj["limit_used"], 4) << file;
  }
  const std::string md = read_file(ws / "source_eval.md");
  EXPECT_EQ(md.rfind("# Source model evaluation\n\n**Perplexity:** ", 0), 0u) << md;
  EXPECT_NE(md.find("| ppl  | ppl "), std::string::npos) << md;
  EXPECT_NE(md.find("- limit: 4 windows (of "), std::string::npos) << md;
  EXPECT_NE(md.find("- n: 508 tokens scored"), std::string::npos) << md;
  EXPECT_NE(md.find("- dataset: wikitext2 (quark protocol, 128-token windows)"), std::string::npos) << md;
}

TEST_F(EvalPhase, SecondAttemptReusesTheSourceEvaluation) {
  const fs::path ws = workspace("cache");
  const EvalPhaseResult first = run_eval_phase(ppl_options(ws));
  ASSERT_FALSE(first.skipped) << first.skip_reason;
  const std::string report1 = read_file(ws / "eval_report.json");
  // A marker survives only when source_eval.md is not rewritten.
  std::ofstream(ws / "source_eval.md", std::ios::app) << "<!-- marker -->\n";
  const std::string source_md = read_file(ws / "source_eval.md");
  const auto mtime = fs::last_write_time(ws / "source_eval_samples.json");
  fs::remove(ws / "quantized_eval.md");

  const EvalPhaseResult second = run_eval_phase(ppl_options(ws));
  ASSERT_FALSE(second.skipped) << second.skip_reason;
  EXPECT_TRUE(second.source_cached);
  EXPECT_EQ(second.source_seconds, 0.0);
  EXPECT_EQ(read_file(ws / "source_eval.md"), source_md);
  EXPECT_EQ(fs::last_write_time(ws / "source_eval_samples.json"), mtime);
  EXPECT_TRUE(fs::is_regular_file(ws / "quantized_eval.md"));  // every attempt
  EXPECT_EQ(read_file(ws / "eval_report.json"), report1);     // same inputs, same report
  EXPECT_EQ(second.gap.relative_gap, first.gap.relative_gap);
  EXPECT_EQ(second.limit_used, 4);

  // Another limit is another source evaluation.
  EvalPhaseOptions o = ppl_options(ws);
  o.limit = 3;
  const EvalPhaseResult third = run_eval_phase(o);
  EXPECT_FALSE(third.source_cached);
  EXPECT_EQ(read_file(ws / "source_eval.md").find("marker"), std::string::npos);
  EXPECT_EQ(read_json(ws / "eval_report.json")["limit"], 3);
  EXPECT_EQ(read_json(ws / "eval_report.json")["n"], 3 * 127);

  // So is a source_eval.md whose samples file is gone.
  fs::remove(ws / "source_eval_samples.json");
  EXPECT_FALSE(run_eval_phase(o).source_cached);
  EXPECT_TRUE(run_eval_phase(o).source_cached);
}

TEST_F(EvalPhase, SameInputsGiveTheSameFilesInAnotherWorkspace) {
  const fs::path a = workspace("same-a"), b = workspace("same-b");
  run_eval_phase(ppl_options(a));
  run_eval_phase(ppl_options(b));
  for (const char* f : {"eval_report.json", "source_eval_samples.json", "quantized_eval_samples.json"})
    EXPECT_EQ(read_file(a / f), read_file(b / f)) << f;
}

TEST_F(EvalPhase, ThresholdComesFromTheWorkspaceFileUnlessTheCallerGivesOne) {
  const fs::path ws = workspace("threshold");
  std::ofstream(ws / "eval_gap_threshold.txt") << "0.5\n";
  EvalPhaseResult r = run_eval_phase(ppl_options(ws));
  EXPECT_EQ(r.threshold.value, 0.5);
  EXPECT_EQ(r.threshold.source, "eval_gap_threshold.txt");
  EXPECT_EQ(r.verdict, judge(r.gap, 0.5));
  nlohmann::json j = read_json(ws / "eval_report.json");
  EXPECT_EQ(j["threshold"], 0.5);
  EXPECT_EQ(j["threshold_source"], "eval_gap_threshold.txt");

  EvalPhaseOptions o = ppl_options(ws);
  o.caller_threshold = 0.0;  // nothing may be lost: the measured loss fails
  r = run_eval_phase(o);
  EXPECT_EQ(r.threshold.source, "caller");
  EXPECT_EQ(r.verdict, judge(r.gap, 0.0));
  EXPECT_NE(r.verdict, GateVerdict::kPass);
  EXPECT_EQ(read_json(ws / "eval_report.json")["verdict"], verdict_name(r.verdict));

  std::ofstream(ws / "eval_gap_threshold.txt") << "five percent\n";
  EXPECT_EQ(test::catch_error([&] { run_eval_phase(ppl_options(ws)); }).kind(), ErrorKind::kInvalidInput);
}

TEST_F(EvalPhase, Gsm8kWithASourceScoreOfZero) {
  const fs::path ws = workspace("gsm8k");
  EvalPhaseOptions o = ppl_options(ws);
  o.metric_name = "gsm8k";
  o.limit = 2;
  o.max_gen_toks = 24;
  const EvalPhaseResult r = run_eval_phase(o);
  ASSERT_FALSE(r.skipped) << r.skip_reason;
  EXPECT_EQ(r.metric.headline, "exact_match,strict-match");
  EXPECT_EQ(r.gap.n, 2u);
  EXPECT_EQ(r.gap.source_score, 0.0);  // a 260K-parameter story model solves no gsm8k problem
  EXPECT_TRUE(std::isfinite(r.gap.relative_gap));
  EXPECT_EQ(r.gap.relative_gap, 0.0);  // a higher-is-better score cannot lose from 0
  const nlohmann::json j = read_json(ws / "eval_report.json");
  EXPECT_TRUE(check_artifact("eval_report", j).empty()) << j.dump(2);
  EXPECT_EQ(j["metric_name"], "gsm8k");
  EXPECT_EQ(j["dataset"], "gsm8k");
  EXPECT_EQ(j["n"], 2);
  EXPECT_EQ(j["n_unit"], "questions");
  EXPECT_EQ(j["limit"], 2);
  EXPECT_EQ(j["relative_gap"], 0.0);
  EXPECT_EQ(j["secondary"]["metric"], "exact_match,flexible-extract");
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_NE(j["notes"][0].get<std::string>().find("source score is 0"), std::string::npos) << j["notes"];
  EXPECT_EQ(headline(ws / "source_eval.md", "Accuracy"), 0.0);
  const std::string md = read_file(ws / "quantized_eval.md");
  EXPECT_NE(md.find("exact_match,strict-match"), std::string::npos) << md;
  EXPECT_NE(md.find("- n: 2 questions"), std::string::npos) << md;
  const nlohmann::json sj = read_json(ws / "source_eval_samples.json");
  EXPECT_EQ(sj["strict_correct"].size(), 2u);
  EXPECT_EQ(sj["flexible_correct"].size(), 2u);
}

TEST_F(EvalPhase, KldGatesOnPerplexityAndRecordsTheDivergence) {
  const fs::path ws = workspace("kld");
  EvalPhaseOptions o = ppl_options(ws);
  o.metric_name = "KL-divergence";
  o.limit = 2;
  const EvalPhaseResult r = run_eval_phase(o);
  ASSERT_FALSE(r.skipped) << r.skip_reason;
  EXPECT_EQ(r.metric.metric_name, "kld");
  const nlohmann::json j = read_json(ws / "eval_report.json");
  EXPECT_TRUE(check_artifact("eval_report", j).empty()) << j.dump(2);
  EXPECT_EQ(j["metric_name"], "kld");
  EXPECT_EQ(j["headline"], "perplexity");
  EXPECT_EQ(j["n"], 2 * 127);
  EXPECT_GT(j["kld"]["mean"].get<double>(), 0.0);
  EXPECT_LE(j["kld"]["top1_agreement"].get<double>(), 1.0);
  EXPECT_NEAR(headline(ws / "source_eval.md", "Perplexity"), j["source_score"].get<double>(), 5e-5);
  EXPECT_NEAR(headline(ws / "quantized_eval.md", "Perplexity"), j["quantized_score"].get<double>(), 5e-5);
  EXPECT_NE(read_file(ws / "quantized_eval.md").find("KL divergence statistics"), std::string::npos);
  // The gate's perplexities are those of a plain ppl run on the same windows.
  const fs::path ws2 = workspace("kld-ppl");
  EvalPhaseOptions p = ppl_options(ws2);
  p.limit = 2;
  const EvalPhaseResult pr = run_eval_phase(p);
  EXPECT_NEAR(pr.gap.source_score / r.gap.source_score, 1.0, 1e-9);
  EXPECT_NEAR(pr.gap.quantized_score / r.gap.quantized_score, 1.0, 1e-9);
}

TEST_F(EvalPhase, HellaswagGatesOnAccNormOverTheSameDocuments) {
  const fs::path ws = workspace("hellaswag");
  EvalPhaseOptions o = ppl_options(ws);
  o.metric_name = "HellaSwag";
  o.limit = 3;
  const EvalPhaseResult r = run_eval_phase(o);
  ASSERT_FALSE(r.skipped) << r.skip_reason;
  EXPECT_EQ(r.metric.task, "hellaswag");
  EXPECT_EQ(r.metric.headline, "acc_norm");
  EXPECT_EQ(r.gap.n, 3u);
  const nlohmann::json j = read_json(ws / "eval_report.json");
  EXPECT_TRUE(check_artifact("eval_report", j).empty()) << j.dump(2);
  EXPECT_EQ(j["metric_name"], "hellaswag");
  EXPECT_EQ(j["dataset"], "hellaswag");
  EXPECT_EQ(j["n_unit"], "documents");
  EXPECT_EQ(j["limit_unit"], "documents");
  EXPECT_EQ(j["samples_total"], 200);
  EXPECT_EQ(j["secondary"]["metric"], "acc");
  const nlohmann::json sj = read_json(ws / "source_eval_samples.json");
  ASSERT_EQ(sj["acc_norm_correct"].size(), 3u);
  EXPECT_EQ(sj["acc_correct"].size(), 3u);
  double sum = 0;
  for (const auto& x : sj["acc_norm_correct"]) sum += x.get<int>();
  EXPECT_DOUBLE_EQ(j["source_score"].get<double>(), sum / 3.0);
  EXPECT_NEAR(headline(ws / "source_eval.md", "Accuracy"), j["source_score"].get<double>(), 5e-5);
  EXPECT_NE(read_file(ws / "quantized_eval.md").find("- n: 3 documents"), std::string::npos);
  // A second attempt reuses the source's documents.
  const EvalPhaseResult again = run_eval_phase(o);
  EXPECT_TRUE(again.source_cached);
  EXPECT_EQ(again.gap.source_score, r.gap.source_score);
  // A headline that no longer matches its samples (an edited .md) is not reused.
  std::string md = read_file(ws / "source_eval.md");
  md.replace(md.find("**Accuracy:** "), 20, "**Accuracy:** 0.9999");
  std::ofstream(ws / "source_eval.md") << md;
  EXPECT_FALSE(run_eval_phase(o).source_cached);
}

TEST_F(EvalPhase, MetricsWithoutAnOfflineEvaluatorAreEnvUnavailable) {
  for (const auto& [metric, dataset] : std::vector<std::pair<std::string, std::string>>{
           {"mmlu", ""}, {"hellaswag", "c4"}, {"bloom_room_zoom_score", ""}, {"ppl", "c4"}, {"gsm8k", "wikitext2"},
           {"ppl", "/nonexistent/qloom/vllm_sglang_quantized_load.txt"}}) {
    const fs::path ws = workspace("skip-" + std::to_string(std::hash<std::string>()(metric + dataset)));
    EvalPhaseOptions o = ppl_options(ws);
    o.metric_name = metric;
    o.eval_dataset = dataset;
    const EvalPhaseResult r = run_eval_phase(o);
    EXPECT_TRUE(r.skipped) << metric;
    EXPECT_EQ(r.skip_outcome, "eval_env_unavailable") << metric;
    EXPECT_NE(r.skip_reason.find("not available offline"), std::string::npos) << r.skip_reason;
    EXPECT_NE(r.skip_reason.find(dataset.empty() ? metric.substr(0, 3) : dataset.substr(0, 3)), std::string::npos)
        << r.skip_reason;
    EXPECT_EQ(read_file(ws / "eval_skipped.txt"), r.skip_reason + "\n");
    EXPECT_EQ(outcome(ws), "eval_env_unavailable") << r.skip_reason;
    EXPECT_FALSE(fs::exists(ws / "source_eval.md")) << metric;  // nothing was run
    EXPECT_FALSE(fs::exists(ws / "eval_report.json")) << metric;
  }
}

TEST_F(EvalPhase, ABrokenQuantizedModelIsQuantizedLoadFailed) {
  // Truncated weights: the workspace path holds "qloom", which the reason must
  // not let the classifier read as out-of-memory.
  const fs::path broken = root_->path() / "broken-qloom-int4";
  fs::copy(quantized(), broken, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(broken))
    if (e.path().extension() == ".safetensors") fs::resize_file(e.path(), 100);
  const fs::path ws = workspace("broken");
  std::ofstream(ws / "eval_report.json") << "{}";  // from an earlier attempt: removed
  EvalPhaseOptions o = ppl_options(ws);
  o.quantized_dir = broken;
  EvalPhaseResult r = run_eval_phase(o);
  ASSERT_TRUE(r.skipped);
  EXPECT_EQ(r.skip_outcome, "quantized_load_failed");
  EXPECT_EQ(r.skip_reason.rfind("quantized_load: the engine could not load the quantized model: ", 0), 0u)
      << r.skip_reason;
  EXPECT_NE(r.skip_reason.find("broken-qlo\xE2\x80\x8Bom-int4"), std::string::npos) << r.skip_reason;  // defused
  EXPECT_EQ(outcome(ws), "quantized_load_failed") << r.skip_reason;
  EXPECT_FALSE(fs::exists(ws / "eval_report.json"));
  EXPECT_TRUE(fs::exists(ws / "source_eval.md"));  // the source was fine

  // A missing directory too; the source evaluation is reused.
  o.quantized_dir = root_->path() / "no-such-model";
  r = run_eval_phase(o);
  EXPECT_TRUE(r.source_cached);
  EXPECT_EQ(r.skip_outcome, "quantized_load_failed");
  EXPECT_EQ(outcome(ws), "quantized_load_failed") << r.skip_reason;

  // The next attempt with a good model clears eval_skipped.txt.
  r = run_eval_phase(ppl_options(ws));
  EXPECT_FALSE(r.skipped);
  EXPECT_FALSE(fs::exists(ws / "eval_skipped.txt"));
  EXPECT_TRUE(r.source_cached);
}

TEST_F(EvalPhase, ASourceThatCannotBeEvaluatedIsEnvUnavailable) {
  const fs::path ws = workspace("nosource");
  EvalPhaseOptions o = ppl_options(ws);
  o.source_dir = root_->path() / "no-such-source";
  const EvalPhaseResult r = run_eval_phase(o);
  EXPECT_EQ(r.skip_outcome, "eval_env_unavailable") << r.skip_reason;
  EXPECT_EQ(outcome(ws), "eval_env_unavailable") << r.skip_reason;
}

TEST_F(EvalPhase, BadOptionsThrow) {
  const fs::path ws = workspace("bad");
  EvalPhaseOptions o = ppl_options(ws);
  o.limit = 0;
  EXPECT_EQ(test::catch_error([&] { run_eval_phase(o); }).kind(), ErrorKind::kUsage);
  o = ppl_options(ws);
  o.protocol = "lm-eval";
  EXPECT_EQ(test::catch_error([&] { run_eval_phase(o); }).kind(), ErrorKind::kUsage);
  o = ppl_options(root_->path() / "no-such-workspace");
  EXPECT_EQ(test::catch_error([&] { run_eval_phase(o); }).kind(), ErrorKind::kNotFound);
}

TEST(EvalSkipFor, EachFailureBecomesTheOutcomeTheClassifierReads) {
  test::TempDir ws("oom-qloom");
  auto classify = [&](const EvalSkip& s) {
    std::ofstream(ws.path() / "eval_skipped.txt") << s.reason << "\n";
    const Classification c = classify_workspace(ws.path());
    return c.outcome ? std::string(c.outcome->id) : "success";
  };
  const std::string path = (ws.path() / "model.safetensors").string();  // holds "qloom" and "oom"
  using eval::EvalStage;
  struct Case {
    std::exception_ptr error;
    std::string role;
    EvalStage stage;
    std::string want;
  };
  const std::vector<Case> cases = {
      {std::make_exception_ptr(std::bad_alloc()), "source", EvalStage::kScore, "eval_oom"},
      {std::make_exception_ptr(std::bad_alloc()), "quantized", EvalStage::kLoadModel, "eval_oom"},
      {std::make_exception_ptr(Error(ErrorKind::kIo, path, "", "mmap failed: Cannot allocate memory")), "quantized",
       EvalStage::kLoadModel, "eval_oom"},
      {std::make_exception_ptr(Error(ErrorKind::kInvalidInput, path, "", "truncated")), "quantized",
       EvalStage::kLoadModel, "quantized_load_failed"},
      {std::make_exception_ptr(Error(ErrorKind::kUnsupported, path, "quantization_config", "OOM-free vLLM")),
       "quantized", EvalStage::kScore, "quantized_load_failed"},
      {std::make_exception_ptr(Error(ErrorKind::kNotFound, path, "", "SGLang vllm quantized_load OOM")), "source",
       EvalStage::kLoadModel, "eval_env_unavailable"},
      {std::make_exception_ptr(Error(ErrorKind::kNotFound, path, "", "no data")), "quantized", EvalStage::kPrepare,
       "eval_env_unavailable"},
      {std::make_exception_ptr(Error(ErrorKind::kInvalidInput, path, "", "bad source")), "quantized",
       EvalStage::kLoadSource, "eval_env_unavailable"},
  };
  for (const Case& c : cases) {
    const EvalSkip s = eval_skip_for(c.error, c.role, c.stage);
    EXPECT_EQ(s.outcome, c.want) << s.reason;
    EXPECT_EQ(classify(s), c.want) << s.reason;
    EXPECT_EQ(s.reason.find('\n'), std::string::npos);
  }
  EXPECT_EQ(test::catch_error([&] {
              eval_skip_for(std::make_exception_ptr(Error(ErrorKind::kUsage, "", "--limit", "bad")), "source",
                            EvalStage::kPrepare);
            }).kind(),
            ErrorKind::kUsage);
  EXPECT_THROW(eval_skip_for(std::make_exception_ptr(std::logic_error("bug")), "source", EvalStage::kScore),
               std::logic_error);
}

TEST(EvalReportSchema, RequiresTheSeedKeysAndTheSampleSize) {
  const nlohmann::json ok = {{"metric_name", "gsm8k"}, {"dataset", "gsm8k"},   {"backend", "vllm"},
                             {"source_score", 0.512},  {"quantized_score", 0.498}, {"relative_gap", 0.0273},
                             {"n", 1319},              {"limit", nullptr},     {"source_stderr", 0.0138},
                             {"quantized_stderr", 0.0138}, {"gap_stderr", 0.01}};
  EXPECT_TRUE(check_artifact("eval_report", ok).empty());
  for (const auto& [key, value] : ok.items()) {
    nlohmann::json j = ok;
    j.erase(key);
    EXPECT_FALSE(check_artifact("eval_report", j).empty()) << key;
  }
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"relative_gap", -0.01}, {"n", 0}, {"limit", 0}, {"gap_stderr", -1}, {"verdict", "maybe"},
           {"metric_name", ""}, {"source_score", "0.5"}, {"unknown_key", 1}}) {
    nlohmann::json j = ok;
    j[key] = value;
    EXPECT_FALSE(check_artifact("eval_report", j).empty()) << key << " = " << value;
  }
  // Every property says what it is.
  std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& s,
                                                                             const std::string& path) {
    if (!s.is_object() || !s.contains("properties")) return;
    for (const auto& [name, prop] : s["properties"].items()) {
      EXPECT_TRUE(prop.contains("description")) << path << "/" << name;
      walk(prop, path + "/" + name);
    }
  };
  walk(artifact_schema("eval_report"), "");
}

TEST(EvalMetricNames, SynonymsDefaultsAndOfflineData) {
  EXPECT_EQ(resolve_eval_metric("", "").metric_name, "gsm8k");
  EXPECT_EQ(resolve_eval_metric("", "").dataset, "gsm8k");
  EXPECT_EQ(resolve_eval_metric("GSM8K", "").headline, "exact_match,strict-match");
  EXPECT_EQ(resolve_eval_metric("gsm8k flexible", "").headline, "exact_match,flexible-extract");
  for (const char* name : {"ppl", "Perplexity", "wikitext-2", "wikitext2_ppl"}) {
    const EvalMetric m = resolve_eval_metric(name, "");
    EXPECT_EQ(m.metric_name, "ppl") << name;
    EXPECT_EQ(m.dataset, "wikitext2") << name;
    EXPECT_TRUE(m.unavailable.empty()) << name;
  }
  EXPECT_EQ(resolve_eval_metric("tinystories", "").dataset, "tinystories");
  EXPECT_EQ(resolve_eval_metric("ppl", "TinyStories").dataset, "tinystories");
  EXPECT_EQ(resolve_eval_metric("ppl", "wikitext-2-raw-v1").dataset, "wikitext2");
  EXPECT_EQ(resolve_eval_metric("kl divergence", "").task, "kld");
  const std::string stories = std::string(QLOOM_SOURCE_DIR) + "/data/datasets/tinystories/TinyStories-valid-first1000.txt";
  EXPECT_EQ(resolve_eval_metric("ppl", stories).dataset, fs::absolute(stories).lexically_normal().string());
  EXPECT_FALSE(resolve_eval_metric("gsm8k", stories).unavailable.empty());  // not a .jsonl
  const EvalMetric hs = resolve_eval_metric("hellaswag", "hellaswag");
  EXPECT_EQ(hs.task, "hellaswag");
  EXPECT_EQ(hs.headline, "acc_norm");
  EXPECT_EQ(hs.dataset, "hellaswag");
  EXPECT_TRUE(hs.unavailable.empty());
  EXPECT_EQ(resolve_eval_metric("hellaswag acc", "").metric_name, "hellaswag_acc");
  EXPECT_EQ(resolve_eval_metric("hellaswag acc", "").headline, "acc");
  EXPECT_EQ(resolve_eval_metric("ARC", "").task, "arc_challenge");
  EXPECT_NE(resolve_eval_metric("ARC", "").unavailable.find("bundles no arc_challenge"), std::string::npos);
  EXPECT_EQ(resolve_eval_metric("mmlu", "").headline, "acc");
  const std::string arc = std::string(QLOOM_TEST_DATA_DIR) + "/mc/arc.jsonl";
  const EvalMetric ae = resolve_eval_metric("arc-e", arc);
  EXPECT_EQ(ae.task, "arc_easy");
  EXPECT_TRUE(ae.unavailable.empty()) << ae.unavailable;
  EXPECT_EQ(ae.dataset, fs::absolute(arc).lexically_normal().string());
  EXPECT_EQ(resolve_eval_metric("mmlu_acc_norm", "").task, "");  // lm-eval reports no acc_norm for mmlu
  const EvalMetric m = resolve_eval_metric("zoom-accuracy", "");
  EXPECT_EQ(m.task, "");
  EXPECT_EQ(m.metric_name, "zoom-accuracy");
  EXPECT_EQ(m.unavailable.find("oom"), std::string::npos) << m.unavailable;
}

}  // namespace
}  // namespace qloom::agent
