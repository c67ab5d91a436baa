// The AutoSmoothQuant stage (quant/autosmoothquant_stage.h): its strict
// Quark-form config (per-model compute_scale_loss and groups), the
// algo_config it writes, that the smoothed float layers compute the same
// function as the originals on the engine fixtures, and — on the demo
// model, layer 0, the up_proj -> down_proj group, ptpc_fp8 weights and
// inputs — that the scales it folds are the ones a plain evaluation of
// Quark's grid search picks (mean |Q_w(W·s)·Q_in(x/s) - W·x| per ratio,
// computed here from the layer's recorded inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "qloom/core/float_codec.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/autosmoothquant_stage.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/fold_harness.h"
#include "quant/stage_harness.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using testfold::FoldHarness;
using testfold::logit_rel_diff;
using namespace teststage;

std::vector<std::unique_ptr<AlgorithmStage>> asq_stages(const nlohmann::json& cfg, const std::string& model_type) {
  std::vector<std::unique_ptr<AlgorithmStage>> v;
  v.push_back(make_algorithm_stage("autosmoothquant", cfg, model_type));
  return v;
}

TEST(AutoSmoothQuantStageConfig, QuarkKeysStrictAndPerModelDefaults) {
  const auto llama = AutoSmoothQuantStageConfig::from_json(nullptr, "llama");
  EXPECT_EQ(llama.compute_scale_loss, ScaleLoss::kMae);
  EXPECT_EQ(llama.n_grid, 10);
  EXPECT_TRUE(llama.default_kinds.empty());
  const auto mixtral = AutoSmoothQuantStageConfig::from_json(nullptr, "mixtral");
  EXPECT_EQ(mixtral.default_kinds, (std::vector<std::string>{"attn_in", "attn_out"}));
  EXPECT_EQ(AutoSmoothQuantStageConfig::from_json(nullptr, "qwen2").compute_scale_loss, ScaleLoss::kMse);
  const auto c = AutoSmoothQuantStageConfig::from_json(
      {{"name", "autosmoothquant"}, {"compute_scale_loss", "RMSE"}, {"model_decoder_layers", "model.layers"},
       {"n_grid", 4}, {"scaling_layers", nullptr}},
      "llama");
  EXPECT_EQ(c.compute_scale_loss, ScaleLoss::kRmse);
  EXPECT_EQ(c.n_grid, 4);
  const std::string p = "algo_config.autosmoothquant.";
  for (const auto& [bad, key] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"name", "smooth"}}, "name"},
           {{{"compute_scale_loss", "L1"}}, "compute_scale_loss"},
           {{{"n_grid", 0}}, "n_grid"},
           {{{"alpha", 0.5}}, "alpha"},
           {{{"scaling_layers", {{{"prev_op", "input_layernorm"}}}}}, "scaling_layers[0].layers"}}) {
    const Error e = test::catch_error([&] { AutoSmoothQuantStageConfig::from_json(bad, "llama"); });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad.dump();
    EXPECT_EQ(e.item(), p + key) << bad.dump();
  }
  EXPECT_EQ(test::catch_error([] { AutoSmoothQuantStageConfig::from_json({{"model_decoder_layers", "x.h"}}, "llama"); })
                .kind(),
            ErrorKind::kUnsupported);
}

class AutoSmoothQuantStageFixture : public ::testing::TestWithParam<FixtureCase> {};

// W8A8 int8 (static per-tensor inputs): the fold is exact, the algo_config
// is Quark's four keys, and the MoE defaults keep Quark's groups.
TEST_P(AutoSmoothQuantStageFixture, SmoothedLayersComputeTheSameFunction) {
  const FixtureCase fc = GetParam();
  FoldHarness h(fc.dir, fc.mha);
  const F32Source src(h.base());
  const LayerQuantSpec int8 = get_scheme("int8").linear;
  const auto specs = every_linear(h.model_dir(), src, *int8.weight);
  const auto inputs = every_linear(h.model_dir(), src, *int8.input);
  CalibrationData data;
  for (int i = 0; i < 3; ++i) data.samples.push_back(i % 2 ? h.tokens() : std::vector<int32_t>(h.tokens().begin(), h.tokens().begin() + 5));
  const StageRun run =
      run_stages(h.model_dir(), src, data, asq_stages(nullptr, h.config().model_type), specs, inputs);
  const double rel = logit_rel_diff(model_logits(h.model_dir(), src, h.tokens()),
                                    model_logits(h.model_dir(), *run.folded, h.tokens()));
  std::printf("[ asq stage ] %-10s %s: %llu groups smoothed, rel logit diff %.2e\n", fc.dir, fc.mha ? "mha" : "gqa",
              static_cast<unsigned long long>(run.summary.scaled_groups), rel);
  EXPECT_GE(run.summary.scaled_groups, static_cast<uint64_t>(fc.min_groups));
  EXPECT_LE(rel, 1e-5);
  const nlohmann::ordered_json& a = run.algo_configs.at(0);
  EXPECT_EQ(keys_of(a),
            (std::vector<std::string>{"name", "scaling_layers", "model_decoder_layers", "compute_scale_loss"}));
  EXPECT_EQ(a["name"], "autosmoothquant");
  EXPECT_EQ(a["compute_scale_loss"], scale_loss_name(default_scale_loss(h.config().model_type)));
  for (const auto& e : a["scaling_layers"]) {
    const std::string prev = e["prev_op"];
    if (std::string(fc.dir) == "mixtral") EXPECT_TRUE(prev == "input_layernorm" || prev == "self_attn.v_proj") << prev;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AutoSmoothQuantStageFixture,
                         ::testing::Values(FixtureCase{"llama", true, 8}, FixtureCase{"qwen2", false, 6},
                                           FixtureCase{"mixtral", true, 4}),
                         [](const auto& info) { return fixture_case_name(info); });

// ---- the grid search against a plain evaluation -------------------------------

// Q_in of ptpc_fp8: per-row amax / 448, e4m3 round trip.
void plain_per_token_fp8(std::vector<float>& x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
    const float scale = amax / 448.0f;
    if (scale == 0.0f) continue;
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] = fp8_e4m3_to_float(float_to_fp8_e4m3(x[r * cols + c] / scale)) * scale;
  }
}

TEST(AutoSmoothQuantStage, DemoScalesAreThePlainGridSearchChoice) {
  const std::filesystem::path dir = QLOOM_DEMO_MODEL_DIR;
  const io::ModelDir md = io::ModelDir::open(dir);
  const auto plain = engine::plain_weight_source(md);
  const F32Source src(*plain);
  const LayerQuantSpec ptpc = get_scheme("ptpc_fp8").linear;
  const auto specs = every_linear(dir, src, *ptpc.weight);
  const auto inputs = every_linear(dir, src, *ptpc.input);
  const CalibrationData data = synthetic_samples(512, 4, 48);
  const nlohmann::json cfg = {
      {"scaling_layers", {{{"prev_op", "mlp.up_proj"}, {"layers", {"mlp.down_proj"}}, {"inp", "mlp.down_proj"}}}}};
  const StageRun run = run_stages(dir, src, data, asq_stages(cfg, "llama"), specs, inputs);
  EXPECT_EQ(run.summary.scaled_groups, 5u);  // one group per layer

  // Layer 0's down_proj inputs on the original model (its inputs are the
  // embeddings in both), and the plain search over them.
  const std::string down = "model.layers.0.mlp.down_proj", up = "model.layers.0.mlp.up_proj";
  std::vector<float> x;
  int64_t in = 0;
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& site, float* v, int64_t rows, int64_t cols) {
    if (site.module != down) return;
    in = cols;
    x.insert(x.end(), v, v + rows * cols);
  };
  engine::LoadOptions opt;
  opt.weights = engine::LoadOptions::Weights::kF32;
  opt.threads = 1;
  auto model = engine::Model::load(dir, opt, &src);
  for (const auto& s : data.samples) {
    auto cache = model->new_cache(static_cast<int64_t>(s.size()));
    (void)model->forward(s, *cache, false, &hooks);
  }
  const int64_t T = static_cast<int64_t>(x.size()) / in;
  const std::vector<float> w = host_tensor_f32(src.load(down + ".weight"), down);
  const int64_t out = static_cast<int64_t>(w.size()) / in;
  std::vector<float> x_max(static_cast<size_t>(in), 0.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < in; ++j) x_max[j] = std::max(x_max[j], std::fabs(x[t * in + j]));
  auto matmul = [&](const std::vector<float>& a, const std::vector<float>& b) {  // a [T, in] · b[out, in]^T
    std::vector<double> y(static_cast<size_t>(T * out));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double acc = 0.0;
        for (int64_t j = 0; j < in; ++j) acc += double(a[t * in + j]) * b[o * in + j];
        y[t * out + o] = acc;
      }
    return y;
  };
  const std::vector<double> y_ref = matmul(x, w);
  int best = -1;
  double best_loss = INFINITY;
  for (int i = 0; i < 10; ++i) {
    std::vector<double> s64(static_cast<size_t>(in));
    double lo = INFINITY, hi = 0.0;
    for (int64_t j = 0; j < in; ++j) {
      s64[j] = std::max(std::pow(double(x_max[j]), i / 10.0), 1e-4);
      lo = std::min(lo, s64[j]), hi = std::max(hi, s64[j]);
    }
    std::vector<float> s(static_cast<size_t>(in));
    for (int64_t j = 0; j < in; ++j) s[j] = static_cast<float>(s64[j] / std::sqrt(lo * hi));
    std::vector<float> ws = w, xs = x;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t j = 0; j < in; ++j) ws[o * in + j] *= s[j];
    const auto q = dequantize_ref(quantize_weight_ref(ws.data(), out, in, *ptpc.weight, DType::kF32, down));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < in; ++j) xs[t * in + j] /= s[j];
    plain_per_token_fp8(xs, T, in);
    const std::vector<double> y = matmul(xs, q);
    double loss = 0.0;
    for (size_t k = 0; k < y.size(); ++k) loss += std::fabs(y[k] - y_ref[k]);
    loss /= static_cast<double>(y.size());
    std::printf("[ asq plain ] r %.1f  MAE %.6e\n", i / 10.0, loss);
    if (loss < best_loss) best_loss = loss, best = i;
  }
  ASSERT_GE(best, 0);
  // The stage's s, read back from the folded up_proj rows (w / w').
  const std::vector<float> w_up = host_tensor_f32(src.load(up + ".weight"), up);
  const std::vector<float> w_up1 = host_tensor_f32(run.folded->load(up + ".weight"), up);
  const int64_t up_in = static_cast<int64_t>(w_up.size()) / in;
  std::vector<double> s_want(static_cast<size_t>(in));
  double lo = INFINITY, hi = 0.0;
  for (int64_t j = 0; j < in; ++j) {
    s_want[j] = std::max(std::pow(double(x_max[j]), best / 10.0), 1e-4);
    lo = std::min(lo, s_want[j]), hi = std::max(hi, s_want[j]);
  }
  for (int64_t j = 0; j < in; ++j) {
    int64_t c = 0;  // the row's largest weight
    for (int64_t k = 1; k < up_in; ++k)
      if (std::fabs(w_up[j * up_in + k]) > std::fabs(w_up[j * up_in + c])) c = k;
    const double s_got = double(w_up[j * up_in + c]) / w_up1[j * up_in + c];
    EXPECT_NEAR(s_got, s_want[j] / std::sqrt(lo * hi), 1e-5 * s_got) << "channel " << j << " (best r " << best / 10.0 << ")";
  }
  std::printf("[ asq plain ] chosen r %.1f\n", best / 10.0);
}

}  // namespace
}  // namespace qloom::quant
