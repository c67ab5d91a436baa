#include "qloom/perf/perf_options.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <CLI/CLI.hpp>

#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

PerfCommand parse(std::vector<std::string> args) {
  PerfCommand cmd;
  CLI::App app;
  add_perf_flags(app, cmd);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  finish_perf_command(cmd);
  return cmd;
}

ErrorKind kind_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kInternal;
}

TEST(PerfOptions, RatiosAcceptPercentFractionAndX) {
  EXPECT_DOUBLE_EQ(parse_ratio("3%", "accuracy-gap"), 0.03);
  EXPECT_DOUBLE_EQ(parse_ratio("0.03", "accuracy-gap"), 0.03);
  EXPECT_DOUBLE_EQ(parse_ratio("2x", "target-gain", true), 2.0);
  EXPECT_DOUBLE_EQ(parse_ratio("1.5X", "target-gain", true), 1.5);
  EXPECT_THROW(parse_ratio("2x", "accuracy-gap"), Error);
  EXPECT_THROW(parse_ratio("", "accuracy-gap"), Error);
  EXPECT_THROW(parse_ratio("abc", "accuracy-gap"), Error);
  EXPECT_THROW(parse_ratio("-1", "accuracy-gap"), Error);
  EXPECT_THROW(parse_ratio("nan", "accuracy-gap"), Error);
  try {
    parse_ratio("3%%", "accuracy-gap");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.item(), "--accuracy-gap");
  }
}

TEST(PerfOptions, DefaultsAreTheSeeds) {
  PerfCommand c = parse({"--model", "/m"});
  EXPECT_EQ(c.spec.base_model, "/m");
  EXPECT_DOUBLE_EQ(c.spec.accuracy_gap, 0.02);
  EXPECT_EQ(c.spec.performance_mode, "off");
  EXPECT_EQ(c.spec.max_search_candidates, 20);
  EXPECT_DOUBLE_EQ(c.spec.search_timeout, 43200);
  EXPECT_DOUBLE_EQ(c.spec.baseline_floor, 0.03);
  EXPECT_EQ(c.spec.gsm8k_num_samples, 1319);
  EXPECT_EQ(c.spec.isl, 1024);
  EXPECT_EQ(c.spec.osl, 1024);
  EXPECT_EQ(c.spec.bench_concurrency, 64);
  EXPECT_EQ(c.spec.kv_cache_precision_candidates, (std::vector<std::string>{"native", "fp8"}));
  EXPECT_EQ(c.spec.layer_precision_candidates, default_layer_precisions());
  EXPECT_EQ(c.spec.eval_task, "gsm8k");
}

TEST(PerfOptions, KebabAndSnakeCaseBothParse) {
  PerfCommand a = parse({"--model", "/m", "--accuracy-gap", "3%", "--max-search-candidates", "5"});
  PerfCommand b = parse({"--model", "/m", "--accuracy_gap", "0.03", "--max_search_candidates", "5"});
  EXPECT_EQ(to_json(a.spec), to_json(b.spec));
  EXPECT_DOUBLE_EQ(a.spec.accuracy_gap, 0.03);
}

TEST(PerfOptions, TargetGainImpliesOptimizeAndContradictionsAreRefused) {
  PerfCommand c = parse({"--model", "/m", "--target-gain", "2x"});
  EXPECT_EQ(c.spec.performance_mode, "optimize");
  EXPECT_DOUBLE_EQ(*c.spec.target_gain, 2.0);
  EXPECT_EQ(kind_of({"--model", "/m", "--target-gain", "2x", "--performance-mode", "measure"}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({"--model", "/m", "--target-gain", "2x", "--performance-mode", "off"}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({"--model", "/m", "--performance-mode", "optimize"}), ErrorKind::kUsage);
  EXPECT_EQ(parse({"--model", "/m", "--target-gain", "2", "--performance-mode", "optimize"}).spec.performance_mode,
            "optimize");
}

TEST(PerfOptions, KvCandidatesNeedNative) {
  EXPECT_EQ(kind_of({"--model", "/m", "--kv-cache-precision-candidates", "fp8"}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({"--model", "/m", "--kv-cache-precision-candidates", "int4"}), ErrorKind::kUsage);
  EXPECT_EQ(parse({"--model", "/m", "--kv-cache-precision-candidates", "fp8", "native"}).spec.kv_cache_precision_candidates,
            (std::vector<std::string>{"native", "fp8"}));
  EXPECT_EQ(kind_of({"--model", "/m", "--kv-cache-scheme", "int8"}), ErrorKind::kUsage);
}

TEST(PerfOptions, BadValuesAreUsageErrors) {
  EXPECT_EQ(kind_of({}), ErrorKind::kUsage);  // no --model
  EXPECT_EQ(kind_of({"--model", "/m", "--accuracy-gap", "150%"}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({"--model", "/m", "--isl", "0"}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({"--model", "/m", "--max-search-candidates", "-1"}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({"--model", "/m", "--eval-limit", "0"}), ErrorKind::kUsage);
}

TEST(PerfOptions, GpuOptionsAreRecordedNotDropped) {
  PerfCommand c = parse({"--model", "/m", "--gpu-type", "MI300X", "--vllm-extra-arg", "--enforce-eager", "--tp", "8"});
  EXPECT_EQ(c.spec.not_applicable.at("gpu_type"), "MI300X");
  EXPECT_EQ(c.spec.not_applicable.at("vllm_extra_arg"), "--enforce-eager");
  EXPECT_EQ(c.spec.not_applicable.at("tp"), "8");
}

TEST(PerfOptions, RunSpecJsonRoundTripsAndDiffs) {
  PerfCommand c = parse({"--model", "/m", "--quant-strategy", "fp8 with fp8 kv cache", "--eval-task", "ppl",
                         "--eval-limit", "8", "--target-gain", "1.5x"});
  RunSpec back = run_spec_from_json(to_json(c.spec));
  EXPECT_EQ(to_json(back), to_json(c.spec));
  EXPECT_TRUE(run_spec_differences(c.spec, back).empty());
  back.accuracy_gap = 0.05;
  auto d = run_spec_differences(c.spec, back);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "accuracy_gap: 0.02 -> 0.05");
  nlohmann::json broken = to_json(c.spec);
  broken.erase("isl");
  try {
    run_spec_from_json(broken);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.item(), "run_spec.isl");
  }
}

}  // namespace
}  // namespace qloom::perf
