// GPTAQ and Qronos on SmolLM2-135M against what they refine (GPTQ) and RTN
// (int4 groups of 64: SmolLM2's in_features 576 takes no group of 128): KLD mean against the bf16 source on wikitext-2 (4 windows of 512
// tokens), with the calibration of algorithms_real_test.cpp (32 documents
// of the bundled c4 sample cut to 256 tokens). Each method must beat RTN of
// the same scheme by the margin in tests/data/real/algorithm_variants_bands.json
// and the baseline algorithm it extends (gptq) by its own margin there
// (a margin of 0 means: not worse). The bands file records what was measured.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>

#include "real/real_model.h"

namespace qloom {
namespace {

struct VariantCase {
  const char* name;      // key in the bands file
  const char* scheme;
  const char* algo;      // the method
  const char* baseline;  // the algorithm it refines
  const char* baseline_config;  // --quant_algo_config_file content for the baseline, or nullptr
};

void PrintTo(const VariantCase& c, std::ostream* os) { *os << c.name; }

const VariantCase kCases[] = {
    {"gptaq_int4_wo_64", "int4_wo_64", "gptaq", "gptq", nullptr},
    {"qronos_int4_wo_64", "int4_wo_64", "qronos", "gptq", nullptr},
};

double kld_of(const std::string& src, const test::TempDir& tmp, const std::string& tag, const char* scheme,
              const char* algo, const char* config_json) {
  const auto out = (tmp / tag).string();
  std::vector<std::string> q = {"quantize", "--model_dir", src, "--output_dir", out, "--quant_scheme", scheme,
                                "--threads", "2", "--num_calib_data", "32", "--seq_len", "256", "--progress", "off"};
  if (algo) {
    q.insert(q.end(), {"--quant_algo", algo});
    if (config_json)
      q.insert(q.end(), {"--quant_algo_config_file", algo, tmp.write(tag + ".json", config_json).string()});
  }
  test::CommandResult r = test::run_qloom(q);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return -1;
  auto j = test::run_qloom_json({"eval", out, "--source", src, "--task", "kld", "--dataset", "wikitext2",
                                 "--seq_len", "512", "--limit", "4", "--threads", "2"},
                                tmp, tag);
  return j.is_object() ? j["kld_mean"].get<double>() : -1;
}

class RealVariant : public ::testing::TestWithParam<VariantCase> {};

TEST_P(RealVariant, BeatsRtnAndItsBaselineOnKld) {
  const VariantCase& c = GetParam();
  const auto src = test::real_model_dir().string();
  test::TempDir tmp(std::string("real-") + c.name);
  const double rtn = kld_of(src, tmp, "rtn", c.scheme, nullptr, nullptr);
  const double base = kld_of(src, tmp, "base", c.scheme, c.baseline, c.baseline_config);
  const double algo = kld_of(src, tmp, "algo", c.scheme, c.algo, nullptr);
  ASSERT_GT(rtn, 0);
  ASSERT_GT(base, 0);
  ASSERT_GT(algo, 0);
  const auto b = test::read_json_file(test::real_data_dir() / "algorithm_variants_bands.json")[c.name];
  ASSERT_TRUE(b.is_object()) << "no margins for " << c.name;
  const double vs_rtn = b["vs_rtn"].get<double>(), vs_base = b["vs_baseline"].get<double>();
  std::printf("[ real ] %-20s %s: RTN kld %.6f, %s kld %.6f, %s kld %.6f (%.1f%% below RTN, required >= %.1f%%; "
              "%.1f%% below %s, required >= %.1f%%)\n",
              c.name, c.scheme, rtn, c.baseline, base, c.algo, algo, 100 * (1 - algo / rtn), 100 * vs_rtn,
              100 * (1 - algo / base), c.baseline, 100 * vs_base);
  EXPECT_LE(algo, rtn * (1 - vs_rtn));
  EXPECT_LE(algo, base * (1 - vs_base));
}

INSTANTIATE_TEST_SUITE_P(Variants, RealVariant, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<VariantCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace qloom
