// SmoothQuant and the folding primitives (quant/smoothquant.h,
// quant/smoothing.h).
//
// Function equivalence, on every engine fixture (and the MHA expansion of
// each GQA fixture, where v_proj -> o_proj groups apply): fold random
// positive scales (log-uniform in [1/4, 4]) and SmoothQuant's scales (from
// activations collected through ForwardHooks) into every applicable group of
// every layer and compare the logits of 40 tokens with the original's.
// Tolerance kFoldTol = 5e-6 of max(1, max |logit|): F32 weights, so the fold
// only adds fp32 rounding of the folded weights (one correctly rounded
// multiply / divide per element, plus two more roundings for gemma's (1 + w)
// norms), ~1e-7 relative per weight, accumulated over a few layers of
// <= 128-term dot products; measured 0.9e-7 .. 6.3e-7 on the 24 fixture
// variants, random and SmoothQuant scales alike (printed), so ~8x headroom.
// A fold that forgets the producer changes the logits by > 1e-2 (checked), so
// the tolerance has teeth.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "qloom/quant/smoothquant.h"
#include "quant/fold_harness.h"
#include "quant/weight_gen.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using testfold::FoldHarness;
using testfold::logit_rel_diff;

constexpr double kFoldTol = 5e-6;

const char* const kArchs[] = {"llama", "llama3_rope", "mistral", "qwen2",   "qwen3",     "gemma",
                              "gemma2", "gemma3_text", "phi3",   "mixtral", "qwen2_moe", "qwen3_moe"};

std::vector<float> random_scales(testgen::Rng& rng, int64_t n) {
  std::vector<float> s(static_cast<size_t>(n));
  for (float& v : s) v = static_cast<float>(std::exp2(rng.uniform() * 4.0 - 2.0));
  return s;
}

class FoldEquivalence : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(FoldEquivalence, RandomScalesKeepTheFunction) {
  const auto [arch, mha] = GetParam();
  FoldHarness h(arch, mha);
  const std::vector<float> orig = h.logits(h.base());
  if (mha) {  // the MHA expansion is the same function as the GQA fixture
    FoldHarness gqa(arch, false);
    const double d = logit_rel_diff(gqa.logits(gqa.base()), orig);
    EXPECT_LE(d, kFoldTol) << "MHA expansion differs from the GQA original";
  }
  WeightOverlay ov(h.base());
  testgen::Rng rng(0x5eed + std::string(arch).size());
  int vo = 0;
  const int n = h.fold_all(ov, [&](const ScalingGroup& g) {
    vo += g.kind == "attn_out";
    return random_scales(rng, g.channels);
  });
  const double rel = logit_rel_diff(orig, h.logits(ov));
  std::printf("[ fold ] %-12s %-3s random scales: %2d groups (%d v->o), rel diff %.2e\n", arch, mha ? "mha" : "gqa",
              n, vo, rel);
  EXPECT_GT(n, 0);
  if (mha || h.config().num_kv_heads == h.config().num_heads) { EXPECT_GT(vo, 0); }
  EXPECT_LE(rel, kFoldTol);
}

TEST_P(FoldEquivalence, SmoothQuantScalesKeepTheFunction) {
  const auto [arch, mha] = GetParam();
  FoldHarness h(arch, mha);
  const std::vector<float> orig = h.logits(h.base());
  const auto stats = h.input_stats(h.base());
  const SmoothQuantConfig cfg = SmoothQuantConfig::from_json(nullptr, h.config().model_type);
  WeightOverlay ov(h.base());
  int unseen = 0;
  const int n = h.fold_all(ov, [&](const ScalingGroup& g) -> std::vector<float> {
    auto it = stats.find(g.input_site);
    if (it == stats.end()) {  // an expert no token was routed to: skipped, as a pipeline would
      ++unseen;
      return {};
    }
    std::vector<engine::LinearWeight> ws;
    for (const std::string& l : g.linears) ws.push_back(load_linear_f32(ov, l));
    std::vector<const engine::LinearWeight*> ptrs;
    for (const auto& w : ws) ptrs.push_back(&w);
    return smoothquant_scales(it->second.absmax, ptrs, cfg);
  });
  const double rel = logit_rel_diff(orig, h.logits(ov));
  std::printf("[ fold ] %-12s %-3s SmoothQuant alpha %.1f: %2d groups (%d unrouted skipped), rel diff %.2e\n", arch,
              mha ? "mha" : "gqa", cfg.alpha, n, unseen, rel);
  EXPECT_LE(rel, kFoldTol);

  // With alpha = 1, s = max|x| per channel, so every smoothed input's channel
  // absmax becomes 1 (channels above the clamp).
  if (cfg.alpha == 1.0) {
    const auto after = h.input_stats(ov);
    double worst = 0.0;
    for (int layer = 0; layer < static_cast<int>(h.config().num_layers); ++layer)
      for (const ScalingGroup& g : layer_scaling_groups(h.config(), layer)) {
        if (!g.applicable || !stats.count(g.input_site)) continue;
        const auto& before = stats.at(g.input_site).absmax;
        const auto& now = after.at(g.input_site).absmax;
        for (size_t j = 0; j < now.size(); ++j)
          if (before[j] > 1e-2f) worst = std::max(worst, std::fabs(static_cast<double>(now[j]) - 1.0));
      }
    EXPECT_LE(worst, 1e-4) << "smoothed inputs should have unit channel absmax";
  }
}

class FoldTeeth : public ::testing::TestWithParam<const char*> {};

TEST_P(FoldTeeth, ForgettingTheProducerChangesTheFunction) {
  FoldHarness h(GetParam(), false);
  const std::vector<float> orig = h.logits(h.base());
  WeightOverlay ov(h.base());
  testgen::Rng rng(7);
  const ScalingGroup g = layer_scaling_groups(h.config(), 0).front();  // input_layernorm -> attention
  const std::vector<float> s = random_scales(rng, g.channels);
  for (const std::string& l : g.linears) {  // readers only
    engine::LinearWeight w = load_linear_f32(ov, l);
    scale_linear_inputs(w, s);
    ov.set_linear(l, w);
  }
  EXPECT_GT(logit_rel_diff(orig, h.logits(ov)), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FoldTeeth, ::testing::ValuesIn(kArchs));
INSTANTIATE_TEST_SUITE_P(Fixtures, FoldEquivalence,
                         ::testing::Combine(::testing::ValuesIn(kArchs), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_mha" : "_gqa");
                         });

// ---- primitives -------------------------------------------------------------

engine::LinearWeight f32_linear(int64_t out, int64_t in, std::vector<float> v, std::vector<float> bias = {}) {
  engine::LinearWeight w;
  w.out = out;
  w.in = in;
  w.f32 = std::move(v);
  w.bias = std::move(bias);
  return w;
}

TEST(Smoothing, PrimitivesScaleColumnsRowsAndNorms) {
  engine::LinearWeight r = f32_linear(2, 3, {1, 2, 3, 4, 5, 6});
  const std::vector<float> s = {2.0f, 0.5f, 4.0f};
  scale_linear_inputs(r, s);
  EXPECT_EQ(r.f32, (std::vector<float>{2, 1, 12, 8, 2.5f, 24}));

  engine::LinearWeight p = f32_linear(5, 1, {1, 2, 3, 4, 5}, {10, 20, 30, 40, 50});
  divide_linear_outputs(p, s, 1);  // rows 1..3
  EXPECT_EQ(p.f32, (std::vector<float>{1, 1, 6, 1, 5}));
  EXPECT_EQ(p.bias, (std::vector<float>{10, 10, 60, 10, 50}));

  std::vector<float> n = {1.0f, 1.0f, 2.0f};
  divide_norm_weight(n, s, NormForm::kPlain);
  EXPECT_EQ(n, (std::vector<float>{0.5f, 2.0f, 0.5f}));
  std::vector<float> gm = {1.0f, 0.0f, -0.5f};  // (1 + w) = 2, 1, 0.5
  divide_norm_weight(gm, s, NormForm::kGemmaOffset);
  EXPECT_EQ(gm, (std::vector<float>{0.0f, 1.0f, -0.875f}));  // (1 + w') = 1, 2, 0.125
}

TEST(Smoothing, Bf16WeightsRoundToNearestEven) {
  engine::LinearWeight w;
  w.type = engine::WeightType::kBF16;
  w.out = 1;
  w.in = 2;
  w.bf16 = {float_to_bf16(1.0f), float_to_bf16(3.0f)};
  const std::vector<float> s = {1.0f / 3.0f, 3.0f};
  scale_linear_inputs(w, s);
  EXPECT_EQ(w.bf16[0], float_to_bf16(1.0f / 3.0f));
  EXPECT_EQ(bf16_to_float(w.bf16[1]), 9.0f);
  linear_to_f32(w);
  EXPECT_EQ(w.type, engine::WeightType::kF32);
  EXPECT_EQ(w.f32[1], 9.0f);
}

TEST(Smoothing, FoldRejectsBadScalesAndShapesWithoutTouchingAnything) {
  std::vector<float> norm = {1.0f, 1.0f};
  engine::LinearWeight r = f32_linear(1, 2, {1, 1});
  FoldTargets t;
  t.norm = &norm;
  t.readers = {&r};
  for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
    const std::vector<float> s = {1.0f, bad};
    Error e = test::catch_error([&] { fold_scales(t, s); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(e.message().find("scale 1"), std::string::npos) << e.message();
  }
  const std::vector<float> three = {1, 2, 3};
  EXPECT_EQ(test::catch_error([&] { fold_scales(t, three); }).kind(), ErrorKind::kUsage);
  FoldTargets none;
  none.readers = {&r};
  EXPECT_EQ(test::catch_error([&] { fold_scales(none, std::vector<float>{1, 2}); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(norm, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(r.f32, (std::vector<float>{1.0f, 1.0f}));
}

// ---- SmoothQuant scales and config -------------------------------------------

TEST(SmoothQuant, ScalesFollowQuarksFormula) {
  // a = [4, 0, 1, 9]; column maxima over both linears: [2, 3, 0, 1].
  const std::vector<float> a = {4, 0, 1, 9};
  engine::LinearWeight w1 = f32_linear(1, 4, {-2, 1, 0, 0.5f});
  engine::LinearWeight w2 = f32_linear(2, 4, {1, -3, 0, 1, 0, 0, 0, 0});
  SmoothQuantConfig c;
  c.alpha = 0.5;
  const std::vector<float> s = smoothquant_scales(a, {&w1, &w2}, c);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_FLOAT_EQ(s[0], static_cast<float>(2.0 / std::sqrt(2.0)));  // sqrt(4) / sqrt(2)
  EXPECT_FLOAT_EQ(s[1], 1e-3f);                                      // 0 -> clamp_min
  EXPECT_FLOAT_EQ(s[2], static_cast<float>(1.0 / std::sqrt(1e-5)));  // weight max clamped to 1e-5
  EXPECT_FLOAT_EQ(s[3], 3.0f);
  c.alpha = 1.0;
  EXPECT_FLOAT_EQ(smoothquant_scales(a, {&w1}, c)[3], 9.0f);
  c.scale_clamp_min = 0.5;
  EXPECT_FLOAT_EQ(smoothquant_scales(a, {&w1}, c)[1], 0.5f);

  const std::vector<float> neg = {1, -1, 1, 1};
  EXPECT_EQ(test::catch_error([&] { smoothquant_scales(neg, {&w1}, c); }).kind(), ErrorKind::kInvalidInput);
  const std::vector<float> short_a = {1, 1};
  EXPECT_EQ(test::catch_error([&] { smoothquant_scales(short_a, {&w1}, c); }).kind(), ErrorKind::kUsage);
}

TEST(SmoothQuant, DefaultAlphaPerModelType) {
  for (const char* t : {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text"})
    EXPECT_EQ(default_smoothquant_alpha(t), 1.0) << t;
  for (const char* t : {"mixtral", "qwen2_moe", "qwen3_moe"}) EXPECT_EQ(default_smoothquant_alpha(t), 0.8) << t;
  EXPECT_EQ(test::catch_error([] { default_smoothquant_alpha("gpt2"); }).kind(), ErrorKind::kUnsupported);
}

TEST(SmoothQuant, ConfigIsStrict) {
  SmoothQuantConfig c = SmoothQuantConfig::from_json({{"alpha", 0.5}, {"scale_clamp_min", 1e-4}}, "mixtral");
  EXPECT_EQ(c.alpha, 0.5);
  EXPECT_EQ(c.scale_clamp_min, 1e-4);
  EXPECT_EQ(SmoothQuantConfig::from_json(nullptr, "mixtral").alpha, 0.8);
  EXPECT_EQ(SmoothQuantConfig::from_json(nlohmann::json::object(), "llama").scale_clamp_min, 1e-3);

  Error e = test::catch_error([] { SmoothQuantConfig::from_json({{"alpah", 0.5}}, "llama"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "alpah");
  EXPECT_NE(e.remedy().find("alpha"), std::string::npos);
  for (const nlohmann::json& bad : {nlohmann::json{{"alpha", 1.5}}, nlohmann::json{{"alpha", -0.1}},
                                    nlohmann::json{{"alpha", "0.5"}}, nlohmann::json{{"scale_clamp_min", 0}},
                                    nlohmann::json::array()}) {
    EXPECT_EQ(test::catch_error([&] { SmoothQuantConfig::from_json(bad, "llama"); }).kind(), ErrorKind::kUsage)
        << bad.dump();
  }
}

TEST(SmoothQuant, ToJsonIsQuarksDict) {
  model::ModelConfig mc = model::ModelConfig::parse(io::ModelDir::open(test::engine_data_dir() / "mixtral").config());
  const nlohmann::json j = SmoothQuantConfig::from_json(nullptr, "mixtral").to_json(mc);
  EXPECT_EQ(j["name"], "smooth");
  EXPECT_EQ(j["alpha"], 0.8);
  EXPECT_EQ(j["scale_clamp_min"], 1e-3);
  EXPECT_EQ(j["model_decoder_layers"], "model.layers");
  EXPECT_EQ(j.size(), 5u);
  ASSERT_TRUE(j["scaling_layers"].is_array());
  EXPECT_EQ(j["scaling_layers"][0]["prev_op"], "input_layernorm");
  EXPECT_EQ(j["scaling_layers"][0]["module2inspect"], "self_attn");
}

}  // namespace
}  // namespace qloom::quant
