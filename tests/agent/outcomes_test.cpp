// Outcome catalog (numbers, names and classes as seed 000 §6–§8 list them)
// and the workspace classifier on a real workspace: the demo model quantized
// and validated by qloom, then each artifact broken in turn.
#include "qloom/agent/outcomes.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "qloom/job/quantize_job.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/report.h"
#include "qloom/validate/validator.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;

TEST(Outcomes, CatalogMatchesTheSeed) {
  const auto& cat = outcome_catalog();
  ASSERT_EQ(cat.size(), 31u);
  std::set<int> numbers;
  for (const auto& o : cat) numbers.insert(o.number);
  EXPECT_EQ(numbers.size(), 31u);  // 0..30, each once
  EXPECT_EQ(*numbers.rbegin(), 30);
  const std::set<std::string> retry = {"exec_oom", "export_crashed", "must_have_weights_missing",
                                       "fuzzy_check_failed", "unclassified_failure", "eval_oom"};
  const std::set<std::string> decision = {"checkpoint_aborted", "eval_gap_exceeded"};
  const std::set<std::string> fail = {"quark_root_missing", "exec_model_load_failed", "exec_calibration_data_missing",
                                      "quark_skill_unavailable", "model_path_unreachable", "validator_self_test_failed",
                                      "must_validate_md5_mismatch", "workspace_unwritable", "sdk_runtime_error",
                                      "quantized_load_failed", "upstream_change_required"};
  for (const auto& o : cat) {
    const std::string id(o.id);
    const OutcomeClass want = retry.count(id)      ? OutcomeClass::kRetry
                              : decision.count(id) ? OutcomeClass::kDecision
                              : fail.count(id)     ? OutcomeClass::kAutoFail
                                                   : OutcomeClass::kAutoRecover;
    EXPECT_EQ(o.cls, want) << id;
  }
  EXPECT_EQ(find_outcome("#3")->id, "exec_oom");
  EXPECT_EQ(find_outcome("21")->id, "eval_gap_exceeded");
  EXPECT_EQ(find_outcome("must_validate_md5_mismatch")->number, 18);
  EXPECT_EQ(find_outcome("nope"), nullptr);
}

TEST(Outcomes, HubFailuresByPhase) {
  using F = io::HubFailure;
  for (F f : {F::kRepoNotFound, F::kRevisionNotFound, F::kUnauthorized, F::kForbidden, F::kNetwork, F::kNotCached,
              F::kFileNotFound, F::kChecksum, F::kBadResponse, F::kDiskSpace, F::kCacheWrite}) {
    EXPECT_EQ(outcome_for_hub_failure(f, "intake").id, "model_path_unreachable") << io::hub_failure_name(f);
    EXPECT_EQ(outcome_for_hub_failure(f, "exec").id, "exec_model_load_failed") << io::hub_failure_name(f);
  }
  EXPECT_EQ(outcome_for_hub_failure(F::kInterrupted, "exec").id, "unclassified_failure");
  EXPECT_EQ(outcome_for_hub_failure(F::kInterrupted, "exec").cls, OutcomeClass::kRetry);
}

// A complete, successful workspace built with the real pipeline pieces.
class Workspace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new test::TempDir();
    const fs::path ws = root_->path() / "golden";
    fs::create_directories(ws);
    job::QuantizeOptions o;
    o.model_dir = QLOOM_DEMO_MODEL_DIR;
    o.output_dir = ws / "out";
    o.quant_scheme = "ptpc_fp8";
    job::quantize_model(o);
    validate::ValidateOptions vo;
    vo.numeric_step = validate::check_dequantized_weights;
    const auto rep = validate::validate_checkpoint(QLOOM_DEMO_MODEL_DIR, o.output_dir, vo);
    std::ofstream(ws / "validation_report.md") << validate::render_markdown(rep);
    std::ofstream(ws / "model_analysis.json") << R"({"model_type": "llama"})";
    std::ofstream(ws / "quant_plan.json") << R"({"quant_scheme": "ptpc_fp8"})";
    std::ofstream(ws / "run_manifest.yaml") << "run:\n  command: [qloom, quantize]\noutputs:\n  quantized_model_dir: \""
                                            << (ws / "out").string() << "\"\n";
    std::ofstream(ws / "eval_report.json")
        << R"({"metric_name": "ppl", "dataset": "tinystories", "backend": "qloom", "source_score": 8.0,)"
        << R"( "quantized_score": 8.1, "relative_gap": 0.0125})";
    std::ofstream(ws / "last_phase.txt") << "eval\n";
  }
  static void TearDownTestSuite() { delete root_; }

  // A fresh copy of the golden workspace to break.
  fs::path copy(const std::string& name) {
    const fs::path dst = root_->path() / name;
    fs::copy(root_->path() / "golden", dst, fs::copy_options::recursive);
    std::ofstream(dst / "run_manifest.yaml") << "outputs:\n  quantized_model_dir: " << (dst / "out").string() << "\n";
    return dst;
  }
  static std::string id(const Classification& c) { return c.outcome ? std::string(c.outcome->id) : "success"; }
  static void replace_in(const fs::path& p, const std::string& from, const std::string& to) {
    std::ifstream in(p);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = s.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    std::ofstream(p) << s;
  }
  static test::TempDir* root_;
};
test::TempDir* Workspace::root_ = nullptr;

TEST_F(Workspace, CleanRunIsASuccess) {
  const auto c = classify_workspace(copy("ok"));
  EXPECT_EQ(id(c), "success") << c.reason;
}

TEST_F(Workspace, BlockedAndEvalSkippedFilesWin) {
  auto ws = copy("blocked");
  std::ofstream(ws / "blocked.md") << "outcome_id: exec_oom\nkilled at layer 3\n";
  auto c = classify_workspace(ws);
  EXPECT_EQ(id(c), "exec_oom");
  EXPECT_EQ(c.reason, "killed at layer 3");
  std::ofstream(ws / "blocked.md") << "outcome_id: frobnicated\n";
  EXPECT_EQ(id(classify_workspace(ws)), "unclassified_failure");
  ws = copy("skipped");
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"CUDA error: out of memory (OOM) while scoring", "eval_oom"},
           {"vLLM could not start the server", "quantized_load_failed"},
           {"dataset gsm8k unreachable", "eval_env_unavailable"}}) {
    std::ofstream(ws / "eval_skipped.txt") << text;
    EXPECT_EQ(id(classify_workspace(ws)), want) << text;
  }
}

TEST_F(Workspace, MissingArtifactsInPhaseOrder) {
  auto ws = copy("a");
  fs::remove(ws / "model_analysis.json");
  EXPECT_EQ(id(classify_workspace(ws)), "analysis_artifact_invalid_or_missing");
  std::ofstream(ws / "last_phase.txt") << "intake\n";  // intake has not written it yet: fine
  EXPECT_EQ(id(classify_workspace(ws)), "success");
  ws = copy("b");
  std::ofstream(ws / "quant_plan.json") << "{not json";
  EXPECT_EQ(id(classify_workspace(ws)), "plan_artifact_invalid_or_missing");
  ws = copy("c");
  std::ofstream(ws / "run_manifest.yaml") << "run: {}\n";
  EXPECT_EQ(id(classify_workspace(ws)), "manifest_artifact_invalid_or_missing");
  ws = copy("d");
  fs::remove(ws / "out" / "config.json");
  EXPECT_EQ(id(classify_workspace(ws)), "must_have_config_missing_or_invalid");
  ws = copy("e");
  for (const char* f : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json"}) fs::remove(ws / "out" / f);
  EXPECT_EQ(id(classify_workspace(ws)), "must_have_tokenizer_missing");
  ws = copy("f");
  for (const auto& e : fs::directory_iterator(ws / "out"))
    if (e.path().extension() == ".safetensors") fs::remove(e.path());
  EXPECT_EQ(id(classify_workspace(ws)), "must_have_weights_missing");
  ws = copy("g");
  fs::remove(ws / "validation_report.md");
  EXPECT_EQ(id(classify_workspace(ws)), "validation_report_absent");
}

TEST_F(Workspace, ValidatorStepsMapToTheirOutcomes) {
  for (const auto& [step, want] : std::vector<std::pair<std::string, std::string>>{
           {"4", "fuzzy_check_failed"}, {"2", "must_validate_md5_mismatch"},
           {"3", "must_validate_config_mismatch"}, {"1", "should_have_aux_missing"}}) {
    const auto ws = copy("step" + step);
    const fs::path rep = ws / "validation_report.md";
    std::ifstream in(rep);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = s.find("**Step " + step + " ");
    ASSERT_NE(at, std::string::npos);
    const size_t ok = s.find("**: ok", at);
    ASSERT_NE(ok, std::string::npos);
    s.replace(ok, 6, "**: FAIL");
    std::ofstream(rep) << s;
    EXPECT_EQ(id(classify_workspace(ws)), want) << "step " << step;
  }
  const auto ws = copy("skip3");
  std::ifstream in(ws / "validation_report.md");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = s.find("**Step 3 ");
  s.replace(s.find("**: ok", at), 6, "**: skipped");
  std::ofstream(ws / "validation_report.md") << s;
  EXPECT_EQ(id(classify_workspace(ws)), "must_validate_skipped");
}

TEST_F(Workspace, EvalGapAgainstTheResolvedThreshold) {
  const auto ws = copy("gap");
  replace_in(ws / "eval_report.json", "0.0125", "0.05");
  EXPECT_EQ(id(classify_workspace(ws)), "eval_gap_exceeded");
  EXPECT_EQ(id(classify_workspace(ws, 0.10)), "success");  // the caller's threshold
  std::ofstream(ws / "eval_gap_threshold.txt") << "0.06\n";
  EXPECT_EQ(id(classify_workspace(ws)), "success");
  EXPECT_EQ(id(classify_workspace(ws, 0.04)), "eval_gap_exceeded");  // caller beats the file
  fs::remove(ws / "eval_report.json");
  EXPECT_EQ(id(classify_workspace(ws)), "unclassified_failure");
}

}  // namespace
}  // namespace qloom::agent
