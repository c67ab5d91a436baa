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

TEST(ValidateCli, UsageErrors) {
  EXPECT_EQ(test::run_qloom({"validate"}).exit_code, 2);
  const auto r = test::run_qloom({"validate", "--source", QLOOM_DEMO_MODEL_DIR, "--quantized", "/no/such/dir"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/no/such/dir"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace qloom
