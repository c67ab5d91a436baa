// The pieces under the AWQ / SmoothQuant stages: the loaded layer's float
// tensors by checkpoint name (quant/layer_tensors.h), LayerSession::
// mark_modified (rounding to the checkpoint dtype, handing the value to the
// exporter), and which groups a stage may fold (quant/layer_fold.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "engine/engine_fixture.h"
#include "qloom/core/float_codec.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/layer_fold.h"
#include "qloom/quant/layer_tensors.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/stage_harness.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

namespace fs = std::filesystem;
using namespace teststage;

std::unique_ptr<engine::LayerRunner> open_layer(const fs::path& dir, int64_t layer) {
  engine::LoadOptions lo;
  lo.threads = 1;
  auto r = engine::LayerRunner::open(dir, lo);
  r->load_layer(layer);
  return r;
}

TEST(LayerTensors, FindsNormsWeightsAndBiasesByCheckpointName) {
  auto r = open_layer(test::engine_data_dir() / "qwen2", 1);
  const LayerTensorRef norm = find_layer_tensor(*r, "model.layers.1.input_layernorm.weight");
  ASSERT_NE(norm.norm, nullptr);
  EXPECT_EQ(norm.norm, &r->layer_weights().input_norm);
  const LayerTensorRef w = find_layer_tensor(*r, "model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(w.linear, &r->linear("model.layers.1.self_attn.v_proj"));
  EXPECT_FALSE(w.bias);
  const LayerTensorRef b = find_layer_tensor(*r, "model.layers.1.self_attn.v_proj.bias");
  EXPECT_TRUE(b.bias);
  EXPECT_EQ(layer_tensor_value(b).values, r->linear("model.layers.1.self_attn.v_proj").bias);
  for (const char* missing : {"model.layers.0.input_layernorm.weight", "model.layers.1.pre_feedforward_layernorm.weight",
                              "model.layers.1.mlp.down_proj.bias", "model.layers.1.self_attn.x_proj.weight",
                              "model.layers.1.input_layernorm.scale"})
    EXPECT_EQ(test::catch_error([&] { (void)find_layer_tensor(*r, missing); }).kind(), ErrorKind::kNotFound) << missing;
}

// Gemma holds 1 + w; the checkpoint form is w, and rounding keeps 1 + (a
// bf16 value), what the engine computes after loading the export.
TEST(LayerTensors, GemmaNormsRoundTripInCheckpointForm) {
  const fs::path dir = test::engine_data_dir() / "gemma";
  auto r = open_layer(dir, 0);
  const std::string name = "model.layers.0.input_layernorm.weight";
  const LayerTensorRef ref = find_layer_tensor(*r, name);
  EXPECT_TRUE(ref.gemma);
  const io::ModelDir md = io::ModelDir::open(dir);
  const auto src = engine::plain_weight_source(md);
  const std::vector<float> stored = host_tensor_f32(src->load(name), name);
  const FloatTensor v = layer_tensor_value(ref);
  ASSERT_EQ(v.values.size(), stored.size());
  for (size_t j = 0; j < stored.size(); ++j) EXPECT_NEAR(v.values[j], stored[j], 1e-7) << j;
  for (float& x : *ref.norm) x /= 3.0f;  // a fold
  round_layer_tensor(ref, DType::kBF16);
  for (size_t j = 0; j < stored.size(); ++j) {
    const float w = layer_tensor_value(ref).values[j];
    EXPECT_EQ(w, bf16_to_float(float_to_bf16(w))) << j;
    EXPECT_EQ((*ref.norm)[j], 1.0f + w) << j;
  }
}

// A stage that runs `body` on each layer.
class ProbeStage final : public AlgorithmStage {
 public:
  explicit ProbeStage(std::function<void(LayerSession&)> body) : body_(std::move(body)) {}
  std::string name() const override { return "probe"; }
  nlohmann::ordered_json algo_config() const override { return nullptr; }
  void process_layer(LayerSession& s) override { body_(s); }

 private:
  std::function<void(LayerSession&)> body_;
};

TEST(LayerSession, MarkModifiedRoundsToTheCheckpointDtypeAndExportsTheFinalValue) {
  const fs::path dir = test::engine_data_dir() / "llama";
  const io::ModelDir md = io::ModelDir::open(dir);
  const auto src = engine::plain_weight_source(md);
  const QuantSpec spec = *get_scheme("int8").linear.weight;
  std::map<std::string, QuantSpec> specs = every_linear(dir, *src, spec);
  specs.erase("model.layers.0.mlp.up_proj");  // left unquantized
  std::vector<float> seen_in_pass;
  std::vector<std::unique_ptr<AlgorithmStage>> stages;
  stages.push_back(std::make_unique<ProbeStage>([&](LayerSession& s) {
    if (s.layer() != 0) return;
    auto& norm = s.runner().layer_weights().post_attention_norm;
    for (float& v : norm) v *= 1.0f / 3.0f;
    s.mark_modified("model.layers.0.post_attention_layernorm.weight");
    seen_in_pass = norm;  // what later passes compute with
    auto& up = s.runner().linear("model.layers.0.mlp.up_proj");
    for (float& v : up.f32) v *= 1.0f / 3.0f;
    if (up.type == engine::WeightType::kBF16)
      for (uint16_t& v : up.bf16) v = float_to_bf16(bf16_to_float(v) / 3.0f);
    s.mark_modified("model.layers.0.mlp.up_proj.weight");  // unquantized: allowed
    EXPECT_EQ(test::catch_error([&] { s.mark_modified("model.layers.0.mlp.down_proj.weight"); }).kind(),
              ErrorKind::kUsage);  // quantized: its codes are exported
    EXPECT_EQ(test::catch_error([&] { s.mark_modified("model.layers.0.mlp.nope.weight"); }).kind(),
              ErrorKind::kNotFound);
    EXPECT_FALSE(s.quantized("model.layers.0.mlp.down_proj"));
  }));
  PipelineRequest pr;
  pr.model_dir = dir;
  pr.weights = src.get();
  pr.weight_specs = specs;
  pr.model_dtype = DType::kBF16;
  pr.threads = 1;
  CalibrationPipeline pipe(pr, synthetic_samples(md.config()["vocab_size"].get<int64_t>(), 2, 16),
                           std::move(stages));
  const LayerResult l0 = pipe.run_layer(0);
  ASSERT_EQ(l0.float_tensors.size(), 2u);
  const FloatTensor& norm = l0.float_tensors.at("model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(norm.values, seen_in_pass);
  for (float v : norm.values) EXPECT_EQ(v, bf16_to_float(float_to_bf16(v)));  // exactly a bf16 value
  const FloatTensor& up = l0.float_tensors.at("model.layers.0.mlp.up_proj.weight");
  ASSERT_EQ(up.shape.size(), 2u);
  EXPECT_EQ(static_cast<size_t>(up.shape[0] * up.shape[1]), up.values.size());
  EXPECT_TRUE(pipe.run_layer(1).float_tensors.empty());
}

TEST(LayerFold, BlockersNameTheReason) {
  const model::ModelConfig qmoe =
      model::ModelConfig::parse(io::ModelDir::open(test::engine_data_dir() / "qwen2_moe").config());
  const fs::path dir = test::engine_data_dir() / "qwen2_moe";
  const io::ModelDir md = io::ModelDir::open(dir);
  const auto src = engine::plain_weight_source(md);
  std::map<std::string, QuantSpec> specs = every_linear(dir, *src, *get_scheme("int8").linear.weight);
  specs.erase("model.layers.0.self_attn.k_proj");
  std::map<std::string, std::string> reasons;
  std::vector<std::unique_ptr<AlgorithmStage>> stages;
  stages.push_back(std::make_unique<ProbeStage>([&](LayerSession& s) {
    if (s.layer() != 0) return;
    for (const ScalingGroup& g : layer_scaling_groups(qmoe, 0)) reasons[g.kind] = fold_blocker(s, g);
  }));
  PipelineRequest pr;
  pr.model_dir = dir;
  pr.weights = src.get();
  pr.weight_specs = specs;
  pr.threads = 1;
  CalibrationPipeline pipe(pr, synthetic_samples(qmoe.vocab_size, 1, 8), std::move(stages));
  (void)pipe.run_layer(0);
  EXPECT_NE(reasons["attn_in"].find("k_proj is not quantized"), std::string::npos) << reasons["attn_in"];
  EXPECT_NE(reasons["attn_out"].find("grouped-query"), std::string::npos) << reasons["attn_out"];
  EXPECT_NE(reasons["mlp_in"].find("mlp.gate"), std::string::npos) << reasons["mlp_in"];
  EXPECT_EQ(reasons["expert_out"], "");
}

}  // namespace
}  // namespace qloom::quant
