// `qloom validate` as a user runs it: self-test, exit codes, report files.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;

TEST(ValidateCli, SelfTestPasses) {
  const auto r = test::run_qloom({"validate", "--self-test"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("**Verdict**: PASS"), std::string::npos) << r.out;
}

TEST(ValidateCli, UnquantizedCopyFailsTheConfigStepWithExitFour) {
  test::TempDir tmp;
  const auto reports = tmp.path() / "reports";
  const auto r = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized",
                                  QLOOM_DEMO_MODEL_DIR, "--report_dir", reports.string()});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.out.find("**Step 3 — config.json**: FAIL"), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(reports / "validation_report.md"));
  const auto j = nlohmann::json::parse(test::read_file(reports / "validation_report.json"));
  EXPECT_EQ(j["passed"], false);
}

// An RTN export of the demo model with `scheme` (layers its layout cannot
// hold stay in bf16).
std::string quantize_demo(const test::TempDir& tmp, const std::string& scheme) {
  const auto out = (tmp.path() / scheme).string();
  const auto r = test::run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", out,
                                  "--quant_scheme", scheme, "--exclude_unsupported", "--progress", "off"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// The case: per-channel W4A16 (vLLM 0.33 has no per-channel W4A16
// path) is a valid checkpoint: PASS, exit 0, and vLLM's refusal is the
// deployability line; with --target vllm it fails with exit 4.
TEST(ValidateCli, PerChannelW4A16PassesUnlessTheTargetIsVllm) {
  test::TempDir tmp;
  const auto q = quantize_demo(tmp, "int4_wo_per_channel");
  auto r = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", q, "--no_numeric"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("**Step 6 — loads in vLLM**: FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("**Verdict**: PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deployable on vLLM 0.33: no — global_quant_config"), std::string::npos) << r.out;

  r = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", q, "--no-numeric", "--target",
                       "none", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["passed"], true);
  EXPECT_EQ(j["verdict"], "PASS");
  EXPECT_EQ(j["target"], "none");
  EXPECT_EQ(j["deployable"]["vllm"]["version"], "0.33");
  EXPECT_EQ(j["deployable"]["vllm"]["ok"], false);
  EXPECT_NE(j["deployable"]["vllm"]["reason"].get<std::string>().find("group_size must be a positive int"),
            std::string::npos) << j["deployable"];

  const auto reports = tmp.path() / "reports";
  r = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", q, "--no_numeric", "--target",
                       "vllm", "--report-dir", reports.string()});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("**Verdict**: FAIL — failed: Step 6"), std::string::npos) << r.out;
  j = nlohmann::json::parse(test::read_file(reports / "validation_report.json"));
  EXPECT_EQ(j["passed"], false);
  EXPECT_EQ(j["target"], "vllm");
  EXPECT_NE(test::read_file(reports / "validation_report.md").find("deployable on vLLM 0.33: no — "), std::string::npos);
}

TEST(ValidateCli, AVllmLoadableCheckpointIsDeployable) {
  test::TempDir tmp;
  const auto q = quantize_demo(tmp, "int4_wo_32");
  for (const char* target : {"none", "vllm"}) {
    const auto r = test::run_qloom(
        {"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", q, "--no_numeric", "--target", target});
    EXPECT_EQ(r.exit_code, 0) << target << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("**Verdict**: PASS"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  - deployable on vLLM 0.33: yes\n"), std::string::npos) << r.out;
  }
}

TEST(ValidateCli, UsageErrors) {
  EXPECT_EQ(test::run_qloom({"validate"}).exit_code, 2);
  const auto r = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", "/no/such/dir"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/no/such/dir"), std::string::npos) << r.err;
  const auto t = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", QLOOM_DEMO_MODEL_DIR,
                                  "--target", "sglang"});
  EXPECT_EQ(t.exit_code, 2) << t.err;
  EXPECT_NE(t.err.find("--target"), std::string::npos) << t.err;
}

TEST(ValidateCli, HelpDescribesTheTarget) {
  const auto r = test::run_qloom({"validate", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--target"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deployable on vLLM 0.33"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qloom
