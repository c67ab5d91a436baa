// AWQ (quant/awq.h): the scale search and the clip search on a single linear
// with heavy-tailed activation channels, the search end to end on engine
// fixtures (loss = MSE of the model's logits, scales folded, the folded
// float model checked against the original), and the strict config.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "qloom/quant/awq.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/fold_harness.h"
#include "quant/weight_gen.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using testfold::FoldHarness;
using testfold::logit_rel_diff;

double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return s / static_cast<double>(a.size());
}

std::vector<float> run(const std::vector<float>& x, int64_t rows, const engine::LinearWeight& w) {
  std::vector<float> y(static_cast<size_t>(rows * w.out));
  engine::linear_ref(x.data(), rows, w, y.data());
  return y;
}

engine::LinearWeight dequantized(const engine::LinearWeight& w, const QuantSpec& spec) {
  engine::LinearWeight q = w;
  const QuantizedTensor t = quantize_weight(w.f32.data(), static_cast<uint64_t>(w.out),
                                            static_cast<uint64_t>(w.in), spec, DType::kF32, "w");
  q.f32 = dequantize(t);
  return q;
}

// A [128, 256] Gaussian weight and 256 tokens of N(0, 1) inputs whose
// channels kHot are 50x larger (the activation outliers AWQ protects).
struct SingleLinear {
  static constexpr int64_t kOut = 128, kIn = 256, kTokens = 256;
  engine::LinearWeight w;
  std::vector<float> x, y, x_mean;
  SingleLinear() {
    w.out = kOut;
    w.in = kIn;
    w.f32 = testgen::make_weights(kOut * kIn, testgen::Dist::kGaussian, 11);
    testgen::Rng rng(12);
    x.resize(kTokens * kIn);
    for (float& v : x) v = static_cast<float>(rng.normal());
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t c : {3, 40, 77, 100, 150, 201, 230, 255}) x[static_cast<size_t>(t * kIn + c)] *= 50.0f;
    y = run(x, kTokens, w);
    x_mean.assign(kIn, 0.0f);
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t c = 0; c < kIn; ++c) x_mean[static_cast<size_t>(c)] += std::fabs(x[static_cast<size_t>(t * kIn + c)]) / kTokens;
  }
  AwqLossFn loss() const {
    return [this](const AwqCandidates& c) { return mse(run(x, kTokens, c.at("fc")), y); };
  }
};

// Measured (output MSE of AWQ / RTN): int4 g32 0.53, int4 g128 0.45, uint4
// g128 0.24, int4 per-channel 0.42 (duo scaling: 0.51 / 0.47 / 0.25 / 0.46),
// best ratio 0.25 .. 0.35; asserted: <= 0.65 and ratio > 0. The clip search
// then lowers the output MSE by a further 3% .. 44%; asserted: never raises it
// (its own objective, per output channel and group, cannot rise: shrink 1 is
// a candidate).
class AwqSingleLinear : public ::testing::TestWithParam<const char*> {};

TEST_P(AwqSingleLinear, ScalesBeatRtnAndClipNeverHurts) {
  const SingleLinear L;
  const QuantSpec spec = *get_scheme(GetParam()).linear.weight;
  const AwqQuantOptions opt;
  for (bool duo : {false, true}) {
    AwqConfig cfg;
    cfg.duo_scaling = duo;
    const AwqScaleResult r = awq_search_scales(L.x_mean, {{"fc", &L.w, &spec}}, cfg, opt, L.loss());
    ASSERT_EQ(r.losses.size(), 20u);
    const double rtn = r.losses[0];
    std::printf("[ awq ] %-20s duo=%d  RTN mse %.4e  AWQ mse %.4e (x%.3f)  ratio %.2f\n", GetParam(), duo, rtn,
                r.loss, r.loss / rtn, r.ratio);
    if (!duo) { EXPECT_DOUBLE_EQ(rtn, mse(run(L.x, L.kTokens, dequantized(L.w, spec)), L.y)) << "r = 0 is plain RTN"; }
    EXPECT_GT(r.ratio, 0.0);
    EXPECT_LE(r.loss, 0.65 * rtn) << "AWQ should cut the output MSE by a third at least here";

    // Clip search on the scaled weight with the inputs it then sees.
    engine::LinearWeight ws = L.w;
    scale_linear_inputs(ws, r.scales);
    std::vector<float> xs = L.x;
    for (int64_t t = 0; t < L.kTokens; ++t)
      for (int64_t c = 0; c < L.kIn; ++c) xs[static_cast<size_t>(t * L.kIn + c)] /= r.scales[static_cast<size_t>(c)];
    const AwqClip clip = awq_search_clip(ws, spec, xs, L.kTokens, cfg, opt, "fc");
    ASSERT_FALSE(clip.max_val.empty());
    EXPECT_LE(clip.loss_after, clip.loss_before);
    engine::LinearWeight wc = ws;
    apply_awq_clip(wc, clip);
    const double before = mse(run(xs, L.kTokens, dequantized(ws, spec)), L.y);
    const double after = mse(run(xs, L.kTokens, dequantized(wc, spec)), L.y);
    std::printf("[ awq ] %-20s duo=%d  clip objective %.4e -> %.4e, output mse %.4e -> %.4e\n", GetParam(), duo,
                clip.loss_before, clip.loss_after, before, after);
    EXPECT_LE(after, before * (1.0 + 1e-9));
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, AwqSingleLinear,
                         ::testing::Values("int4_wo_32", "int4_wo_128", "uint4_wo_128", "int4_wo_per_channel"));

// The single linear's loss in parts of 8 tokens, counting part evaluations;
// with `poison`, every third evaluation of part 3 is non-finite (so is that
// grid point's loss).
class TokenParts final : public AwqPartLoss {
 public:
  explicit TokenParts(const SingleLinear& l) : l_(l) {}
  int64_t parts() const override { return SingleLinear::kTokens / 8; }
  double count() const override { return static_cast<double>(l_.y.size()); }
  void begin(const AwqCandidates& c) override { w_ = &c.at("fc"); }
  double part_se(int64_t p) override {
    ++calls;
    std::vector<float> x(l_.x.begin() + p * 8 * SingleLinear::kIn, l_.x.begin() + (p + 1) * 8 * SingleLinear::kIn);
    const std::vector<float> y = run(x, 8, *w_);
    double se = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double d = static_cast<double>(y[i]) - l_.y[static_cast<size_t>(p * 8 * SingleLinear::kOut) + i];
      se += d * d;
    }
    if (poison && p == 3 && ++begun_nan % 3 == 0) return std::nan("");
    return se;
  }
  void end() override { w_ = nullptr; }
  int64_t calls = 0;
  bool poison = false;

 private:
  const SingleLinear& l_;
  const engine::LinearWeight* w_ = nullptr;
  int begun_nan = 0;
};

// The pruned search returns the full search's choice whatever point it
// starts from, with fewer part evaluations; the losses it completes equal the
// full search's up to the re-association of the sum.
TEST(Awq, PrunedSearchChoosesWhatTheFullSearchChooses) {
  const SingleLinear L;
  for (const char* scheme : {"int4_wo_32", "uint4_wo_128"}) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    for (bool duo : {false, true}) {
      AwqConfig cfg;
      cfg.duo_scaling = duo;
      const AwqScaleResult full = awq_search_scales(L.x_mean, {{"fc", &L.w, &spec}}, cfg, {}, L.loss());
      for (int first : {0, 19}) {
        TokenParts parts(L);
        const AwqScaleResult r = awq_search_scales_pruned(L.x_mean, {{"fc", &L.w, &spec}}, cfg, {}, parts, first);
        EXPECT_EQ(r.ratio, full.ratio) << scheme << " duo " << duo << " first " << first;
        EXPECT_EQ(r.scales, full.scales);
        EXPECT_NEAR(r.loss, full.loss, 1e-12 * full.loss);
        int dropped = 0;
        for (size_t i = 0; i < r.losses.size(); ++i) {
          if (std::isnan(r.losses[i])) ++dropped;
          else EXPECT_NEAR(r.losses[i], full.losses[i], 1e-12 * full.losses[i]) << i;
        }
        EXPECT_GT(dropped, 0);
        EXPECT_LT(parts.calls, cfg.n_grid * parts.parts()) << "nothing was pruned";
      }
    }
  }
}

TEST(Awq, PrunedSearchSkipsNonFinitePoints) {
  const SingleLinear L;
  const QuantSpec spec = *get_scheme("int4_wo_128").linear.weight;
  const AwqConfig cfg;
  TokenParts parts(L);
  parts.poison = true;  // every third point that reaches part 3 is non-finite
  const AwqScaleResult r = awq_search_scales_pruned(L.x_mean, {{"fc", &L.w, &spec}}, cfg, {}, parts, 4);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_FALSE(r.scales.empty());
  class AllNan final : public AwqPartLoss {
   public:
    int64_t parts() const override { return 2; }
    double count() const override { return 1.0; }
    void begin(const AwqCandidates&) override {}
    double part_se(int64_t) override { return std::nan(""); }
    void end() override {}
  } nan_loss;
  EXPECT_EQ(test::catch_error([&] { awq_search_scales_pruned(L.x_mean, {{"fc", &L.w, &spec}}, cfg, {}, nan_loss); })
                .kind(),
            ErrorKind::kInvalidInput);
}

TEST(Awq, CandidateAtUnitScalesIsPlainRtn) {
  const SingleLinear L;
  const QuantSpec spec = *get_scheme("uint4_wo_32").linear.weight;
  const std::vector<float> ones(L.kIn, 1.0f);
  const engine::LinearWeight c = awq_candidate(L.w, spec, ones, AwqQuantOptions{}, "fc");
  EXPECT_EQ(c.f32, dequantized(L.w, spec).f32);
}

TEST(Awq, ClipEdgeCases) {
  const SingleLinear L;
  AwqConfig cfg;
  const QuantSpec per_tensor = *get_scheme("int8").linear.weight;
  const AwqClip none = awq_search_clip(L.w, per_tensor, L.x, L.kTokens, cfg, {}, "fc");
  EXPECT_TRUE(none.max_val.empty());
  engine::LinearWeight w = L.w;
  apply_awq_clip(w, none);
  EXPECT_EQ(w.f32, L.w.f32);

  cfg.max_shrink = 0.0;  // only the unclipped candidate
  const QuantSpec g32 = *get_scheme("int4_wo_32").linear.weight;
  const AwqClip same = awq_search_clip(L.w, g32, L.x, L.kTokens, cfg, {}, "fc");
  EXPECT_EQ(same.loss_after, same.loss_before);
  apply_awq_clip(w, same);
  EXPECT_EQ(w.f32, L.w.f32);

  EXPECT_EQ(test::catch_error([&] { awq_search_clip(L.w, g32, L.x, L.kTokens + 1, cfg, {}, "fc"); }).kind(),
            ErrorKind::kUsage);
  EXPECT_FALSE(awq_clip_applies("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(awq_clip_applies("model.layers.0.self_attn.k_proj"));
  EXPECT_FALSE(awq_clip_applies("model.layers.0.self_attn.qkv_proj"));
  EXPECT_TRUE(awq_clip_applies("model.layers.0.self_attn.v_proj"));
  EXPECT_TRUE(awq_clip_applies("model.layers.0.block_sparse_moe.experts.3.w1"));
}

// The clip objective is evaluated from per-group input Gram matrices; its
// unclipped value must equal the direct mean over tokens of
// (x_t[g] · (Q(W) - W)[o, g])^2 summed over (o, g), here with a token
// subsample (clip_max_tokens 100 of 256: every 2nd token). Tolerance 1e-5
// relative (fp32 Gram and products; measured ~1e-7).
TEST(Awq, ClipObjectiveIsTheDirectMeanSquaredError) {
  const SingleLinear L;
  AwqConfig cfg;
  cfg.clip_max_tokens = 100;
  for (const char* scheme : {"int4_wo_32", "uint4_wo_128"}) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    const AwqClip c = awq_search_clip(L.w, spec, L.x, L.kTokens, cfg, {}, "fc");
    const engine::LinearWeight q = dequantized(L.w, spec);
    const int64_t G = c.group_size, ng = c.groups_per_row, I = L.kIn;
    double want = 0.0;
    for (int64_t o = 0; o < L.kOut; ++o)
      for (int64_t g = 0; g < ng; ++g) {
        double err = 0.0;
        int64_t n = 0;
        for (int64_t t = 0; t < L.kTokens; t += 2, ++n) {
          double d = 0.0;
          for (int64_t k = g * G; k < (g + 1) * G; ++k)
            d += static_cast<double>(L.x[static_cast<size_t>(t * I + k)]) *
                 (static_cast<double>(q.f32[static_cast<size_t>(o * I + k)]) - L.w.f32[static_cast<size_t>(o * I + k)]);
          err += d * d;
        }
        want += err / static_cast<double>(n);
      }
    EXPECT_NEAR(c.loss_before, want, 1e-5 * want) << scheme;
    EXPECT_LE(c.loss_after, c.loss_before) << scheme;
  }
}

TEST(Awq, SearchErrors) {
  const SingleLinear L;
  const QuantSpec spec = *get_scheme("int4_wo_32").linear.weight;
  const AwqConfig cfg;
  auto nan_loss = [](const AwqCandidates&) { return std::nan(""); };
  EXPECT_EQ(test::catch_error([&] { awq_search_scales(L.x_mean, {{"fc", &L.w, &spec}}, cfg, {}, nan_loss); }).kind(),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(test::catch_error([&] { awq_search_scales(L.x_mean, {{"fc", &L.w, nullptr}}, cfg, {}, L.loss()); }).kind(),
            ErrorKind::kUsage);
  const std::vector<float> short_mean(10, 1.0f);
  EXPECT_EQ(test::catch_error([&] { awq_search_scales(short_mean, {{"fc", &L.w, &spec}}, cfg, {}, L.loss()); }).kind(),
            ErrorKind::kUsage);
  std::vector<float> bad = L.x_mean;
  bad[5] = -1.0f;
  EXPECT_EQ(test::catch_error([&] { awq_search_scales(bad, {{"fc", &L.w, &spec}}, cfg, {}, L.loss()); }).kind(),
            ErrorKind::kInvalidInput);
}

TEST(Awq, ConfigIsStrict) {
  const AwqConfig d = AwqConfig::from_json(nullptr);
  EXPECT_EQ(d.n_grid, 20);
  EXPECT_FALSE(d.duo_scaling);
  EXPECT_TRUE(d.clip);
  EXPECT_EQ(d.max_shrink, 0.5);
  const AwqConfig c = AwqConfig::from_json({{"n_grid", 10}, {"duo_scaling", true}, {"clip", false}, {"max_shrink", 0.25}});
  EXPECT_EQ(c.n_grid, 10);
  EXPECT_TRUE(c.duo_scaling);
  EXPECT_FALSE(c.clip);
  EXPECT_EQ(c.max_shrink, 0.25);
  EXPECT_EQ(AwqConfig::from_json(c.params_json()).params_json(), c.params_json());

  Error e = test::catch_error([] { AwqConfig::from_json({{"ngrid", 10}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "ngrid");
  EXPECT_NE(e.remedy().find("n_grid"), std::string::npos);
  for (const nlohmann::json& bad :
       {nlohmann::json{{"n_grid", 0}}, nlohmann::json{{"n_grid", 2.5}}, nlohmann::json{{"max_shrink", 1.0}},
        nlohmann::json{{"max_shrink", -0.1}}, nlohmann::json{{"clip", 1}}, nlohmann::json{{"duo_scaling", "yes"}},
        nlohmann::json{{"clip_max_tokens", 0}}, nlohmann::json(3)}) {
    EXPECT_EQ(test::catch_error([&] { AwqConfig::from_json(bad); }).kind(), ErrorKind::kUsage) << bad.dump();
  }
}

TEST(Awq, ToJsonIsQuarksDict) {
  const model::ModelConfig mc = model::ModelConfig::parse(io::ModelDir::open(test::engine_data_dir() / "llama").config());
  const nlohmann::json j = AwqConfig{}.to_json(mc);
  EXPECT_EQ(j.size(), 3u);  // Quark's AWQConfig fields only: AWQConfig(**d) must accept it
  EXPECT_EQ(j["name"], "awq");
  EXPECT_EQ(j["model_decoder_layers"], "model.layers");
  EXPECT_EQ(j["scaling_layers"], quark_scaling_layers(mc));
}

// ---- end to end on fixtures ---------------------------------------------------

class AwqFixture : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(AwqFixture, SearchedScalesFoldToTheSameFunction) {
  const auto [arch, mha] = GetParam();
  FoldHarness h(arch, mha);
  const std::vector<float> orig = h.logits(h.base());
  const auto stats = h.input_stats(h.base());
  const QuantSpec spec = *get_scheme("int4_wo_32").linear.weight;
  const AwqConfig cfg;
  WeightOverlay ov(h.base());
  std::vector<double> ratios;
  const int n = h.fold_all(ov, [&](const ScalingGroup& g) -> std::vector<float> {
    auto it = stats.find(g.input_site);
    if (it == stats.end()) return {};
    std::vector<engine::LinearWeight> ws;
    for (const std::string& l : g.linears) ws.push_back(load_linear_f32(ov, l));
    std::vector<AwqLinear> lin;
    for (size_t i = 0; i < ws.size(); ++i) lin.push_back({g.linears[i], &ws[i], &spec});
    // The inspected "block" is the whole model here: loss = MSE of the logits.
    auto loss = [&](const AwqCandidates& cand) {
      WeightOverlay trial(static_cast<const engine::WeightSource&>(ov));
      for (const auto& [name, w] : cand) trial.set_linear(name, w);
      return mse(h.logits(trial), orig);
    };
    const AwqScaleResult r = awq_search_scales(it->second.mean_abs(), lin, cfg, {}, loss);
    EXPECT_LE(r.loss, r.losses[0]);
    ratios.push_back(r.ratio);
    return r.scales;
  });
  const double rel = logit_rel_diff(orig, h.logits(ov));
  double mean_ratio = 0.0;
  for (double v : ratios) mean_ratio += v / static_cast<double>(ratios.size());

  // Quantize every linear of the layers, RTN vs AWQ-folded, logits MSE vs float.
  WeightOverlay rtn(h.base()), awq(static_cast<const engine::WeightSource&>(ov));
  for (int layer = 0; layer < static_cast<int>(h.config().num_layers); ++layer)
    for (const ScalingGroup& g : layer_scaling_groups(h.config(), layer))
      for (const std::string& m : g.linears) {
        rtn.set_linear(m, dequantized(load_linear_f32(h.base(), m), spec));
        awq.set_linear(m, dequantized(load_linear_f32(ov, m), spec));
      }
  const double e_rtn = mse(h.logits(rtn), orig), e_awq = mse(h.logits(awq), orig);
  std::printf("[ awq ] %-8s %-3s %2d groups, mean ratio %.2f, float fold rel diff %.2e; int4 g32 logits mse "
              "RTN %.3e AWQ %.3e\n",
              arch, mha ? "mha" : "gqa", n, mean_ratio, rel, e_rtn, e_awq);
  EXPECT_GT(n, 0);
  EXPECT_LE(rel, 5e-6);  // smoothquant_test.cpp's kFoldTol (measured here: 0.9e-7 .. 4.3e-7)
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AwqFixture,
                         ::testing::Values(std::make_tuple("llama", false), std::make_tuple("llama", true),
                                           std::make_tuple("phi3", true), std::make_tuple("gemma", false),
                                           std::make_tuple("mixtral", false)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_mha" : "_gqa");
                         });

}  // namespace
}  // namespace qloom::quant
