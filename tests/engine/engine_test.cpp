// Engine behaviour around the forward pass: LinearSite hooks, load errors
// (unknown model_type, missing tensor, unsupported rope scaling), KvCache
// overflow / truncate, token range checks. Uses the golden fixtures of
// scripts/goldens/engine_fixtures.py.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/engine_fixture.h"
#include "qloom/engine/model.h"
#include "qloom/io/model_dir.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::engine {
namespace {

std::unique_ptr<Model> load_fixture(const char* name) {
  LoadOptions opt;
  opt.threads = 2;
  return Model::load(test::engine_data_dir() / name, opt);
}

struct Call {
  int layer;
  int64_t rows, cols;
};

TEST(EngineHooks, EveryLinearOfALayerSeesItsShapes) {
  auto model = load_fixture("llama");
  const model::ModelConfig& c = model->config();
  test::Reference ref = test::read_reference(test::engine_data_dir() / "llama");
  std::map<std::string, Call> in, out;
  ForwardHooks hooks;
  hooks.linear_input = [&](const LinearSite& s, float*, int64_t rows, int64_t cols) {
    in[s.module] = {s.layer, rows, cols};
  };
  hooks.linear_output = [&](const LinearSite& s, float*, int64_t rows, int64_t cols) {
    out[s.module] = {s.layer, rows, cols};
  };
  auto cache = model->new_cache(64);
  model->forward(ref.tokens_short, *cache, false, &hooks);
  const int64_t T = static_cast<int64_t>(ref.tokens_short.size());
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const int64_t qn = c.num_heads * c.head_dim, kn = c.num_kv_heads * c.head_dim;
  // module suffix -> (in cols, out cols)
  const std::map<std::string, std::pair<int64_t, int64_t>> expect = {
      {"self_attn.q_proj", {D, qn}}, {"self_attn.k_proj", {D, kn}}, {"self_attn.v_proj", {D, kn}},
      {"self_attn.o_proj", {qn, D}}, {"mlp.gate_proj", {D, I}},    {"mlp.up_proj", {D, I}},
      {"mlp.down_proj", {I, D}}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (const auto& [suffix, io] : expect) {
      const std::string name = "model.layers." + std::to_string(l) + "." + suffix;
      ASSERT_TRUE(in.count(name) && out.count(name)) << name;
      EXPECT_EQ(in[name].layer, l);
      EXPECT_EQ(in[name].rows, T) << name;
      EXPECT_EQ(in[name].cols, io.first) << name;
      EXPECT_EQ(out[name].rows, T) << name;
      EXPECT_EQ(out[name].cols, io.second) << name;
    }
  }
  ASSERT_TRUE(in.count("lm_head"));
  EXPECT_EQ(in["lm_head"].layer, -1);
  EXPECT_EQ(out["lm_head"].cols, c.vocab_size);
  EXPECT_EQ(in.size(), static_cast<size_t>(c.num_layers) * expect.size() + 1);
  EXPECT_EQ(out.size(), in.size());
}

TEST(EngineHooks, RewritingInputOrOutputChangesLogits) {
  auto model = load_fixture("llama");
  test::Reference ref = test::read_reference(test::engine_data_dir() / "llama");
  auto cache = model->new_cache(64);
  const std::vector<float> base = model->forward(ref.tokens_short, *cache);

  auto max_change = [&](const ForwardHooks& hooks) {
    cache->clear();
    std::vector<float> got = model->forward(ref.tokens_short, *cache, false, &hooks);
    double m = 0;
    for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::fabs(double(got[i]) - base[i]));
    return m;
  };
  ForwardHooks noop;
  noop.linear_input = [](const LinearSite&, float*, int64_t, int64_t) {};
  noop.linear_output = [](const LinearSite&, float*, int64_t, int64_t) {};
  EXPECT_EQ(max_change(noop), 0.0);

  ForwardHooks zero_in;
  zero_in.linear_input = [](const LinearSite& s, float* x, int64_t rows, int64_t cols) {
    if (s.module == "model.layers.0.mlp.down_proj")
      for (int64_t i = 0; i < rows * cols; ++i) x[i] *= 0.5f;
  };
  EXPECT_GT(max_change(zero_in), 1e-3);

  ForwardHooks scale_out;
  scale_out.linear_output = [](const LinearSite& s, float* y, int64_t rows, int64_t cols) {
    if (s.module == "model.layers.1.self_attn.k_proj")
      for (int64_t i = 0; i < rows * cols; ++i) y[i] *= 2.0f;
  };
  EXPECT_GT(max_change(scale_out), 1e-3);

  // A q_proj input hook sees a private copy: k/v inputs are unaffected, so
  // rewriting q's input by a factor only scales q.
  ForwardHooks q_only;
  std::vector<float> k_input;
  q_only.linear_input = [&](const LinearSite& s, float* x, int64_t rows, int64_t cols) {
    if (s.module == "model.layers.0.self_attn.q_proj")
      for (int64_t i = 0; i < rows * cols; ++i) x[i] = 0.0f;
    if (s.module == "model.layers.0.self_attn.k_proj") k_input.assign(x, x + rows * cols);
  };
  max_change(q_only);
  double knorm = 0;
  for (float v : k_input) knorm += std::fabs(v);
  EXPECT_GT(knorm, 0.0);
}

TEST(EngineHooks, MoeExpertsSeeOnlyRoutedRows) {
  for (const char* arch : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    auto model = load_fixture(arch);
    const model::ModelConfig& c = model->config();
    test::Reference ref = test::read_reference(test::engine_data_dir() / arch);
    std::map<std::string, int64_t> rows_in;
    ForwardHooks hooks;
    hooks.linear_input = [&](const LinearSite& s, float*, int64_t rows, int64_t) {
      rows_in[s.module] += rows;
    };
    auto cache = model->new_cache(64);
    model->forward(ref.tokens_long, *cache, false, &hooks);
    const int64_t T = static_cast<int64_t>(ref.tokens_long.size());
    const bool mixtral = c.model_type == "mixtral";
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + (mixtral ? ".block_sparse_moe." : ".mlp.");
      if (!c.layer_moe[static_cast<size_t>(l)]) {
        EXPECT_EQ(rows_in[p + "gate_proj"], T) << arch << " dense layer " << l;
        continue;
      }
      EXPECT_EQ(rows_in[p + "gate"], T) << arch << " router " << l;
      int64_t routed = 0;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string ep = p + "experts." + std::to_string(e) + (mixtral ? ".w1" : ".gate_proj");
        routed += rows_in[ep];
        const std::string down = p + "experts." + std::to_string(e) + (mixtral ? ".w2" : ".down_proj");
        EXPECT_EQ(rows_in[ep], rows_in[down]);
      }
      EXPECT_EQ(routed, T * c.num_experts_per_tok) << arch << " layer " << l;
      if (c.model_type == "qwen2_moe") {
        EXPECT_EQ(rows_in[p + "shared_expert_gate"], T);
        EXPECT_EQ(rows_in[p + "shared_expert.up_proj"], T);
      }
    }
  }
}

TEST(EngineHooks, FusedPhi3ProjectionsKeepCheckpointNames) {
  auto model = load_fixture("phi3");
  test::Reference ref = test::read_reference(test::engine_data_dir() / "phi3");
  std::map<std::string, int64_t> cols_out;
  ForwardHooks hooks;
  hooks.linear_output = [&](const LinearSite& s, float*, int64_t, int64_t cols) { cols_out[s.module] = cols; };
  auto cache = model->new_cache(64);
  model->forward(ref.tokens_short, *cache, false, &hooks);
  const model::ModelConfig& c = model->config();
  EXPECT_EQ(cols_out["model.layers.0.self_attn.qkv_proj"], (c.num_heads + 2 * c.num_kv_heads) * c.head_dim);
  EXPECT_EQ(cols_out["model.layers.0.mlp.gate_up_proj"], 2 * c.intermediate_size);
}

// ---- load errors ----

// A WeightSource that hides one tensor of a directory.
class HidingSource final : public WeightSource {
 public:
  HidingSource(const io::ModelDir& dir, std::string hidden) : inner_(plain_weight_source(dir)), hidden_(std::move(hidden)) {}
  bool contains(const std::string& n) const override { return n != hidden_ && inner_->contains(n); }
  HostTensor load(const std::string& n) const override { return inner_->load(n); }

 private:
  std::unique_ptr<WeightSource> inner_;
  std::string hidden_;
};

TEST(EngineErrors, MissingTensorNamesItAndTheExpectedShape) {
  const auto dir = test::engine_data_dir() / "llama";
  io::ModelDir md = io::ModelDir::open(dir);
  const std::string name = "model.layers.1.self_attn.k_proj.weight";
  HidingSource src(md, name);
  Error e = test::catch_error([&] { Model::load(dir, {}, &src); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), name);
  EXPECT_NE(e.message().find("[32, 64]"), std::string::npos) << e.message();
}

TEST(EngineErrors, UnknownModelTypeListsSupportedOnes) {
  test::TempDir tmp("engine");
  tmp.write("config.json", R"({"model_type": "gpt_neox", "vocab_size": 10})");
  Error e = test::catch_error([&] { Model::load(tmp.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.message().find("gpt_neox"), std::string::npos);
  EXPECT_NE(e.message().find("qwen3_moe"), std::string::npos);
  EXPECT_NE(e.message().find("gemma3_text"), std::string::npos);
}

TEST(EngineErrors, UnsupportedRopeScalingIsNamed) {
  nlohmann::json cfg = io::ModelDir::open(test::engine_data_dir() / "phi3").config();
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}};
  Error e = test::catch_error([&] { model::ModelConfig::parse(cfg); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "rope_scaling.type");
  EXPECT_NE(e.message().find("longrope"), std::string::npos);
}

TEST(EngineErrors, MissingConfigFieldIsNamed) {
  nlohmann::json cfg = io::ModelDir::open(test::engine_data_dir() / "llama").config();
  cfg.erase("hidden_size");
  Error e = test::catch_error([&] { model::ModelConfig::parse(cfg); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "hidden_size");
}

TEST(EngineConfig, LayerPatternsFollowTransformers) {
  auto sliding = [](const char* arch) {
    return model::ModelConfig::parse(io::ModelDir::open(test::engine_data_dir() / arch).config()).layer_sliding;
  };
  EXPECT_EQ(sliding("gemma2"), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(sliding("gemma3_text"), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(sliding("qwen2"), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(sliding("mistral"), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(sliding("llama"), (std::vector<uint8_t>{0, 0}));
  model::ModelConfig q2m = model::ModelConfig::parse(io::ModelDir::open(test::engine_data_dir() / "qwen2_moe").config());
  EXPECT_EQ(q2m.layer_moe, (std::vector<uint8_t>{1, 0, 1}));
}

// ---- KV cache ----

TEST(KvCache, OverflowIsAnInvalidInputError) {
  auto model = load_fixture("llama");
  auto cache = model->new_cache(8);
  const std::vector<int32_t> five = {1, 5, 9, 13, 17};
  model->forward(five, *cache);
  EXPECT_EQ(cache->size(), 5);
  Error e = test::catch_error([&] { model->forward(five, *cache); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("capacity of 8"), std::string::npos) << e.message();
  EXPECT_EQ(cache->size(), 5);  // unchanged by the failed call
  const std::vector<int32_t> three = {3, 4, 5};
  EXPECT_NO_THROW(model->forward(three, *cache));
  EXPECT_EQ(cache->size(), 8);
}

TEST(KvCache, TruncateAndClearReplayIdentically) {
  auto model = load_fixture("mistral");
  test::Reference ref = test::read_reference(test::engine_data_dir() / "mistral");
  auto cache = model->new_cache(40);
  std::vector<float> full = model->forward(ref.tokens_long, *cache, true);
  cache->truncate(30);
  EXPECT_EQ(cache->size(), 30);
  std::vector<float> again = model->forward(std::span(ref.tokens_long).subspan(30), *cache, true);
  ASSERT_EQ(again.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(again[i], full[i], 1e-4) << i;
  Error e = test::catch_error([&] { cache->truncate(41); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  cache->clear();
  EXPECT_EQ(cache->size(), 0);
  EXPECT_EQ(cache->capacity(), 40);
}

TEST(KvCache, TokenOutOfRangeIsRejected) {
  auto model = load_fixture("llama");
  auto cache = model->new_cache(8);
  const std::vector<int32_t> bad = {1, 256};
  Error e = test::catch_error([&] { model->forward(bad, *cache); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(cache->size(), 0);
}

}  // namespace
}  // namespace qloom::engine
