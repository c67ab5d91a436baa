// The AWQ stage (quant/awq_stage.h): its strict Quark-form config, the
// algo_config it writes, and — run in the layer-by-layer pipeline on the
// engine fixtures and the demo model — that the folded float layers compute
// the same function as the originals, that the exported (changed) tensors
// are what the later passes computed with, and the MoE fallback for experts
// without calibration tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstdio>

#include "qloom/io/model_dir.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/awq_stage.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/fold_harness.h"
#include "quant/stage_harness.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using testfold::FoldHarness;
using testfold::logit_rel_diff;
using namespace teststage;

// Quark's AWQ scaling_layers for llama (amd-quark 0.12.post1 algo_configs.py
// AWQ_MAP["llama"]), which qloom writes for an MHA llama.
const char* kQuarkLlamaScalingLayers = R"([
  {"prev_op": "input_layernorm", "layers": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
   "inp": "self_attn.q_proj", "module2inspect": "self_attn"},
  {"prev_op": "self_attn.v_proj", "layers": ["self_attn.o_proj"], "inp": "self_attn.o_proj"},
  {"prev_op": "post_attention_layernorm", "layers": ["mlp.gate_proj", "mlp.up_proj"],
   "inp": "mlp.gate_proj", "module2inspect": "mlp"},
  {"prev_op": "mlp.up_proj", "layers": ["mlp.down_proj"], "inp": "mlp.down_proj"}])";

Error config_error(const nlohmann::json& j) {
  return test::catch_error([&] { (void)AwqStageConfig::from_json(j); });
}

TEST(AwqStageConfig, DefaultsAndQuarksOwnDict) {
  const AwqStageConfig d = AwqStageConfig::from_json(nullptr);
  EXPECT_TRUE(d.scaling_layers.empty());
  EXPECT_EQ(d.model_decoder_layers, "model.layers");
  EXPECT_EQ(d.search.n_grid, 20);
  EXPECT_TRUE(d.search.clip);
  // Quark's llama AWQConfig dict as it stands, plus qloom-only search keys.
  const nlohmann::json quark = {{"name", "awq"},
                                {"scaling_layers", nlohmann::json::parse(kQuarkLlamaScalingLayers)},
                                {"model_decoder_layers", "model.layers"},
                                {"n_grid", 10},
                                {"clip", false}};
  const AwqStageConfig c = AwqStageConfig::from_json(quark);
  ASSERT_EQ(c.scaling_layers.size(), 4u);
  EXPECT_EQ(c.scaling_layers[0].prev_op, "input_layernorm");
  EXPECT_EQ(c.scaling_layers[0].layers.size(), 3u);
  EXPECT_EQ(c.scaling_layers[0].module2inspect, "self_attn");
  EXPECT_FALSE(c.scaling_layers[1].module2inspect.has_value());
  EXPECT_EQ(c.search.n_grid, 10);
  EXPECT_FALSE(c.search.clip);
  // Quark's dataclass default model_decoder_layers "" means the same.
  EXPECT_EQ(AwqStageConfig::from_json({{"model_decoder_layers", ""}}).model_decoder_layers, "model.layers");
}

TEST(AwqStageConfig, IsStrictAndNamesTheKey) {
  struct Case {
    nlohmann::json j;
    ErrorKind kind;
    std::string item;
  };
  const auto entry = [](nlohmann::json e) { return nlohmann::json{{"scaling_layers", nlohmann::json::array({e})}}; };
  const std::vector<Case> cases = {
      {{{"nme", "awq"}}, ErrorKind::kUsage, "algo_config.awq.nme"},
      {{{"name", "gptq"}}, ErrorKind::kUsage, "algo_config.awq.name"},
      {{{"name", 3}}, ErrorKind::kUsage, "algo_config.awq.name"},
      {{{"n_grid", 0}}, ErrorKind::kUsage, "algo_config.awq.n_grid"},
      {{{"n_grid", 2.5}}, ErrorKind::kUsage, "algo_config.awq.n_grid"},
      {{{"clip", 1}}, ErrorKind::kUsage, "algo_config.awq.clip"},
      {{{"max_shrink", 1.0}}, ErrorKind::kUsage, "algo_config.awq.max_shrink"},
      {{{"clip_max_tokens", 0}}, ErrorKind::kUsage, "algo_config.awq.clip_max_tokens"},
      {{{"direct_loss_bytes", -1}}, ErrorKind::kUsage, "algo_config.awq.direct_loss_bytes"},
      {{{"model_decoder_layers", "transformer.h"}}, ErrorKind::kUnsupported, "algo_config.awq.model_decoder_layers"},
      {{{"model_decoder_layers", 1}}, ErrorKind::kUsage, "algo_config.awq.model_decoder_layers"},
      {{{"scaling_layers", 3}}, ErrorKind::kUsage, "algo_config.awq.scaling_layers"},
      {entry(3), ErrorKind::kUsage, "algo_config.awq.scaling_layers[0]"},
      {entry({{"prev_op", "input_layernorm"}, {"layers", {"self_attn.q_proj"}}, {"inp", "self_attn.k_proj"}}),
       ErrorKind::kUsage, "algo_config.awq.scaling_layers[0].inp"},
      {entry({{"layers", {"self_attn.q_proj"}}, {"inp", "self_attn.q_proj"}}), ErrorKind::kUsage,
       "algo_config.awq.scaling_layers[0].prev_op"},
      {entry({{"prev_op", "input_layernorm"}, {"layers", nlohmann::json::array()}, {"inp", "x"}}), ErrorKind::kUsage,
       "algo_config.awq.scaling_layers[0].layers"},
      {entry({{"prev_op", "input_layernorm"}, {"layers", {"q"}}, {"inp", "q"}, {"scale", 1}}), ErrorKind::kUsage,
       "algo_config.awq.scaling_layers[0].scale"},
      {entry({{"prev_op", "input_layernorm"}, {"layers", {"q"}}, {"inp", "q"}, {"module2inspect", 2}}),
       ErrorKind::kUsage, "algo_config.awq.scaling_layers[0].module2inspect"},
      {nlohmann::json::array(), ErrorKind::kUsage, "algo_config.awq."},
  };
  for (const Case& c : cases) {
    const Error e = config_error(c.j);
    EXPECT_EQ(e.kind(), c.kind) << c.j.dump();
    EXPECT_EQ(e.item(), c.item) << c.j.dump();
  }
  EXPECT_NE(config_error({{"nme", 1}}).remedy().find("scaling_layers"), std::string::npos);
}

TEST(AwqStageConfig, EntriesMustNameGroupsOfTheModel) {
  const model::ModelConfig mc =
      model::ModelConfig::parse(io::ModelDir::open(test::engine_data_dir() / "llama").config());
  // Quark's qwen (v1) map: module names this llama does not have.
  const nlohmann::json qwen = {
      {"scaling_layers", {{{"prev_op", "ln_1"}, {"layers", {"attn.c_attn"}}, {"inp", "attn.c_attn"}}}}};
  auto stage = make_awq_stage(AwqStageConfig::from_json(qwen));
  const Error e = test::catch_error([&] { stage->start(mc); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "algo_config.awq.scaling_layers[0]");
  // Quark's llama map is accepted (its v_proj -> o_proj entry names a group
  // that exists, inapplicable under this fixture's GQA).
  auto ok = make_awq_stage(
      AwqStageConfig::from_json({{"scaling_layers", nlohmann::json::parse(kQuarkLlamaScalingLayers)}}));
  EXPECT_NO_THROW(ok->start(mc));
}

TEST(AlgorithmRegistry, AwqAndSmoothQuantAreImplemented) {
  const auto impl = implemented_algorithms();
  for (const char* a : {"awq", "gptq", "smoothquant", "rotation", "gptaq", "qronos", "autosmoothquant"}) EXPECT_NE(std::find(impl.begin(), impl.end(), a), impl.end()) << a;
  EXPECT_EQ(make_algorithm_stage("awq", nullptr, "llama")->name(), "awq");
  EXPECT_EQ(make_algorithm_stage("smoothquant", nullptr, "llama")->name(), "smoothquant");
  EXPECT_EQ(test::catch_error([] { make_algorithm_stage("awq", {{"n_grid", -1}}, "llama"); }).kind(),
            ErrorKind::kUsage);
  EXPECT_EQ(make_algorithm_stage("autosmoothquant", nullptr, "llama")->name(), "autosmoothquant");
  EXPECT_EQ(test::catch_error([] { make_algorithm_stage("autoround", nullptr, "llama"); }).kind(),
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

std::vector<std::unique_ptr<AlgorithmStage>> awq_stages(const nlohmann::json& cfg) {
  std::vector<std::unique_ptr<AlgorithmStage>> v;
  v.push_back(make_algorithm_stage("awq", cfg, "llama"));
  return v;
}

class AwqStageFixture : public ::testing::TestWithParam<FixtureCase> {};

// Clip off: the clip search changes the function on purpose (it clamps
// weights before quantization); the fold alone must not.
TEST_P(AwqStageFixture, FoldedLayersComputeTheSameFunction) {
  const FixtureCase fc = GetParam();
  FoldHarness h(fc.dir, fc.mha);
  const F32Source src(h.base());
  // int4 per channel fits every shape of every fixture.
  const auto specs = every_linear(h.model_dir(), src, spec_of("int4_wo_per_channel"));
  StageRun run = run_stages(h.model_dir(), src, fixture_samples(fc.dir, 4), awq_stages({{"clip", false}}), specs);
  const std::vector<float> orig = model_logits(h.model_dir(), src, h.tokens());
  const std::vector<float> folded = model_logits(h.model_dir(), *run.folded, h.tokens());
  const double rel = logit_rel_diff(orig, folded);
  std::printf("[ awq stage ] %-10s %s: %llu groups folded, %zu changed tensors, rel logit diff %.2e\n", fc.dir,
              fc.mha ? "mha" : "gqa", static_cast<unsigned long long>(run.summary.scaled_groups),
              run.float_tensors.size(), rel);
  EXPECT_GE(run.summary.scaled_groups, static_cast<uint64_t>(fc.min_groups));
  EXPECT_LE(rel, 1e-5);
  // The exporter gets exactly the changed norms the later passes used (a
  // group whose search chose r = 0 folds s = 1: reported, but unchanged).
  ASSERT_FALSE(run.float_tensors.empty());
  int differ = 0;
  for (const auto& [name, t] : run.float_tensors) {
    const std::vector<float> captured = host_tensor_f32(run.folded->load(name), name);
    EXPECT_EQ(captured, t.values) << name;
    differ += captured != host_tensor_f32(src.load(name), name);
  }
  EXPECT_GT(differ, 0);
  // algo_config: Quark's keys and order; scaling_layers lists every folded
  // group's entry in Quark's form.
  ASSERT_EQ(run.algo_configs.size(), 1u);
  const nlohmann::ordered_json& a = run.algo_configs[0];
  EXPECT_EQ(keys_of(a), (std::vector<std::string>{"name", "scaling_layers", "model_decoder_layers"}));
  EXPECT_EQ(a["name"], "awq");
  EXPECT_EQ(a["model_decoder_layers"], "model.layers");
  ASSERT_TRUE(a["scaling_layers"].is_array());
  ASSERT_FALSE(a["scaling_layers"].empty());
  for (const auto& e : a["scaling_layers"]) {
    const auto k = keys_of(e);
    ASSERT_GE(k.size(), 3u);
    EXPECT_EQ((std::vector<std::string>(k.begin(), k.begin() + 3)),
              (std::vector<std::string>{"prev_op", "layers", "inp"}));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AwqStageFixture,
                         ::testing::Values(FixtureCase{"llama", true, 8}, FixtureCase{"llama", false, 6},
                                           FixtureCase{"phi3", true, 8}, FixtureCase{"gemma", false, 6},
                                           FixtureCase{"gemma2", false, 9}, FixtureCase{"qwen2", true, 12},
                                           FixtureCase{"qwen3", false, 6}, FixtureCase{"mixtral", true, 8},
                                           FixtureCase{"qwen2_moe", true, 12}),
                         [](const auto& info) { return fixture_case_name(info); });

TEST(AwqStage, LlamaMhaWritesQuarksLlamaMap) {
  FoldHarness h("llama", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int4_wo_per_channel"));
  const StageRun run = run_stages(h.model_dir(), src, fixture_samples("llama", 2), awq_stages(nullptr), specs);
  const nlohmann::ordered_json expected = nlohmann::ordered_json::parse(kQuarkLlamaScalingLayers);
  EXPECT_EQ(run.algo_configs[0]["scaling_layers"].dump(), expected.dump());
}

TEST(AwqStage, SelectedGroupsOnly) {
  FoldHarness h("llama", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int4_wo_per_channel"));
  const nlohmann::json only_attn_in = {
      {"scaling_layers", nlohmann::json::array({nlohmann::json::parse(kQuarkLlamaScalingLayers)[0]})}};
  const StageRun run = run_stages(h.model_dir(), src, fixture_samples("llama", 2), awq_stages(only_attn_in), specs);
  EXPECT_EQ(run.summary.scaled_groups, static_cast<uint64_t>(h.config().num_layers));
  EXPECT_EQ(run.algo_configs[0]["scaling_layers"].size(), 1u);
  for (const auto& [name, t] : run.float_tensors) EXPECT_NE(name.find("input_layernorm"), std::string::npos) << name;
}

// With clip on (the default) every clipped weight of layer 0 stays within
// the folded weight's range (later layers' scales differ between the runs:
// their inputs come from differently quantized layers), q / k are never
// clipped, and the model stays close (the clip lowers quantization error, it
// does not rewrite the function).
TEST(AwqStage, ClipOnlyShrinksWeights) {
  FoldHarness h("llama", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int4_wo_per_channel"));
  const CalibrationData data = fixture_samples("llama", 4);
  const StageRun noclip = run_stages(h.model_dir(), src, data, awq_stages({{"clip", false}}), specs);
  const StageRun clip = run_stages(h.model_dir(), src, data, awq_stages(nullptr), specs);
  int clipped = 0;
  for (const auto& [module, spec] : specs) {
    if (module.rfind("model.layers.0.", 0) != 0) continue;
    const std::string w = module + ".weight";
    const auto a = host_tensor_f32(noclip.folded->load(w), w), b = host_tensor_f32(clip.folded->load(w), w);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_LE(std::fabs(b[i]), std::fabs(a[i])) << w << "[" << i << "]";
      EXPECT_TRUE(b[i] == a[i] || std::signbit(b[i]) == std::signbit(a[i])) << w;
    }
    if (a != b) ++clipped;
    if (module.find("q_proj") != std::string::npos || module.find("k_proj") != std::string::npos) {
      EXPECT_EQ(a, b) << module << ": Quark does not clip q / k";
    }
  }
  EXPECT_GT(clipped, 0);
  const double rel = logit_rel_diff(model_logits(h.model_dir(), src, h.tokens()),
                                    model_logits(h.model_dir(), *clip.folded, h.tokens()));
  std::printf("[ awq stage ] llama mha with clip: %d linears clipped, rel logit diff %.3e\n", clipped, rel);
  EXPECT_LT(rel, 0.2);
}

// Runs AWQ twice, with `fast` stage settings and with direct_loss_bytes 0
// (every candidate evaluated by re-running the layer per sample, the
// reference path), and expects the same scales and clips, so the same folded
// model, on a dense, a sandwich-norm and an MoE architecture.
void expect_same_as_rerun(const nlohmann::json& fast_cfg, const CalibrationData& data, const char* first_half_phase) {
  for (const char* arch : {"llama", "gemma2", "qwen2_moe"}) {
    FoldHarness h(arch, true);
    const F32Source src(h.base());
    const bool moe = std::string(arch) == "qwen2_moe";  // experts' in_features 16
    const auto specs = every_linear(h.model_dir(), src, spec_of(moe ? "int4_wo_per_channel" : "int4_wo_32"));
    const StageRun fast = run_stages(h.model_dir(), src, data, awq_stages(fast_cfg), specs);
    const StageRun rerun = run_stages(h.model_dir(), src, data, awq_stages({{"direct_loss_bytes", 0}}), specs);
    EXPECT_EQ(fast.summary.scaled_groups, rerun.summary.scaled_groups) << arch;
    EXPECT_TRUE(fast.summary.phase_seconds.count(first_half_phase)) << arch << ": the first half was not kept";
    EXPECT_FALSE(rerun.summary.phase_seconds.count(first_half_phase)) << arch;
    EXPECT_TRUE(rerun.summary.phase_seconds.count("awq.reference.layer")) << arch;
    int compared = 0;
    for (const auto& [module, spec] : specs) {
      const std::string w = module + ".weight";
      const auto a = host_tensor_f32(fast.folded->load(w), w), b = host_tensor_f32(rerun.folded->load(w), w);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6 * std::max(1.0f, std::fabs(b[i]))) << w;
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }
}

// The fast paths: single-linear groups (up -> down, v -> o, experts) scored
// from the Gram matrix of their inputs, the feed-forward groups on the kept
// first-half output in token parts of decreasing error, clip inputs from the
// one reference pass. 576 tokens: 5 token parts of 128.
TEST(AwqStage, FastPathsMatchReRunningTheLayer) {
  expect_same_as_rerun(nlohmann::json::object(), synthetic_samples(256, 8, 72), "awq.reference.first_half");
}

// direct_loss_bytes 100000 with 144 tokens: the dense models' down_proj Gram
// matrices (128^2 and 96^2 entries x 12 bytes) do not fit, their inputs
// (144 x 128 / 96 floats) do: candidates evaluated on the kept inputs.
TEST(AwqStage, KeptInputsPathMatchesReRunningTheLayer) {
  expect_same_as_rerun({{"direct_loss_bytes", 100000}}, synthetic_samples(256, 2, 72), "awq.reference.first_half");
}

// MoE experts no calibration token reaches: no scaling for them (counted,
// warned), nothing non-finite, the fold of the others still exact.
TEST(AwqStage, UnroutedExpertsStayUnscaled) {
  FoldHarness h("qwen2_moe", true);
  const F32Source src(h.base());
  const auto specs = every_linear(h.model_dir(), src, spec_of("int4_wo_per_channel"));
  CalibrationData one;
  one.samples.push_back({h.tokens()[0], h.tokens()[1]});  // 2 tokens x top-2 of 6 experts
  const StageRun run = run_stages(h.model_dir(), src, one, awq_stages({{"clip", false}}), specs);
  EXPECT_GT(run.summary.unscaled_groups, 0u);
  EXPECT_GT(run.summary.scaled_groups, 0u);
  EXPECT_TRUE(warned(run.summary, "no calibration token"));
  for (const auto& [module, spec] : specs) EXPECT_TRUE(all_finite(*run.folded, module + ".weight")) << module;
  EXPECT_LE(logit_rel_diff(model_logits(h.model_dir(), src, h.tokens()),
                           model_logits(h.model_dir(), *run.folded, h.tokens())),
            1e-5);
}

// The bundled demo model (GQA, intermediate 172): attention input and both
// MLP groups fold; the float model is unchanged.
TEST(AwqStage, DemoModelFoldIsExact) {
  const std::filesystem::path dir = QLOOM_DEMO_MODEL_DIR;
  const io::ModelDir md = io::ModelDir::open(dir);
  const auto plain = engine::plain_weight_source(md);
  const F32Source src(*plain);
  const auto specs = every_linear(dir, src, spec_of("uint4_wo_per_channel"));
  const CalibrationData data = synthetic_samples(512, 6, 48);
  const StageRun run = run_stages(dir, src, data, awq_stages({{"clip", false}}), specs);
  EXPECT_EQ(run.summary.scaled_groups, 5u * 3u);  // attn_in, mlp_in, mlp_out per layer
  const std::vector<int32_t> tokens = synthetic_samples(512, 1, 64, 99).samples[0];
  const double rel = logit_rel_diff(model_logits(dir, src, tokens), model_logits(dir, *run.folded, tokens));
  std::printf("[ awq stage ] demo: rel logit diff %.2e\n", rel);
  EXPECT_LE(rel, 1e-5);
}

}  // namespace
}  // namespace qloom::quant
