// The fp8 e4m3 KV cache (LoadOptions::kv_cache_fp8_scales): the rounding it
// applies (fp8_kv_round, against float_codec's e4m3 directly, adversarial
// values included), its storage (1 byte per element, codes round-trip
// exactly through the fp32 window), the checks on its scales, and the demo
// model run on it: batched decode equals one forward per sequence bit for
// bit, the logits differ from the fp32 cache's (the rounding is applied) but
// stay close, and an fp32 cache is refused by an fp8 model.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/engine/kv_cache.h"
#include "qloom/engine/model.h"

namespace qloom::engine {
namespace {

TEST(KvCacheFp8, RoundIsE4M3OfTheScaledValueSaturating) {
  const float s = 0.5f;
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.3f, 223.9f, 224.0f, 1e9f, -1e9f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1e-9f, 0.0097f, 3.14159f};
  std::vector<float> want;
  for (float v : x) {
    if (std::isnan(v)) {
      want.push_back(v);
      continue;
    }
    const float c = std::fmax(-448.0f, std::fmin(448.0f, v / s));
    want.push_back(fp8_e4m3_to_float(float_to_fp8_e4m3(c)) * s);
  }
  fp8_kv_round(x.data(), int64_t(x.size()), s);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(x[i])) << i;
    } else {
      EXPECT_EQ(x[i], want[i]) << i;
    }
  }
  EXPECT_EQ(x[6], 448.0f * s);   // huge saturates
  EXPECT_EQ(x[8], 448.0f * s);   // +inf saturates
  EXPECT_EQ(x[9], -448.0f * s);  // -inf saturates
}

TEST(KvCacheFp8, StoresOneBytePerElementAndRoundTripsCodes) {
  const int64_t layers = 3, heads = 2, hd = 8, cap = 16;
  KvCacheImpl f32(layers, heads, hd, cap);
  KvCacheImpl f8(layers, heads, hd, cap, {{0.1f, 0.2f}, {0.3f, 0.4f}, {1.0f, 2.0f}});
  EXPECT_EQ(f32.bytes_per_token(), size_t(2 * layers * heads * hd * 4));
  EXPECT_EQ(f8.bytes_per_token(), size_t(2 * layers * heads * hd));
  EXPECT_TRUE(f8.fp8());
  EXPECT_FALSE(f32.fp8());
  // Fill layer 1 positions [0, 5) with rounded values, commit, clobber the
  // window, decode back: exactly the rounded values.
  const int64_t n = 5 * f8.row();
  std::vector<float> kv(static_cast<size_t>(n)), vv(kv.size());
  for (int64_t i = 0; i < n; ++i) kv[size_t(i)] = std::sin(0.37f * float(i)) * 40.0f, vv[size_t(i)] = float(i) - 30.0f;
  fp8_kv_round(kv.data(), n, 0.3f);
  fp8_kv_round(vv.data(), n, 0.4f);
  f8.grow(5);  // storage is taken as positions are written (the model grows before a forward)
  std::copy(kv.begin(), kv.end(), f8.keys(1));
  std::copy(vv.begin(), vv.end(), f8.values(1));
  f8.commit_layer(1, 0, 5);
  std::fill(f8.keys(0), f8.keys(0) + n, -7.0f);  // the window is shared by every layer
  std::fill(f8.values(0), f8.values(0) + n, -7.0f);
  f8.prepare_layer(1, 5);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(f8.keys(1)[i], kv[size_t(i)]) << i;
    ASSERT_EQ(f8.values(1)[i], vv[size_t(i)]) << i;
  }
}

TEST(KvCacheFp8, RefusesBadScales) {
  EXPECT_THROW(KvCacheImpl(2, 1, 4, 8, {{1.0f, 1.0f}}), Error);  // one pair for two layers
  EXPECT_THROW(KvCacheImpl(1, 1, 4, 8, {{0.0f, 1.0f}}), Error);
  EXPECT_THROW(KvCacheImpl(1, 1, 4, 8, {{1.0f, std::numeric_limits<float>::quiet_NaN()}}), Error);
  LoadOptions lo;
  lo.kv_cache_fp8_scales = {{1.0f, 1.0f}};  // the demo model has more layers
  EXPECT_THROW(Model::load(QLOOM_DEMO_MODEL_DIR, lo), Error);
}

std::unique_ptr<Model> demo(unsigned threads, bool fp8) {
  LoadOptions lo;
  lo.threads = threads;
  auto probe = Model::load(QLOOM_DEMO_MODEL_DIR, lo);
  if (fp8) lo.kv_cache_fp8_scales.assign(size_t(probe->config().num_layers), {0.02f, 0.01f});
  return Model::load(QLOOM_DEMO_MODEL_DIR, lo);
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(1 + (i * 37 + salt * 11) % 500);
  return p;
}

TEST(KvCacheFp8, BatchedDecodeEqualsOneByOneBitForBit) {
  auto m = demo(2, true);
  std::vector<std::unique_ptr<KvCache>> solo, batch;
  std::vector<int32_t> next;
  for (int s = 0; s < 2; ++s) {
    solo.push_back(m->new_cache(64));
    batch.push_back(m->new_cache(64));
    const std::vector<int32_t> p = prompt(5 + 20 * s, s);
    ASSERT_EQ(m->forward(p, *solo.back(), true), m->forward(p, *batch.back(), true));
    next.push_back(p.back());
  }
  EXPECT_EQ(batch[0]->bytes_per_token() * 4, demo(1, false)->new_cache(1)->bytes_per_token());
  const int64_t V = m->config().vocab_size;
  for (int step = 0; step < 4; ++step) {
    std::vector<KvCache*> caches{batch[0].get(), batch[1].get()};
    const std::vector<float> rows = m->forward_batch(next, caches);
    for (int s = 0; s < 2; ++s) {
      const int32_t one[1] = {next[size_t(s)]};
      const std::vector<float> want = m->forward(one, *solo[size_t(s)], true);
      ASSERT_EQ(std::vector<float>(rows.begin() + s * V, rows.begin() + (s + 1) * V), want) << step << " " << s;
      next[size_t(s)] = int32_t(1 + (step * 13 + s * 7) % 500);
    }
  }
}

TEST(KvCacheFp8, RoundsTheCacheButStaysCloseToFp32) {
  auto f8 = demo(2, true), f32 = demo(2, false);
  const std::vector<int32_t> p = prompt(40, 3);
  auto c8 = f8->new_cache(40), c32 = f32->new_cache(40);
  const std::vector<float> a = f8->forward(p, *c8, false), b = f32->forward(p, *c32, false);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += double(a[i] - b[i]) * (a[i] - b[i]), norm += double(b[i]) * b[i];
  EXPECT_GT(diff, 0.0) << "the fp8 cache must change the logits";
  // fp8 e4m3 has a 2^-4 relative step; on a 5-layer toy model the logits move
  // by a few percent at most.
  EXPECT_LT(std::sqrt(diff / norm), 0.1);
  EXPECT_THROW(f8->forward(p, *f32->new_cache(40), false), Error);  // an fp32 cache on an fp8 model
}

}  // namespace
}  // namespace qloom::engine
