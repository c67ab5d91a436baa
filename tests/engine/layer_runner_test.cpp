// LayerRunner (one decoder layer at a time) against Model::forward on the
// golden fixtures of every architecture: the same layer code runs in both,
// so lm_head's input must be identical bit for bit, and every linear must be
// called with the same inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "engine/engine_fixture.h"
#include "qloom/core/error.h"
#include "qloom/engine/layer_runner.h"
#include "qloom/engine/model.h"

namespace qloom::engine {
namespace {

const char* const kArchs[] = {"llama", "llama3_rope", "mistral", "qwen2", "qwen3", "gemma",
                              "gemma2", "gemma3_text", "phi3", "mixtral", "qwen2_moe", "qwen3_moe"};

// Sum of inputs seen per linear (a cheap fingerprint of every call).
struct InputLog {
  std::map<std::string, double> sum;
  std::map<std::string, int64_t> rows;
  ForwardHooks hooks() {
    ForwardHooks h;
    h.linear_input = [this](const LinearSite& s, float* x, int64_t r, int64_t c) {
      double acc = 0;
      for (int64_t i = 0; i < r * c; ++i) acc += x[i];
      sum[s.module] += acc;
      rows[s.module] += r;
    };
    return h;
  }
};

class LayerRunnerGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerRunnerGolden, LayersInTurnGiveModelsHiddenStates) {
  const auto dir = test::engine_data_dir() / GetParam();
  const test::Reference ref = test::read_reference(dir);
  LoadOptions opt;
  opt.threads = 2;
  auto model = Model::load(dir, opt);
  const int64_t D = model->config().hidden_size;
  const int64_t T = static_cast<int64_t>(ref.tokens_long.size());

  InputLog model_log;
  ForwardHooks mh = model_log.hooks();
  std::vector<float> head_in;
  auto log_fn = mh.linear_input;
  mh.linear_input = [&](const LinearSite& s, float* x, int64_t r, int64_t c) {
    if (s.layer == -1) head_in.assign(x, x + r * c);
    else log_fn(s, x, r, c);
  };
  auto cache = model->new_cache(T);
  (void)model->forward(ref.tokens_long, *cache, /*last_only=*/false, &mh);

  auto runner = LayerRunner::open(dir, opt);
  EXPECT_EQ(runner->loaded_layer(), -1);
  std::vector<float> h = runner->embed(ref.tokens_long);
  ASSERT_EQ(h.size(), static_cast<size_t>(T * D));
  InputLog run_log;
  const ForwardHooks rh = run_log.hooks();
  for (int64_t i = 0; i < runner->config().num_layers; ++i) {
    runner->load_layer(i);
    EXPECT_EQ(runner->loaded_layer(), i);
    EXPECT_GT(runner->layer_bytes(), 0u);
    runner->forward_layer(h.data(), T, &rh);
    runner->unload();
  }
  std::vector<float> normed(h.size());
  runner->final_norm(h.data(), T, normed.data());
  ASSERT_EQ(normed.size(), head_in.size());
  for (size_t i = 0; i < normed.size(); ++i) ASSERT_EQ(normed[i], head_in[i]) << "element " << i;
  EXPECT_EQ(run_log.rows, model_log.rows);
  EXPECT_EQ(run_log.sum, model_log.sum);
}

INSTANTIATE_TEST_SUITE_P(Archs, LayerRunnerGolden, ::testing::ValuesIn(kArchs),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// Every linear's exact inputs and outputs, in call order.
struct CallLog {
  std::vector<std::string> calls;
  std::vector<std::vector<float>> data;
  ForwardHooks hooks() {
    ForwardHooks h;
    h.linear_input = [this](const LinearSite& s, float* x, int64_t r, int64_t c) {
      calls.push_back("in " + s.module);
      data.emplace_back(x, x + r * c);
    };
    h.linear_output = [this](const LinearSite& s, float* y, int64_t r, int64_t c) {
      calls.push_back("out " + s.module);
      data.emplace_back(y, y + r * c);
    };
    return h;
  }
};

// A fixture's runner (2 threads) and its long reference sequence, embedded.
struct Opened {
  explicit Opened(const char* arch) {
    const auto dir = test::engine_data_dir() / arch;
    const test::Reference ref = test::read_reference(dir);
    LoadOptions opt;
    opt.threads = 2;
    runner = LayerRunner::open(dir, opt);
    T = static_cast<int64_t>(ref.tokens_long.size());
    h = runner->embed(ref.tokens_long);
  }
  std::unique_ptr<LayerRunner> runner;
  int64_t T = 0;
  std::vector<float> h;
};

// kFirstHalf then kFeedForward: the very calls (bit for bit) of kFull, the
// first half's result is what the feed-forward norm reads, and kFeedForward
// leaves its input unchanged.
TEST_P(LayerRunnerGolden, HalvesComputeTheFullLayer) {
  Opened g(GetParam());
  auto& [runner, T, h] = g;
  for (int64_t i = 0; i < runner->config().num_layers; ++i) {
    runner->load_layer(i);
    CallLog full_log, half_log;
    const ForwardHooks fh = full_log.hooks(), hh = half_log.hooks();
    std::vector<float> mid = h;
    runner->forward_layer(mid.data(), T, &hh, LayerPart::kFirstHalf);
    EXPECT_NE(mid, h) << "layer " << i;
    const std::vector<float> mid_copy = mid;
    runner->forward_layer(mid.data(), T, &hh, LayerPart::kFeedForward);
    EXPECT_EQ(mid, mid_copy) << "kFeedForward changed its input, layer " << i;
    runner->forward_layer(h.data(), T, &fh);
    ASSERT_EQ(half_log.calls, full_log.calls) << "layer " << i;
    ASSERT_EQ(half_log.data.size(), full_log.data.size());
    for (size_t c = 0; c < full_log.data.size(); ++c)
      ASSERT_EQ(half_log.data[c], full_log.data[c]) << full_log.calls[c] << ", layer " << i;
    runner->unload();
  }
}

// Stage by stage: the same calls as kFull (bit for bit), each linear once;
// at stage s, `in` is exactly what every stage-s linear reads; the residual
// stream ends as kFull's output. MoE layers refuse.
TEST_P(LayerRunnerGolden, StepsComputeTheFullLayer) {
  Opened g(GetParam());
  auto& [runner, T, h] = g;
  for (int64_t i = 0; i < runner->config().num_layers; ++i) {
    runner->load_layer(i);
    std::vector<float> stepped = h;
    LayerStep st;
    if (!runner->steppable()) {
      EXPECT_THROW(runner->advance_layer(stepped.data(), T, st, 0), Error) << "layer " << i;
      runner->forward_layer(h.data(), T);
      runner->unload();
      continue;
    }
    CallLog full_log, step_log;
    const ForwardHooks fh = full_log.hooks(), sh = step_log.hooks();
    std::map<int, std::vector<float>> stage_in;
    for (int to = 0; to <= kLayerDone; ++to) {
      runner->advance_layer(stepped.data(), T, st, to, &sh);
      EXPECT_EQ(st.reached, to);
      if (to < kLayerDone) stage_in[to] = st.in;
    }
    EXPECT_TRUE(st.in.empty());
    EXPECT_THROW(runner->advance_layer(stepped.data(), T, st, kLayerDone), Error);
    runner->forward_layer(h.data(), T, &fh);
    ASSERT_EQ(step_log.calls, full_log.calls) << "layer " << i;
    for (size_t c = 0; c < full_log.data.size(); ++c)
      ASSERT_EQ(step_log.data[c], full_log.data[c]) << full_log.calls[c] << ", layer " << i;
    ASSERT_EQ(stepped, h) << "layer " << i;
    for (const LayerLinear& l : runner->linears()) {
      const auto at = std::find(full_log.calls.begin(), full_log.calls.end(), "in " + l.name);
      ASSERT_NE(at, full_log.calls.end()) << l.name;
      EXPECT_EQ(full_log.data[static_cast<size_t>(at - full_log.calls.begin())], stage_in.at(l.stage))
          << l.name << " (stage " << l.stage << "), layer " << i;
    }
    runner->unload();
  }
}

TEST(LayerRunner, LinearsHaveStagesAndSharedInputGroups) {
  auto runner = LayerRunner::open(test::engine_data_dir() / "qwen2_moe");
  runner->load_layer(0);
  std::map<std::string, LayerLinear> by_name;
  for (const LayerLinear& l : runner->linears()) by_name.emplace(l.name, l);
  const std::string p = "model.layers.0.";
  ASSERT_TRUE(by_name.count(p + "self_attn.q_proj"));
  EXPECT_EQ(by_name.at(p + "self_attn.q_proj").stage, 0);
  EXPECT_EQ(by_name.at(p + "self_attn.q_proj").input_group, by_name.at(p + "self_attn.v_proj").input_group);
  EXPECT_EQ(by_name.at(p + "self_attn.o_proj").stage, 1);
  const LayerLinear& g1 = by_name.at(p + "mlp.experts.1.gate_proj");
  EXPECT_EQ(g1.stage, 2);
  EXPECT_EQ(g1.input_group, by_name.at(p + "mlp.experts.1.up_proj").input_group);
  EXPECT_NE(g1.input_group, by_name.at(p + "mlp.experts.0.up_proj").input_group);
  EXPECT_EQ(by_name.at(p + "mlp.experts.1.down_proj").stage, 3);
  EXPECT_EQ(by_name.at(p + "mlp.gate").input_group, by_name.at(p + "mlp.shared_expert.up_proj").input_group);
  EXPECT_EQ(&runner->linear(p + "mlp.experts.1.down_proj"), by_name.at(p + "mlp.experts.1.down_proj").weight);
  EXPECT_THROW(runner->linear(p + "mlp.nothing"), Error);
  EXPECT_THROW(runner->load_layer(runner->config().num_layers), Error);
}

TEST(LayerRunner, ReplacedWeightChangesTheLayerAndAttentionPartKeepsH) {
  const auto dir = test::engine_data_dir() / "llama";
  const test::Reference ref = test::read_reference(dir);
  auto runner = LayerRunner::open(dir);
  const int64_t T = static_cast<int64_t>(ref.tokens_short.size());
  const std::vector<float> h0 = runner->embed(ref.tokens_short);
  runner->load_layer(0);
  // Attention only: q/k/v/o called, h untouched.
  std::vector<std::string> called;
  ForwardHooks hooks;
  hooks.linear_input = [&](const LinearSite& s, float*, int64_t, int64_t) { called.push_back(s.module); };
  std::vector<float> h = h0;
  runner->forward_layer(h.data(), T, &hooks, LayerPart::kAttention);
  EXPECT_EQ(h, h0);
  EXPECT_EQ(called.size(), 4u);
  std::vector<float> full = h0;
  runner->forward_layer(full.data(), T);
  // Zeroing down_proj removes the MLP's contribution.
  LinearWeight& down = runner->linear("model.layers.0.mlp.down_proj");
  down.type = WeightType::kF32;
  down.bf16.clear();
  down.f32.assign(static_cast<size_t>(down.out * down.in), 0.0f);
  std::vector<float> no_mlp = h0;
  runner->forward_layer(no_mlp.data(), T);
  EXPECT_NE(no_mlp, full);
  runner->unload();
  EXPECT_THROW(runner->forward_layer(h.data(), T), Error);
  EXPECT_THROW(runner->embed(std::vector<int32_t>{-1}), Error);
  // Released (calibration embeds its samples first): embed() is a usage error.
  runner->release_embedding();
  try {
    runner->embed(std::vector<int32_t>{1});
    ADD_FAILURE() << "embed after release_embedding did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  }
}

}  // namespace
}  // namespace qloom::engine
