// The SmoothQuant stage (quant/smoothquant_stage.h): its strict Quark-form
// config with per-model alpha, the algo_config it writes, and — run in the
// layer-by-layer pipeline on the engine fixtures and the demo model — that
// the smoothed float layers compute the same function as the originals, that
// the scales are SmoothQuant's (at alpha 1, s = the input's per-channel max,
// read back from the folded norm), composition with gptq, and the MoE
// fallback for experts without calibration tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "qloom/io/model_dir.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/scheme_registry.h"
#include "qloom/quant/smoothquant_stage.h"
#include "quant/fold_harness.h"
#include "quant/stage_harness.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using testfold::FoldHarness;
using testfold::logit_rel_diff;
using namespace teststage;

TEST(SmoothQuantStageConfig, AlphaPerModelTypeOverridable) {
  EXPECT_EQ(SmoothQuantStageConfig::from_json(nullptr, "llama").params.alpha, 1.0);
  EXPECT_EQ(SmoothQuantStageConfig::from_json(nullptr, "qwen2").params.alpha, 1.0);
  EXPECT_EQ(SmoothQuantStageConfig::from_json(nullptr, "mixtral").params.alpha, 0.8);
  EXPECT_EQ(SmoothQuantStageConfig::from_json(nullptr, "qwen2_moe").params.alpha, 0.8);
  EXPECT_EQ(SmoothQuantStageConfig::from_json(nullptr, "llama").params.scale_clamp_min, 1e-3);
  const SmoothQuantStageConfig c = SmoothQuantStageConfig::from_json(
      {{"name", "smooth"}, {"alpha", 0.5}, {"scale_clamp_min", 1e-4}, {"model_decoder_layers", "model.layers"},
       {"scaling_layers", nlohmann::json::array()}},
      "mixtral");
  EXPECT_EQ(c.params.alpha, 0.5);
  EXPECT_EQ(c.params.scale_clamp_min, 1e-4);
  EXPECT_TRUE(c.scaling_layers.empty());
}

TEST(SmoothQuantStageConfig, IsStrictAndNamesTheKey) {
  struct Case {
    nlohmann::json j;
    ErrorKind kind;
    std::string item;
  };
  const std::vector<Case> cases = {
      {{{"alpha", 1.5}}, ErrorKind::kUsage, "algo_config.smoothquant.alpha"},
      {{{"alpha", "1"}}, ErrorKind::kUsage, "algo_config.smoothquant.alpha"},
      {{{"scale_clamp_min", 0}}, ErrorKind::kUsage, "algo_config.smoothquant.scale_clamp_min"},
      {{{"name", "smoothquant"}}, ErrorKind::kUsage, "algo_config.smoothquant.name"},  // Quark's name is "smooth"
      {{{"beta", 1}}, ErrorKind::kUsage, "algo_config.smoothquant.beta"},
      {{{"scaling_layers", {{{"prev_op", "input_layernorm"}}}}}, ErrorKind::kUsage,
       "algo_config.smoothquant.scaling_layers[0].layers"},
      {{{"model_decoder_layers", "language_model.model.layers"}}, ErrorKind::kUnsupported,
       "algo_config.smoothquant.model_decoder_layers"},
      {"smooth", ErrorKind::kUsage, "algo_config.smoothquant."},
  };
  for (const Case& c : cases) {
    const Error e = test::catch_error([&] { (void)SmoothQuantStageConfig::from_json(c.j, "llama"); });
    EXPECT_EQ(e.kind(), c.kind) << c.j.dump();
    EXPECT_EQ(e.item(), c.item) << c.j.dump();
  }
  EXPECT_EQ(test::catch_error([] { (void)SmoothQuantStageConfig::from_json(nullptr, "gpt2"); }).kind(),
            ErrorKind::kUnsupported);
}

// ---- in the pipeline ----------------------------------------------------------

QuantSpec spec_of(const char* scheme) { return *get_scheme(scheme).linear.weight; }

CalibrationData fixture_samples(const std::string& dir, size_t n) {
  const test::Reference ref = test::read_reference(test::engine_data_dir() / dir);
  CalibrationData d;
  for (size_t i = 0; i < n; ++i) d.samples.push_back(i % 2 ? ref.tokens_short : ref.tokens_long);
  return d;
}

std::vector<std::unique_ptr<AlgorithmStage>> sq_stages(const nlohmann::json& cfg, const std::string& model_type) {
  std::vector<std::unique_ptr<AlgorithmStage>> v;
  v.push_back(make_algorithm_stage("smoothquant", cfg, model_type));
  return v;
}

class SmoothQuantStageFixture : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(SmoothQuantStageFixture, SmoothedLayersComputeTheSameFunction) {
  const FixtureCase fc = GetParam();
  FoldHarness h(fc.dir, fc.mha);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int8"));
  const StageRun run =
      run_stages(h.model_dir(), src, fixture_samples(fc.dir, 4), sq_stages(nullptr, h.config().model_type), specs);
  const double rel = logit_rel_diff(model_logits(h.model_dir(), src, h.tokens()),
                                    model_logits(h.model_dir(), *run.folded, h.tokens()));
  std::printf("[ sq stage ] %-10s %s: %llu groups smoothed, rel logit diff %.2e\n", fc.dir, fc.mha ? "mha" : "gqa",
              static_cast<unsigned long long>(run.summary.scaled_groups), rel);
  EXPECT_GE(run.summary.scaled_groups, static_cast<uint64_t>(fc.min_groups));
  EXPECT_LE(rel, 1e-5);
  ASSERT_FALSE(run.float_tensors.empty());
  for (const auto& [name, t] : run.float_tensors)
    EXPECT_EQ(host_tensor_f32(run.folded->load(name), name), t.values) << name;
  const nlohmann::ordered_json& a = run.algo_configs.at(0);
  EXPECT_EQ(keys_of(a),
            (std::vector<std::string>{"name", "alpha", "scale_clamp_min", "scaling_layers", "model_decoder_layers"}));
  EXPECT_EQ(a["name"], "smooth");
  EXPECT_EQ(a["alpha"].get<double>(), default_smoothquant_alpha(h.config().model_type));
  EXPECT_FALSE(a["scaling_layers"].empty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SmoothQuantStageFixture,
                         ::testing::Values(FixtureCase{"llama", true, 8}, FixtureCase{"phi3", true, 8},
                                           FixtureCase{"gemma", false, 6}, FixtureCase{"gemma3_text", false, 9},
                                           FixtureCase{"qwen2", true, 12}, FixtureCase{"mistral", false, 6},
                                           FixtureCase{"mixtral", true, 8}, FixtureCase{"qwen3_moe", true, 4}),
                         [](const auto& info) { return fixture_case_name(info); });

// At alpha 1 SmoothQuant's s_j is the input channel's max |x| (clamped): the
// smoothed group sees inputs whose per-channel max is 1 — read here from the
// folded input_layernorm against the original (s = w / w').
TEST(SmoothQuantStage, AlphaOneScalesAreTheActivationMax) {
  FoldHarness h("llama", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int8"));
  const CalibrationData data = fixture_samples("llama", 2);
  const StageRun run = run_stages(h.model_dir(), src, data, sq_stages(nullptr, "llama"), specs);
  EXPECT_EQ(run.algo_configs[0]["alpha"].dump(), "1");  // as Quark's map writes alpha=1
  // Layer 0's q_proj input max |x| over the same samples, on the original model.
  std::vector<float> amax(static_cast<size_t>(h.config().hidden_size), 0.0f);
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
    if (site.module != "model.layers.0.self_attn.q_proj") return;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < cols; ++j) amax[static_cast<size_t>(j)] = std::max(amax[static_cast<size_t>(j)], std::fabs(x[t * cols + j]));
  };
  engine::LoadOptions opt;
  opt.weights = engine::LoadOptions::Weights::kF32;
  auto model = engine::Model::load(h.model_dir(), opt, &src);
  for (const auto& s : data.samples) {
    auto cache = model->new_cache(static_cast<int64_t>(s.size()));
    (void)model->forward(s, *cache, true, &hooks);
  }
  const std::string norm = "model.layers.0.input_layernorm.weight";
  const auto w0 = host_tensor_f32(src.load(norm), norm), w1 = run.float_tensors.at(norm).values;
  for (size_t j = 0; j < amax.size(); ++j) {
    const double s = static_cast<double>(w0[j]) / w1[j];
    EXPECT_NEAR(s, std::max<double>(amax[j], 1e-3), 1e-5 * std::max<double>(1.0, amax[j])) << j;
  }
}

TEST(SmoothQuantStage, UnroutedExpertsStayUnscaled) {
  FoldHarness h("mixtral", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int8"));
  CalibrationData one;
  one.samples.push_back({h.tokens()[0]});  // 1 token x top-2 of 4 experts
  const StageRun run = run_stages(h.model_dir(), src, one, sq_stages(nullptr, "mixtral"), specs);
  EXPECT_GT(run.summary.unscaled_groups, 0u);
  EXPECT_TRUE(warned(run.summary, "no calibration token"));
  for (const auto& [module, spec] : specs) ASSERT_TRUE(all_finite(*run.folded, module + ".weight")) << module;
  EXPECT_LE(logit_rel_diff(model_logits(h.model_dir(), src, h.tokens()),
                           model_logits(h.model_dir(), *run.folded, h.tokens())),
            1e-5);
}

TEST(SmoothQuantStage, DemoModelFoldIsExact) {
  const std::filesystem::path dir = QLOOM_DEMO_MODEL_DIR;
  const io::ModelDir md = io::ModelDir::open(dir);
  const auto plain = engine::plain_weight_source(md);
  const F32Source src(*plain);
  const auto specs = every_linear(dir, src, spec_of("fp8"));
  const StageRun run = run_stages(dir, src, synthetic_samples(512, 6, 48), sq_stages(nullptr, "llama"), specs);
  EXPECT_EQ(run.summary.scaled_groups, 5u * 3u);  // GQA: no v_proj -> o_proj
  const std::vector<int32_t> tokens = synthetic_samples(512, 1, 64, 99).samples[0];
  const double rel = logit_rel_diff(model_logits(dir, src, tokens), model_logits(dir, *run.folded, tokens));
  std::printf("[ sq stage ] demo: rel logit diff %.2e\n", rel);
  EXPECT_LE(rel, 1e-5);
}

// smoothquant then gptq in one pipeline: gptq quantizes the smoothed weights
// (it claims every linear), the smoothed norms are still reported.
TEST(SmoothQuantStage, ComposesWithGptq) {
  FoldHarness h("llama", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int8"));
  std::vector<std::unique_ptr<AlgorithmStage>> stages = sq_stages(nullptr, "llama");
  stages.push_back(make_algorithm_stage("gptq", nullptr, "llama"));
  const StageRun run = run_stages(h.model_dir(), src, fixture_samples("llama", 2), std::move(stages), specs);
  EXPECT_EQ(run.algo_configs.size(), 2u);
  EXPECT_EQ(run.algo_configs[0]["name"], "smooth");
  EXPECT_EQ(run.algo_configs[1]["name"], "gptq");
  EXPECT_EQ(run.summary.algo_linears, specs.size());
  EXPECT_EQ(run.summary.scaled_groups, 8u);
  EXPECT_TRUE(run.float_tensors.count("model.layers.1.post_attention_layernorm.weight"));
}

}  // namespace
}  // namespace qloom::quant
