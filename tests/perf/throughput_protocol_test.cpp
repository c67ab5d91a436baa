// perf/throughput_protocol.h: the seed's prompt factor table, the fixed
// prompt generator (goldens cross-checked with an independent Python
// mt19937_64), and the statistics (median, relative MAD, the 4th-run rule,
// stability, ABBA) on hand-made numbers; spec refusals are typed.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/perf/throughput_protocol.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

TEST(ThroughputProtocol, FactorTable) {
  EXPECT_EQ(prompt_factor(512, 512), 10);
  EXPECT_EQ(prompt_factor(1, 1), 10);
  EXPECT_EQ(prompt_factor(513, 512), 5);
  EXPECT_EQ(prompt_factor(2048, 2048), 5);
  EXPECT_EQ(prompt_factor(2049, 2048), 3);
  EXPECT_EQ(prompt_factor(8192, 8192), 3);
  EXPECT_EQ(prompt_factor(8193, 8192), 2);
  ThroughputSpec s;  // the seed's defaults: isl = osl = 1024, concurrency 64
  EXPECT_EQ(num_prompts(s), 64 * 5);
  s.isl = 8;
  s.osl = 4;
  s.concurrency = 2;
  EXPECT_EQ(num_prompts(s), 20);
  s.num_prompts_override = 7;
  EXPECT_EQ(num_prompts(s), 7);
}

TEST(ThroughputProtocol, GeneratorIsTheStandardMt19937_64) {
  // [rand.predef]: the 10000th output of a default-constructed mt19937_64.
  std::mt19937_64 g;
  g.discard(9999);
  EXPECT_EQ(g(), 9981545732273789042ull);
  std::mt19937_64 s(1234);  // the protocol's seed (values from the Python reimplementation)
  EXPECT_EQ(s(), 17473339210090333472ull);
  EXPECT_EQ(s(), 963351229459618018ull);
}

TEST(ThroughputProtocol, UniformIndexRejectsTheBiasedTail) {
  std::mt19937_64 one(1);
  EXPECT_EQ(uniform_index(one, 1), 0u);
  // n = 2^63 + 1: 2^64 mod n = 2^63 - 1, so draws >= 2^63 + 1 are rejected.
  const uint64_t n = (uint64_t(1) << 63) + 1;
  std::mt19937_64 a(42), b(42);
  for (int k = 0; k < 50; ++k) {
    uint64_t r = b();
    while (r >= n) r = b();  // the rejection rule, spelled out
    EXPECT_EQ(uniform_index(a, n), r % n) << "draw " << k;
  }
  // A power of two takes every draw: r mod n.
  std::mt19937_64 c(7), d(7);
  for (int k = 0; k < 20; ++k) EXPECT_EQ(uniform_index(c, 16), d() % 16);
}

TEST(ThroughputProtocol, PromptsAreGolden) {
  // Cross-checked with an independent Python mt19937_64 + the rule in the header.
  const auto p = random_prompts({5, 7, 11, 13, 17}, 3, 5, 1234);
  const std::vector<std::vector<int32_t>> want = {{11, 13, 5, 17, 5}, {11, 11, 11, 5, 5}, {13, 5, 17, 11, 17}};
  EXPECT_EQ(p, want);
  EXPECT_EQ(prompts_hash(p), "c96d1aef928b5529");
  EXPECT_EQ(random_prompts({5, 7, 11, 13, 17}, 3, 5, 1234), p);  // deterministic
  EXPECT_NE(random_prompts({5, 7, 11, 13, 17}, 3, 5, 1235), p);
  EXPECT_NE(prompts_hash({{1, 2}, {3}}), prompts_hash({{1}, {2, 3}}));  // lengths are hashed
  EXPECT_TRUE(random_prompts({5}, 0, 5, 1).empty());
}

TEST(ThroughputProtocol, PromptRefusals) {
  EXPECT_EQ(test::catch_error([] { random_prompts({}, 2, 5, 1); }).kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(test::catch_error([] { random_prompts({1}, 2, 0, 1); }).item(), "--isl");
}

TEST(ThroughputProtocol, MedianAndRelativeMad) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({7}), 7);
  EXPECT_EQ(relative_mad({100, 100, 100}), 0);
  EXPECT_DOUBLE_EQ(relative_mad({100, 101, 103}), 1.0 / 101);  // |dev| = 1, 0, 2
  EXPECT_DOUBLE_EQ(relative_mad({90, 100, 130, 100}), 5.0 / 100);  // |dev| = 10, 0, 30, 0 -> 5
  EXPECT_EQ(test::catch_error([] { median({}); }).kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(test::catch_error([] { relative_mad({100, 0, 100}); }).kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(test::catch_error([] { relative_mad({100, NAN, 100}); }).kind(), ErrorKind::kInvalidInput);
}

TEST(ThroughputProtocol, FourthRunRule) {
  const ProtocolLimits l;  // 3 timed, at most 4, extra run above 0.01
  EXPECT_TRUE(needs_extra_run({}, l));
  EXPECT_TRUE(needs_extra_run({100, 100}, l));
  EXPECT_FALSE(needs_extra_run({100, 100.5, 101}, l));    // MAD 0.5/100.5 < 0.01
  EXPECT_FALSE(needs_extra_run({100, 101, 102}, l));      // 1/101 = 0.0099
  EXPECT_TRUE(needs_extra_run({100, 102, 104}, l));       // 2/102 = 0.0196 > 0.01
  EXPECT_FALSE(needs_extra_run({100, 102, 104, 110}, l));  // the 4th is the last
  ProtocolLimits five = l;
  five.max_timed_samples = 5;
  EXPECT_TRUE(needs_extra_run({100, 102, 104, 110}, five));
}

TEST(ThroughputProtocol, StabilityFlag) {
  const ProtocolLimits l;
  EXPECT_TRUE(is_stable(0.0, l));
  EXPECT_TRUE(is_stable(0.015, l));
  EXPECT_FALSE(is_stable(0.0151, l));
  EXPECT_TRUE(is_stable(relative_mad({100, 101, 102}), l));
  EXPECT_FALSE(is_stable(relative_mad({100, 102, 104}), l));
}

TEST(ThroughputProtocol, AbbaGain) {
  EXPECT_DOUBLE_EQ(abba_gain(100, 200, 200, 100), 2.0);
  EXPECT_DOUBLE_EQ(abba_gain(100, 110, 90, 100), std::sqrt(0.99));
  // A drift that raises both A and B by 10% cancels out.
  EXPECT_DOUBLE_EQ(abba_gain(100, 150 * 1.05, 150 * 1.1, 100 * 1.15), std::sqrt(1.5 * 1.05 * 1.5 * 1.1 / 1.15));
  EXPECT_DOUBLE_EQ(abba_gain(50, 150, 150, 50), 3.0);
  EXPECT_EQ(test::catch_error([] { abba_gain(0, 1, 1, 1); }).item(), "abba.a1");
  EXPECT_EQ(test::catch_error([] { abba_gain(1, 1, -1, 1); }).item(), "abba.b2");
}

TEST(ThroughputProtocol, BadSpecsAreRefusedByFlag) {
  ThroughputSpec s;
  s.isl = 8;
  s.osl = 4;
  s.concurrency = 2;
  EXPECT_NO_THROW(check_spec(s, 512));
  ThroughputSpec bad = s;
  bad.isl = 0;
  Error e = test::catch_error([&] { check_spec(bad, 512); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--isl");
  bad = s;
  bad.osl = 0;
  EXPECT_EQ(test::catch_error([&] { check_spec(bad, 512); }).item(), "--osl");
  bad = s;
  bad.concurrency = 0;
  e = test::catch_error([&] { check_spec(bad, 512); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--bench-concurrency");
  bad = s;
  bad.isl = 500;
  bad.osl = 13;  // 513 > 512
  e = test::catch_error([&] { check_spec(bad, 512); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--isl,--osl");
  EXPECT_NE(std::string(e.what()).find("512"), std::string::npos);
  bad.osl = 12;
  EXPECT_NO_THROW(check_spec(bad, 512));
  EXPECT_NO_THROW(check_spec(bad, 0));  // unknown context: not checked
  bad = s;
  bad.num_prompts_override = -1;
  EXPECT_EQ(test::catch_error([&] { check_spec(bad, 512); }).kind(), ErrorKind::kUsage);
}

TEST(ThroughputProtocol, LimitsJsonIsTheContractBlock) {
  EXPECT_EQ(ProtocolLimits{}.to_json().dump(),
            R"({"timed_samples":3,"max_timed_samples":4,"extra_run_mad":0.01,"stability_relative_mad":0.015})");
}

TEST(ThroughputProtocol, BadLimitsAreRefused) {
  ProtocolLimits l;
  l.timed_samples = 0;
  EXPECT_EQ(test::catch_error([&] { check_limits(l); }).kind(), ErrorKind::kUsage);
  l = {};
  l.max_timed_samples = 2;
  EXPECT_EQ(test::catch_error([&] { check_limits(l); }).kind(), ErrorKind::kUsage);
  l = {};
  l.stability_relative_mad = -1;
  EXPECT_EQ(test::catch_error([&] { check_limits(l); }).kind(), ErrorKind::kUsage);
}

TEST(ThroughputProtocol, SpecJsonRoundTripHidesTheKey) {
  ThroughputSpec s;
  s.isl = 64;
  s.osl = 32;
  s.concurrency = 4;
  s.threads = 2;
  s.server = "http://127.0.0.1:8000";
  s.api_key = "sekrit";
  const auto j = s.to_json();
  EXPECT_EQ(j.dump(),
            R"({"isl":64,"osl":32,"concurrency":4,"seed":1234,"threads":2,"server":"http://127.0.0.1:8000",)"
            R"("served_model":null,"api_key":"***","num_prompts_override":0,"runtime":"native"})");
  const ThroughputSpec back = ThroughputSpec::from_json(j, "state.json");
  ThroughputSpec want = s;
  want.api_key.clear();  // the key never travels through JSON
  EXPECT_EQ(back.to_json().dump(), want.to_json().dump());
  EXPECT_TRUE(back.api_key.empty());
  auto broken = j;
  broken["isl"] = "64";
  const Error e = test::catch_error([&] { ThroughputSpec::from_json(broken, "state.json"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "isl");
  EXPECT_EQ(e.file(), "state.json");
}

}  // namespace
}  // namespace qloom::perf
