// The schemes amd-quark 0.13 added, on SmolLM2-135M: the MX fp6 and W4A8
// ones (mxfp6_e3m2, mxfp6_e2m3, mxfp4_mxfp6_e2m3, mxfp4_fp8, int4_fp8,
// int4_wa_64) and the fp4 block ones (nvfp4, amdfp4, amdfp4_g32,
// amdfp4_global16/32). qloom quantize (RTN weights; mxfp4_fp8's fp8 input
// scales and nvfp4 / amdfp4_global*'s input global scales calibrated on 4
// c4 documents of 256 tokens) → qloom validate (steps 1-5 ok: names, aux
// files, config, MD5 of the unquantized tensors, and step 5's numeric check
// — every weight reproduces the RTN reference bit for bit and the engine
// window is finite) → qloom eval --task kld against the bf16 source on
// wikitext-2 (4 windows of 512 tokens).
//
// KLD mean and top-1 must sit in a band around what was measured when the
// test was written (tests/data/real/scheme_bands_quark013.json: kld within
// [0.5, 1.5] x measured, top-1 at least measured - 0.05: far below means the
// scheme was not applied, far above that it was applied wrongly). Step 6
// (what vLLM does with the checkpoint) is recorded there per scheme
// ("vllm_step": vLLM loads nvfp4 as QuarkNVFP4 and has no scheme for the
// progressive int4_fp8 weight, int4 activations or e5m3 scales).
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>

#include "real/real_model.h"

namespace qloom {
namespace {

// amdfp4_global16 has no Quark golden (Quark 0.13's export of it is wrong:
// quark013_golden_test.cpp says why), so its band is its one real-model
// check. The other schemes' bytes are pinned by their goldens: their bands
// are the `full` label's sweep.
const char* const kSchemes[] = {"amdfp4_global16"};
const char* const kFullSchemes[] = {"mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_mxfp6_e2m3", "mxfp4_fp8", "int4_fp8",
                                    "int4_wa_64", "nvfp4",      "amdfp4",           "amdfp4_g32", "amdfp4_global32"};

nlohmann::json bands() { return test::read_json_file(test::real_data_dir() / "scheme_bands_quark013.json"); }

class RealQuark013Scheme : public ::testing::TestWithParam<const char*> {};

TEST_P(RealQuark013Scheme, QuantizeValidateKld) {
  const std::string scheme = GetParam();
  const auto b = bands()[scheme];
  ASSERT_TRUE(b.is_object()) << "no band for " << scheme << " in scheme_bands_quark013.json";
  const auto src = test::real_model_dir().string();
  const auto out = test::shared_checkpoint(test::real_quantize_args({"--quant_scheme", scheme}, 4)).string();
  ASSERT_FALSE(out.empty());

  test::CommandResult r = test::run_qloom({"validate", "--source", src, "--quantized", out, "--json", "--threads", "2"});
  const auto report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out << r.err;
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(report["steps"][i]["status"], "ok") << "step " << i + 1 << ": " << report["steps"][i]["summary"];
  EXPECT_EQ(report["steps"][4]["data"]["failed"], 0) << report["steps"][4]["summary"];
  EXPECT_EQ(report["steps"][4]["data"]["reproduced_rtn"], report["steps"][4]["data"]["checked"]);
  EXPECT_EQ(report["steps"][5]["status"], b["vllm_step"]) << report["steps"][5]["summary"];

  const auto kld = test::shared_kld(out);
  ASSERT_TRUE(kld.is_object());
  const double mean = kld["kld_mean"].get<double>(), top1 = kld["top1_agreement"].get<double>();
  std::printf("[ real ] scheme %-22s kld_mean %.6f top1 %.4f ppl %.4f -> %.4f\n", scheme.c_str(), mean, top1,
              kld["ppl_source"].get<double>(), kld["ppl_quantized"].get<double>());
  EXPECT_GE(mean, b["kld_min"].get<double>());
  EXPECT_LE(mean, b["kld_max"].get<double>());
  EXPECT_GE(top1, b["top1_min"].get<double>());
}

std::string case_name(const ::testing::TestParamInfo<const char*>& info) { return info.param; }
INSTANTIATE_TEST_SUITE_P(Quark013, RealQuark013Scheme, ::testing::ValuesIn(kSchemes), case_name);
INSTANTIATE_TEST_SUITE_P(FullQuark013, RealQuark013Scheme, ::testing::ValuesIn(kFullSchemes), case_name);

}  // namespace
}  // namespace qloom
