// The layer-by-layer calibration pipeline (quant/pipeline.h) and its GPTQ
// stage (quant/gptq_stage.h) on the engine's tiny golden fixtures.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine_fixture.h"
#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/model.h"
#include "qloom/quant/activation_observer.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/gptq_stage.h"
#include "qloom/quant/pipeline.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/io/model_dir.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

namespace fs = std::filesystem;

QuantSpec int4_g(int g) {
  QuantSpec s;
  s.dtype = QDtype::kInt4;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = g;
  return s;
}

CalibrationData samples_of(const fs::path& dir, size_t n) {
  const test::Reference ref = test::read_reference(dir);
  CalibrationData d;
  for (size_t i = 0; i < n; ++i) d.samples.push_back(i % 2 ? ref.tokens_short : ref.tokens_long);
  return d;
}

// Every decoder-layer linear of the checkpoint whose in_features the group divides.
std::map<std::string, QuantSpec> all_linears(const fs::path& dir, int group) {
  const io::ModelDir md = io::ModelDir::open(dir, true);
  std::map<std::string, QuantSpec> out;
  for (const auto& name : md.weights().tensor_names()) {
    const auto& shape = md.weights().find(name)->shape;
    if (shape.size() != 2 || name.find(".layers.") == std::string::npos) continue;
    if (name.size() < 7 || name.substr(name.size() - 7) != ".weight" || shape[1] % static_cast<uint64_t>(group)) continue;
    out[name.substr(0, name.size() - 7)] = int4_g(group);
  }
  return out;
}

// Every int4-g16-able linear of the fixture, fp32 model dtype.
PipelineRequest f32_request(const fs::path& dir) {
  PipelineRequest req;
  req.model_dir = dir;
  req.weight_specs = all_linears(dir, 16);
  req.model_dtype = DType::kF32;
  return req;
}

std::vector<std::unique_ptr<AlgorithmStage>> gptq_stages(const nlohmann::json& cfg = nullptr) {
  std::vector<std::unique_ptr<AlgorithmStage>> v;
  v.push_back(make_algorithm_stage("gptq", cfg, "llama"));
  return v;
}

TEST(Pipeline, WithoutQuantizationObservesWhatTheWholeModelObserves) {
  const fs::path dir = test::engine_data_dir() / "qwen2_moe";
  const CalibrationData data = samples_of(dir, 3);
  engine::LoadOptions lo;
  lo.threads = 2;
  auto model = engine::Model::load(dir, lo);
  std::set<std::string> ins = {"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.experts.2.down_proj",
                               "lm_head"},
                        outs = {"model.layers.1.self_attn.k_proj", "model.layers.0.self_attn.v_proj"};
  const AmaxObservation whole = observe_activation_amax(*model, data, ins, outs);

  PipelineRequest req;
  req.model_dir = dir;
  req.observe_inputs = ins;
  req.observe_outputs = outs;
  req.model_dtype = DType::kF32;
  req.threads = 2;
  CalibrationPipeline p(req, data, {});
  std::map<std::string, float> in_amax, out_amax;
  EXPECT_THROW(p.run_layer(1), Error);
  for (int64_t i = 0; i < p.num_layers(); ++i) {
    const LayerResult r = p.run_layer(i);
    EXPECT_TRUE(r.weights.empty());
    in_amax.insert(r.input_amax.begin(), r.input_amax.end());
    out_amax.insert(r.output_amax.begin(), r.output_amax.end());
  }
  const auto head = p.finish();
  // lm_head: the pipeline observes every position; observe_activation_amax
  // runs forward(last_only) and so sees only the last one.
  ASSERT_TRUE(head.count("lm_head"));
  EXPECT_GE(head.at("lm_head"), whole.input_amax.at("lm_head"));
  auto body = whole.input_amax;
  body.erase("lm_head");
  EXPECT_EQ(in_amax, body);
  EXPECT_EQ(out_amax, whole.output_amax);
  EXPECT_EQ(p.summary().samples, 3u);
  EXPECT_EQ(p.summary().layer_seconds.size(), static_cast<size_t>(p.num_layers()));
  EXPECT_THROW(p.finish(), Error);
}

TEST(Pipeline, RtnWithoutStagesEqualsQuantizeWeight) {
  const fs::path dir = test::engine_data_dir() / "llama";
  PipelineRequest req = f32_request(dir);
  CalibrationPipeline p(req, samples_of(dir, 2), {});
  const io::ModelDir md = io::ModelDir::open(dir, true);
  size_t n = 0;
  for (int64_t i = 0; i < p.num_layers(); ++i) {
    const LayerResult r = p.run_layer(i);
    for (const auto& [module, qt] : r.weights) {
      const io::TensorView v = md.weights().view(module + ".weight");
      std::vector<float> w(v.numel());
      to_f32(v.dtype(), v.data.data(), w.data(), w.size());
      const QuantizedTensor ref = quantize_weight_ref(w.data(), v.shape()[0], v.shape()[1], int4_g(16),
                                                      quark_scale_dtype(int4_g(16), DType::kF32), module, DType::kF32);
      EXPECT_EQ(qt.codes, ref.codes) << module;
      EXPECT_EQ(qt.scales, ref.scales) << module;
      ++n;
    }
  }
  EXPECT_EQ(n, req.weight_specs.size());
  EXPECT_EQ(p.summary().rtn_linears, n);
}

class PipelineGptq : public ::testing::TestWithParam<const char*> {};

TEST_P(PipelineGptq, QuantizesEveryTargetOfEveryArchitecture) {
  const fs::path dir = test::engine_data_dir() / GetParam();
  PipelineRequest req = f32_request(dir);
  req.threads = 2;
  CalibrationPipeline p(req, samples_of(dir, 4), gptq_stages());
  size_t n = 0;
  for (int64_t i = 0; i < p.num_layers(); ++i) {
    const LayerResult r = p.run_layer(i);
    for (const auto& [module, qt] : r.weights) {
      EXPECT_EQ(qt.spec, int4_g(16));
      for (float s : qt.scales) ASSERT_TRUE(std::isfinite(s)) << module;
      ++n;
    }
  }
  (void)p.finish();
  const PipelineSummary& s = p.summary();
  EXPECT_EQ(n, req.weight_specs.size());
  EXPECT_EQ(s.algo_linears + s.unrouted_experts + s.algo_fallbacks, n);
  EXPECT_EQ(s.algo_fallbacks, 0u);
  EXPECT_GT(s.algo_linears, 0u);
  if (std::string(GetParam()).find("moe") == std::string::npos && std::string(GetParam()) != "mixtral") {
    EXPECT_EQ(s.unrouted_experts, 0u);  // dense: every linear has tokens (shared Hessians included)
  }
  const nlohmann::ordered_json cfg = p.stages()[0]->algo_config();
  EXPECT_FALSE(cfg["inside_layer_modules"].empty());
}

INSTANTIATE_TEST_SUITE_P(Archs, PipelineGptq,
                         ::testing::Values("llama", "gemma2", "phi3", "mixtral", "qwen2_moe", "qwen3_moe"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

TEST(PipelineGptq, ExpertsWithoutTokensFallBackToRtnWithAWarning) {
  const fs::path dir = test::engine_data_dir() / "qwen3_moe";
  PipelineRequest req = f32_request(dir);
  CalibrationData one;
  one.samples = {{5, 9}};  // 2 tokens x top-k experts: most experts see none
  CalibrationPipeline p(req, one, gptq_stages());
  for (int64_t i = 0; i < p.num_layers(); ++i) (void)p.run_layer(i);
  (void)p.finish();
  EXPECT_GT(p.summary().unrouted_experts, 0u);
  ASSERT_FALSE(p.summary().warnings.empty());
  EXPECT_NE(p.summary().warnings[0].find("no calibration token"), std::string::npos);
}

TEST(PipelineGptq, SequentialAndOnePassAgreeOnTheFirstStage) {
  // q/k/v come first: their Hessians do not depend on true_sequential.
  const fs::path dir = test::engine_data_dir() / "llama";
  std::map<std::string, QuantizedTensor> results[2];
  for (int seq = 0; seq < 2; ++seq) {
    PipelineRequest req = f32_request(dir);
    CalibrationPipeline p(req, samples_of(dir, 2), gptq_stages({{"true_sequential", seq == 1}}));
    results[seq] = p.run_layer(0).weights;
  }
  const std::string q = "model.layers.0.self_attn.q_proj", down = "model.layers.0.mlp.down_proj";
  EXPECT_EQ(results[0].at(q).codes, results[1].at(q).codes);
  EXPECT_NE(results[0].at(down).codes, results[1].at(down).codes);
}

// GPTQ run stage by stage in one pass (and, claiming every linear, producing
// the next layer's inputs with the static-scale observations) is the very
// arithmetic of one pass per stage plus the pipeline's propagation: every
// layer's codes, scales and observed amax are equal, for all linears and for
// a subset (the rest round-to-nearest after GPTQ, propagated by the pipeline).
class PipelineGptqStepped : public ::testing::TestWithParam<const char*> {};

TEST_P(PipelineGptqStepped, SameBytesAsOnePassPerStage) {
  const fs::path dir = test::engine_data_dir() / GetParam();
  for (const bool subset : {false, true}) {
    std::vector<LayerResult> results[2];
    std::map<std::string, float> heads[2];
    for (int stepped = 0; stepped < 2; ++stepped) {
      PipelineRequest req = f32_request(dir);
      for (const auto& [m, spec] : req.weight_specs) {
        req.observe_inputs.insert(m);
        req.observe_outputs.insert(m);
      }
      req.observe_inputs.insert("lm_head");
      GptqConfig c = GptqConfig::from_json({{"desc_act", false}, {"static_groups", false}});
      c.stepped = stepped == 1;
      if (subset) c.inside_layer_modules = {"self_attn.o_proj", "mlp.up_proj", "mlp.gate_up_proj"};
      std::vector<std::unique_ptr<AlgorithmStage>> stages;
      stages.push_back(make_gptq_stage(c));
      CalibrationPipeline p(req, samples_of(dir, 3), std::move(stages));
      for (int64_t i = 0; i < p.num_layers(); ++i) results[stepped].push_back(p.run_layer(i));
      heads[stepped] = p.finish();
      if (stepped == 1) {  // the stepped pass propagates itself only when it claims every linear
        EXPECT_EQ(p.summary().phase_seconds.count("pipeline.propagate"), subset ? 1u : 0u);
      }
      EXPECT_GT(p.summary().algo_linears, 0u);
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t l = 0; l < results[0].size(); ++l) {
      const LayerResult &a = results[0][l], &b = results[1][l];
      ASSERT_EQ(a.weights.size(), b.weights.size());
      for (const auto& [name, qa] : a.weights) {
        const QuantizedTensor& qb = b.weights.at(name);
        EXPECT_EQ(qa.codes, qb.codes) << name << (subset ? " (subset)" : "");
        EXPECT_EQ(qa.scales, qb.scales) << name;
      }
      EXPECT_FALSE(a.input_amax.empty());
      EXPECT_EQ(a.input_amax, b.input_amax) << "layer " << l;
      EXPECT_EQ(a.output_amax, b.output_amax) << "layer " << l;
    }
    EXPECT_EQ(heads[0], heads[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, PipelineGptqStepped, ::testing::Values("llama", "gemma2", "phi3", "qwen3"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

TEST(GptqConfig, StrictKeysAndQuarksDict) {
  const GptqConfig d = GptqConfig::from_json(nullptr);
  EXPECT_EQ(d.block_size, 128);
  EXPECT_DOUBLE_EQ(d.damp_percent, 0.01);
  EXPECT_TRUE(d.desc_act);
  EXPECT_TRUE(d.static_groups);
  EXPECT_EQ(test::catch_error([] { GptqConfig::from_json({{"damp_precent", 0.1}}); }).kind(), ErrorKind::kUsage);
  EXPECT_THROW(GptqConfig::from_json({{"block_size", 0}}), Error);
  EXPECT_THROW(GptqConfig::from_json({{"desc_act", true}, {"static_groups", false}}), Error);
  EXPECT_THROW(GptqConfig::from_json({{"name", "awq"}}), Error);
  const GptqConfig c = GptqConfig::from_json(
      {{"name", "gptq"}, {"damp_percent", 0.05}, {"desc_act", false}, {"inside_layer_modules", {"self_attn.q_proj"}}});
  const auto stage = make_gptq_stage(c);
  const nlohmann::ordered_json j = stage->algo_config();
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "block_size", "damp_percent", "desc_act", "static_groups",
                                            "inside_layer_modules", "model_decoder_layers"}));
  EXPECT_EQ(j["inside_layer_modules"], nlohmann::json::array({"self_attn.q_proj"}));
  EXPECT_EQ(j["model_decoder_layers"], "model.layers");
}

TEST(AlgorithmRegistry, NamesAndRefusals) {
  EXPECT_EQ(split_quant_algo("smoothquant, gptq"), (std::vector<std::string>{"smoothquant", "gptq"}));
  EXPECT_THROW(split_quant_algo("gptq,,awq"), Error);
  EXPECT_THROW(split_quant_algo("gptq,gptq"), Error);
  EXPECT_EQ(test::catch_error([] { make_algorithm_stage("twobitscalar", nullptr, "llama"); }).kind(),
            ErrorKind::kUnsupported);
  EXPECT_EQ(make_algorithm_stage("rotation", nullptr, "llama")->name(), "rotation");
  EXPECT_EQ(test::catch_error([] { make_algorithm_stage("rotation", {{"r4", true}}, "llama"); }).kind(),
            ErrorKind::kUnsupported);
  EXPECT_EQ(test::catch_error([] { make_algorithm_stage("gtpq", nullptr, "llama"); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(make_algorithm_stage("gptq", nullptr, "llama")->name(), "gptq");
}

}  // namespace
}  // namespace qloom::quant
