// The fp4 block schemes (nvfp4, amdfp4, amdfp4_g32, amdfp4_global16/32) on
// SmolLM2-135M: qloom quantize (RTN weights; nvfp4 / amdfp4_global* calibrate
// their static input global scales) → qloom validate (steps 1-5 PASS; step 6
// PASSes nvfp4, which vLLM loads as QuarkNVFP4, and FAILs amdfp4*, for which
// vLLM has no scheme (e5m3 scales)) → qloom eval --task kld against the bf16
// source on wikitext-2 (4 windows of 512 tokens), the KLD mean and top-1
// agreement in the bands of tests/data/real/fp4_block_bands.json (measured
// when the test was written; a KLD far below the band means the scheme was not
// applied, far above that it was applied wrongly).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "real/real_model.h"

namespace qloom {
namespace {

class RealFp4Block : public ::testing::TestWithParam<const char*> {};

TEST_P(RealFp4Block, QuantizeValidateKld) {
  const std::string scheme = GetParam();
  const auto src = test::real_model_dir().string();
  test::TempDir tmp("real-" + scheme);
  const auto out = (tmp / "q").string();
  test::CommandResult r = test::run_qloom({"quantize", "--model_dir", src, "--output_dir", out, "--quant_scheme", scheme,
                                           "--threads", "2", "--num_calib_data", "16", "--seq_len", "256",
                                           "--progress", "off"});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = test::run_qloom({"validate", "--source", src, "--quantized", out, "--json", "--threads", "2"});
  const bool vllm_loads = scheme == "nvfp4";
  EXPECT_EQ(r.exit_code == 0, vllm_loads) << r.out << r.err;
  const auto report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  auto step = [&](int n) {
    for (const auto& s : report["steps"])
      if (s["step"] == n) return s;
    return nlohmann::json();
  };
  for (int n = 1; n <= 5; ++n) EXPECT_EQ(step(n)["status"], "ok") << "step " << n << ": " << step(n)["summary"];
  EXPECT_EQ(step(6)["status"], vllm_loads ? "ok" : "FAIL") << step(6)["summary"];
  const auto numeric = step(5);
  ASSERT_TRUE(numeric["data"].is_object()) << numeric;
  EXPECT_EQ(numeric["data"]["failed"], 0);
  EXPECT_EQ(numeric["data"]["reproduced_rtn"], numeric["data"]["checked"]) << "every weight re-quantizes bit for bit";

  auto kld = test::run_qloom_json({"eval", out, "--source", src, "--task", "kld", "--dataset", "wikitext2",
                                   "--seq_len", "512", "--limit", "4", "--threads", "2"},
                                  tmp, "kld");
  ASSERT_TRUE(kld.is_object());
  const double mean = kld["kld_mean"].get<double>(), top1 = kld["top1_agreement"].get<double>();
  std::printf("[ real ] scheme %-22s kld_mean %.6f top1 %.4f ppl %.4f -> %.4f\n", scheme.c_str(), mean, top1,
              kld["ppl_source"].get<double>(), kld["ppl_quantized"].get<double>());
  const auto b = test::read_json_file(test::real_data_dir() / "fp4_block_bands.json")[scheme];
  ASSERT_TRUE(b.is_object()) << "no band for " << scheme << " in fp4_block_bands.json";
  EXPECT_GE(mean, b["kld_min"].get<double>());
  EXPECT_LE(mean, b["kld_max"].get<double>());
  EXPECT_GE(top1, b["top1_min"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Fp4Block, RealFp4Block,
                         ::testing::Values("nvfp4", "amdfp4", "amdfp4_g32", "amdfp4_global16", "amdfp4_global32"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace qloom
