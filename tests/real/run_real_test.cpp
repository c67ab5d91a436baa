// One `qloom run` prompt end to end on SmolLM2-135M, as a user types it: intake
// from the model's config, plan, manifest, calibrated FP8 export, validation
// and a paired perplexity gate — success, every artifact schema-valid.
#include <gtest/gtest.h>

#include "real/real_model.h"

namespace qloom {
namespace {

TEST(RealRun, Fp8PromptEndToEnd) {
  const auto src = test::real_model_dir().string();
  test::TempDir tmp("real-run");
  const auto ws = tmp / "ws";
  const std::string prompt = "quantize the model at " + src + " to fp8, write it to " + (tmp / "out").string() +
                             ", calibrate on 16 samples, measure perplexity on 2 samples, accept a 5% gap";
  test::CommandResult r = test::run_qloom({"run", prompt, "--workspace", ws.string(), "--interactive", "off",
                                           "--threads", "2", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto a = test::read_json_file(ws / "assessment.json");
  ASSERT_TRUE(a.is_object()) << r.err;
  EXPECT_EQ(a["verdict"], "success") << a.dump(2);
  const auto report = test::read_json_file(ws / "eval_report.json");
  ASSERT_TRUE(report.is_object());
  std::printf("[ real ] qloom run fp8: %s\n", report.dump().c_str());
  EXPECT_TRUE(std::filesystem::exists(tmp / "out" / "config.json"));
}

}  // namespace
}  // namespace qloom
