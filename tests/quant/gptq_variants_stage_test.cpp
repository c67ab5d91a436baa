// The pipeline's float stream (quant/pipeline.h) and the GPTAQ / Qronos
// stages (quant/gptaq_stage.h, quant/qronos_stage.h, the shared two-stream
// collection in quant/paired_hessian_stage.h) on the engine's tiny fixtures.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>

#include "engine/engine_fixture.h"
#include "qloom/core/error.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/gptaq_stage.h"
#include "qloom/quant/pipeline.h"
#include "qloom/quant/qronos_stage.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

namespace fs = std::filesystem;

QuantSpec int4_g16() {
  QuantSpec s;
  s.dtype = QDtype::kInt4;
  s.qscheme = QScheme::kPerGroup;
  s.group_size = 16;
  return s;
}

CalibrationData samples_of(const fs::path& dir, size_t n) {
  const test::Reference ref = test::read_reference(dir);
  CalibrationData d;
  for (size_t i = 0; i < n; ++i) d.samples.push_back(i % 2 ? ref.tokens_short : ref.tokens_long);
  return d;
}

PipelineRequest request(const fs::path& dir, bool quantize, unsigned threads = 2) {
  PipelineRequest req;
  req.model_dir = dir;
  req.model_dtype = DType::kF32;
  req.threads = threads;
  if (!quantize) return req;
  const io::ModelDir md = io::ModelDir::open(dir, true);
  for (const auto& name : md.weights().tensor_names()) {
    const auto& shape = md.weights().find(name)->shape;
    if (shape.size() != 2 || name.find(".layers.") == std::string::npos || shape[1] % 16) continue;
    if (name.size() < 7 || name.substr(name.size() - 7) != ".weight") continue;
    req.weight_specs[name.substr(0, name.size() - 7)] = int4_g16();
  }
  return req;
}

// Records every layer's float_inputs() (or, without the stream, inputs()).
class Probe final : public AlgorithmStage {
 public:
  Probe(bool want, std::vector<std::vector<std::vector<float>>>& out) : want_(want), out_(out) {}
  std::string name() const override { return "probe"; }
  nlohmann::ordered_json algo_config() const override { return nullptr; }
  bool wants_float_stream() const override { return want_; }
  void process_layer(LayerSession& s) override {
    out_.push_back(want_ ? s.float_inputs() : s.inputs());
    if (!want_) {
      EXPECT_THROW(s.float_inputs(), Error);
    }
  }

 private:
  bool want_;
  std::vector<std::vector<std::vector<float>>>& out_;
};

TEST(PipelineFloatStream, IsTheUnquantizedModelsLayerInputs) {
  for (const char* arch : {"llama", "qwen2_moe"}) {
    SCOPED_TRACE(arch);
    const fs::path dir = test::engine_data_dir() / arch;
    std::vector<std::vector<std::vector<float>>> floats, plain;
    {  // every linear quantized (RTN after the probe); the probe reads the float stream
      std::vector<std::unique_ptr<AlgorithmStage>> st;
      st.push_back(std::make_unique<Probe>(true, floats));
      CalibrationPipeline p(request(dir, true), samples_of(dir, 3), std::move(st));
      for (int64_t i = 0; i < p.num_layers(); ++i) EXPECT_FALSE(p.run_layer(i).weights.empty());
      (void)p.finish();
    }
    {  // nothing quantized: the pipeline's own stream is the float model's
      std::vector<std::unique_ptr<AlgorithmStage>> st;
      st.push_back(std::make_unique<Probe>(false, plain));
      CalibrationPipeline p(request(dir, false), samples_of(dir, 3), std::move(st));
      for (int64_t i = 0; i < p.num_layers(); ++i) (void)p.run_layer(i);
      (void)p.finish();
    }
    ASSERT_EQ(floats.size(), plain.size());
    for (size_t l = 0; l < floats.size(); ++l) EXPECT_EQ(floats[l], plain[l]) << "layer " << l;
  }
}

std::vector<std::unique_ptr<AlgorithmStage>> one(std::unique_ptr<AlgorithmStage> s) {
  std::vector<std::unique_ptr<AlgorithmStage>> v;
  v.push_back(std::move(s));
  return v;
}

std::unique_ptr<AlgorithmStage> variant(const std::string& algo, bool stepped, const nlohmann::json& j = nullptr) {
  if (algo == "gptaq") {
    GptaqConfig c = GptaqConfig::from_json(j);
    c.common.stepped = stepped;
    return make_gptaq_stage(c);
  }
  QronosConfig c = QronosConfig::from_json(j);
  c.common.stepped = stepped;
  return make_qronos_stage(c);
}

std::vector<LayerResult> run_all(const fs::path& dir, std::unique_ptr<AlgorithmStage> st, unsigned threads,
                                 PipelineSummary* summary = nullptr, bool observe = false) {
  PipelineRequest req = request(dir, true, threads);
  if (observe)
    for (const auto& [m, spec] : req.weight_specs) req.observe_inputs.insert(m);
  CalibrationPipeline p(req, samples_of(dir, 4), one(std::move(st)));
  std::vector<LayerResult> out;
  for (int64_t i = 0; i < p.num_layers(); ++i) out.push_back(p.run_layer(i));
  (void)p.finish();
  if (summary) *summary = p.summary();
  return out;
}

class Variants : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(Variants, QuantizeEveryTargetDeterministically) {
  const auto [algo, arch] = GetParam();
  const fs::path dir = test::engine_data_dir() / arch;
  PipelineSummary s;
  const std::vector<LayerResult> a = run_all(dir, variant(algo, true), 1, &s);
  size_t n = 0;
  for (const LayerResult& r : a) n += r.weights.size();
  EXPECT_EQ(n, request(dir, true).weight_specs.size());
  EXPECT_EQ(s.algo_linears + s.unrouted_experts, n);
  EXPECT_EQ(s.algo_fallbacks, 0u);
  EXPECT_GT(s.algo_linears, 0u);
  // Three threads: the same bytes.
  const std::vector<LayerResult> b = run_all(dir, variant(algo, true), 3);
  for (size_t l = 0; l < a.size(); ++l)
    for (const auto& [name, qt] : a[l].weights) {
      EXPECT_EQ(qt.codes, b[l].weights.at(name).codes) << name;
      EXPECT_EQ(qt.scales, b[l].weights.at(name).scales) << name;
    }
}

INSTANTIATE_TEST_SUITE_P(Archs, Variants,
                         ::testing::Combine(::testing::Values("gptaq", "qronos"),
                                            ::testing::Values("llama", "phi3", "qwen2_moe", "mixtral")),
                         [](const auto& i) {
                           return std::string(std::get<0>(i.param)) + "_" + std::get<1>(i.param);
                         });

TEST(Variants, SteppedIsTheArithmeticOfOnePassPairPerStage) {
  for (const char* algo : {"gptaq", "qronos"}) {
    SCOPED_TRACE(algo);
    const fs::path dir = test::engine_data_dir() / "llama";
    const std::vector<LayerResult> a = run_all(dir, variant(algo, true), 2, nullptr, true);
    const std::vector<LayerResult> b = run_all(dir, variant(algo, false), 2, nullptr, true);
    for (size_t l = 0; l < a.size(); ++l) {
      for (const auto& [name, qt] : a[l].weights) EXPECT_EQ(qt.codes, b[l].weights.at(name).codes) << name;
      EXPECT_EQ(a[l].input_amax, b[l].input_amax) << "layer " << l;
    }
  }
}

TEST(Variants, DifferFromGptqOnlyThroughTheFloatStream) {
  // GPTAQ with alpha 0 ignores the cross term: GPTQ (no act order, static
  // groups) on the same layers gives the same codes.
  const fs::path dir = test::engine_data_dir() / "llama";
  const std::vector<LayerResult> a = run_all(dir, variant("gptaq", true, {{"alpha", 0.0}}), 2);
  PipelineRequest req = request(dir, true);
  CalibrationPipeline p(req, samples_of(dir, 4), one(make_algorithm_stage("gptq", nullptr, "llama")));
  for (size_t l = 0; l < a.size(); ++l) {
    const LayerResult g = p.run_layer(static_cast<int64_t>(l));
    for (const auto& [name, qt] : a[l].weights) EXPECT_EQ(qt.codes, g.weights.at(name).codes) << name;
  }
  const std::vector<LayerResult> d = run_all(dir, variant("gptaq", true), 2);
  EXPECT_NE(d.back().weights.begin()->second.codes, a.back().weights.begin()->second.codes);
}

TEST(VariantConfigs, StrictKeysAndQuarksDicts) {
  const GptaqConfig g = GptaqConfig::from_json(nullptr);
  EXPECT_DOUBLE_EQ(g.alpha, 0.25);
  EXPECT_DOUBLE_EQ(g.damp_percent, 0.01);
  EXPECT_EQ(g.common.block_size, 128);
  const QronosConfig q = QronosConfig::from_json(nullptr);
  EXPECT_DOUBLE_EQ(q.alpha, 1e-3);
  EXPECT_DOUBLE_EQ(q.beta, 1e4);
  EXPECT_TRUE(q.common.desc_act && q.common.static_groups);
  for (const char* algo : {"gptaq", "qronos"}) {
    SCOPED_TRACE(algo);
    const auto parse = [&](const nlohmann::json& j) {
      return std::string(algo) == "gptaq" ? (void)GptaqConfig::from_json(j) : (void)QronosConfig::from_json(j);
    };
    EXPECT_EQ(test::catch_error([&] { parse({{"damp_precent", 0.1}}); }).kind(), ErrorKind::kUsage);
    EXPECT_EQ(test::catch_error([&] { parse({{"block_size", 0}}); }).kind(), ErrorKind::kUsage);
    EXPECT_EQ(test::catch_error([&] { parse({{"desc_act", true}, {"static_groups", false}}); }).kind(),
              ErrorKind::kUsage);
    EXPECT_EQ(test::catch_error([&] { parse({{"name", "gptq"}}); }).kind(), ErrorKind::kUsage);
    EXPECT_EQ(test::catch_error([&] { parse({{"model_decoder_layers", "transformer.h"}}); }).kind(),
              ErrorKind::kUnsupported);
    EXPECT_EQ(test::catch_error([&] { parse({{"alpha", "big"}}); }).kind(), ErrorKind::kUsage);
  }
  EXPECT_THROW(QronosConfig::from_json({{"beta", 0}}), Error);
  EXPECT_THROW(GptaqConfig::from_json({{"beta", 1e4}}), Error);
  EXPECT_NO_THROW(GptaqConfig::from_json({{"damp_percent", nullptr}}));

  auto keys = [](const nlohmann::ordered_json& j) {
    std::vector<std::string> k;
    for (const auto& [key, v] : j.items()) k.push_back(key);
    return k;
  };
  const auto gs = make_algorithm_stage("gptaq", {{"inside_layer_modules", {"self_attn.q_proj"}}}, "llama");
  EXPECT_EQ(keys(gs->algo_config()),
            (std::vector<std::string>{"name", "block_size", "damp_percent", "alpha", "desc_act", "static_groups",
                                      "inside_layer_modules", "model_decoder_layers"}));
  EXPECT_EQ(gs->algo_config()["inside_layer_modules"], nlohmann::json::array({"self_attn.q_proj"}));
  const auto qs = make_algorithm_stage("qronos", {{"beta", 100.0}, {"damp_retries", 2}}, "llama");
  const nlohmann::ordered_json qj = qs->algo_config();
  EXPECT_EQ(keys(qj), (std::vector<std::string>{"inside_layer_modules", "model_decoder_layers", "name", "block_size",
                                                "desc_act", "static_groups", "alpha", "beta"}));
  // Quark's QRONOS_MAP["llama"] order (k, v, q, o, up, gate, down) when the config names none.
  EXPECT_EQ(qj.dump(), R"({"inside_layer_modules":["self_attn.k_proj","self_attn.v_proj","self_attn.q_proj",)"
                       R"("self_attn.o_proj","mlp.up_proj","mlp.gate_proj","mlp.down_proj"],)"
                       R"("model_decoder_layers":"model.layers","name":"qronos",)"
                       R"("block_size":128,"desc_act":true,"static_groups":true,"alpha":0.001,"beta":100.0})");
  EXPECT_TRUE(qs->wants_float_stream());
  EXPECT_EQ(make_algorithm_stage("gptaq", nullptr, "gemma2")->algo_config()["inside_layer_modules"],
            nlohmann::json::array());  // no GPTAQ_MAP entry: the linears run, filled in as they are seen
  const auto impl = implemented_algorithms();
  EXPECT_NE(std::find(impl.begin(), impl.end(), "gptaq"), impl.end());
  EXPECT_NE(std::find(impl.begin(), impl.end(), "qronos"), impl.end());
}

}  // namespace
}  // namespace qloom::quant
