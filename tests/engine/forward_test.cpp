// Forward pass against transformers (float32, eager attention) on the golden
// fixtures of scripts/goldens/engine_fixtures.py: one tiny random model per
// architecture plus the demo model.
//
// Tolerance: max |ours - reference| <= kRelTol * max(1, max |reference|).
// Both sides compute in fp32 from identical weights (bf16 fixtures widen
// exactly), so the only differences are summation order (GEMM blocking,
// attention, norms), libm vs torch transcendentals and RoPE angle rounding:
// each ~1e-7 relative per op, accumulated over <= 128-term dot products and a
// few layers, i.e. ~1e-5 of the logit scale at worst (measured: <= 1e-6 on
// every fixture). 2e-4 leaves >100x headroom for other GEMM kernels while
// any real bug gives errors of 1e-1 and above: dropping the sliding window,
// a softcap, llama3/linear RoPE scaling or norm_topk_prob changes these
// fixtures' logits by 0.5 to 70 (checked with transformers).
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/engine_fixture.h"
#include "qloom/engine/model.h"

namespace qloom::engine {
namespace {

using test::compare_logits;
using test::LogitDiff;

constexpr double kRelTol = 2e-4;

const char* const kArchs[] = {"llama", "llama3_rope", "mistral", "qwen2", "qwen3", "gemma",
                              "gemma2", "gemma3_text", "phi3", "mixtral", "qwen2_moe", "qwen3_moe"};

void report(const std::string& what, const LogitDiff& d) {
  std::printf("[ forward ] %-28s max_abs %.3e  logit_scale %8.3f  rel %.3e\n", what.c_str(), d.max_abs,
              d.scale, d.rel());
}

class ForwardGolden : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = test::engine_data_dir() / GetParam();
    ref_ = test::read_reference(dir_);
    LoadOptions opt;
    opt.threads = 2;
    model_ = Model::load(dir_, opt);
    vocab_ = model_->config().vocab_size;
  }
  std::filesystem::path dir_;
  test::Reference ref_;
  std::unique_ptr<Model> model_;
  int64_t vocab_ = 0;
};

TEST_P(ForwardGolden, PrefillMatchesTransformers) {
  auto cache = model_->new_cache(64);
  std::vector<float> got = model_->forward(ref_.tokens_long, *cache);
  ASSERT_EQ(got.size(), ref_.logits_long.size());
  LogitDiff d = compare_logits(got.data(), ref_.logits_long.data(), got.size());
  report(std::string(GetParam()) + " prefill(40)", d);
  EXPECT_LE(d.rel(), kRelTol);

  cache->clear();
  got = model_->forward(ref_.tokens_short, *cache);
  ASSERT_EQ(got.size(), ref_.logits_short.size());
  d = compare_logits(got.data(), ref_.logits_short.data(), got.size());
  report(std::string(GetParam()) + " prefill(7)", d);
  EXPECT_LE(d.rel(), kRelTol);
}

TEST_P(ForwardGolden, IncrementalDecodeMatchesPrefill) {
  const size_t n = ref_.tokens_long.size(), split = 13;
  auto cache = model_->new_cache(static_cast<int64_t>(n));
  std::vector<float> got = model_->forward(std::span(ref_.tokens_long).first(split), *cache);
  for (size_t t = split; t < n; ++t) {
    std::vector<float> row = model_->forward(std::span(ref_.tokens_long).subspan(t, 1), *cache);
    got.insert(got.end(), row.begin(), row.end());
  }
  EXPECT_EQ(cache->size(), static_cast<int64_t>(n));
  ASSERT_EQ(got.size(), ref_.logits_long.size());
  LogitDiff d = compare_logits(got.data(), ref_.logits_long.data(), got.size());
  report(std::string(GetParam()) + " prefill(13)+decode", d);
  EXPECT_LE(d.rel(), kRelTol);

  // Chunked continuation after truncating and last_only.
  cache->truncate(20);
  std::vector<float> last = model_->forward(std::span(ref_.tokens_long).subspan(20), *cache, true);
  ASSERT_EQ(static_cast<int64_t>(last.size()), vocab_);
  d = compare_logits(last.data(), ref_.logits_long.data() + (n - 1) * vocab_, last.size());
  EXPECT_LE(d.rel(), kRelTol);
}

INSTANTIATE_TEST_SUITE_P(ForwardArchs, ForwardGolden, ::testing::ValuesIn(kArchs),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST(ForwardDemo, MatchesTransformers) {
  io::SafetensorsFile f = io::SafetensorsFile::open(test::engine_data_dir() / "demo_logits.safetensors");
  std::vector<int32_t> tokens = test::read_i32(f, "tokens");
  std::vector<float> ref = test::read_f32(f, "logits");
  LoadOptions opt;
  opt.threads = 2;
  auto model = Model::load(QLOOM_DEMO_MODEL_DIR, opt);
  auto cache = model->new_cache(static_cast<int64_t>(tokens.size()));
  std::vector<float> got = model->forward(tokens, *cache);
  ASSERT_EQ(got.size(), ref.size());
  LogitDiff d = compare_logits(got.data(), ref.data(), got.size());
  report("demo stories260K prefill(64)", d);
  EXPECT_LE(d.rel(), kRelTol);
}

TEST(ForwardWeights, Bf16LinearsStayClose) {
  // An F32 fixture forced to BF16 linears: half the bytes, logits close (bf16
  // weight rounding is ~0.4% per weight, so only a loose bound applies).
  const auto dir = test::engine_data_dir() / "qwen2";
  test::Reference ref = test::read_reference(dir);
  LoadOptions f32, bf16;
  f32.threads = bf16.threads = 2;
  f32.weights = LoadOptions::Weights::kF32;
  bf16.weights = LoadOptions::Weights::kBF16;
  auto a = Model::load(dir, f32), b = Model::load(dir, bf16);
  EXPECT_LT(b->weight_bytes(), a->weight_bytes() * 6 / 10);
  auto cache = b->new_cache(64);
  std::vector<float> got = b->forward(ref.tokens_long, *cache);
  LogitDiff d = compare_logits(got.data(), ref.logits_long.data(), got.size());
  report("qwen2 forced bf16", d);
  EXPECT_LE(d.rel(), 5e-2);
}

TEST(ForwardThreads, ThreadCountDoesNotChangeLogits) {
  const auto dir = test::engine_data_dir() / "qwen2_moe";
  test::Reference ref = test::read_reference(dir);
  std::vector<float> results[2];
  const unsigned threads[2] = {1, 5};
  for (int i = 0; i < 2; ++i) {
    LoadOptions opt;
    opt.threads = threads[i];
    auto model = Model::load(dir, opt);
    auto cache = model->new_cache(64);
    results[i] = model->forward(ref.tokens_long, *cache);
  }
  LogitDiff d = compare_logits(results[1].data(), results[0].data(), results[0].size());
  EXPECT_LE(d.rel(), 1e-5);
}

}  // namespace
}  // namespace qloom::engine
