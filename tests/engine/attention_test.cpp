// The blocked attention (attend) against the plain reference (attend_ref) on
// random inputs: GQA, sliding windows, softcapping, a prefix already cached,
// single-token decode, and adversarial magnitudes. Tolerance: |out - ref| <=
// 1e-5 * (max |v| + 1): both are convex combinations of the values, fp32
// scores and softmax against double accumulation differ by rounding only.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/thread_pool.h"
#include "qloom/engine/attention.h"

namespace qloom::engine {
namespace {

struct Case {
  int64_t heads, kv_heads, hd, T, pos0, window;
  float softcap, qscale;
};

void check(const Case& c, unsigned threads) {
  std::mt19937 rng(static_cast<uint32_t>(c.T * 131 + c.pos0 * 7 + c.heads));
  std::normal_distribution<float> d(0.0f, 1.0f);
  AttentionShape s;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.hd;
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  s.softcap = c.softcap;
  s.window = c.window;
  const int64_t n = c.pos0 + c.T;
  std::vector<float> q(static_cast<size_t>(c.T * c.heads * c.hd)), k(static_cast<size_t>(n * c.kv_heads * c.hd)),
      v(k.size());
  for (auto& x : q) x = d(rng) * c.qscale;
  for (auto& x : k) x = d(rng);
  float vmax = 0;
  for (auto& x : v) {
    x = d(rng);
    vmax = std::max(vmax, std::fabs(x));
  }
  std::vector<float> got(q.size()), want(q.size());
  ThreadPool pool(threads);
  attend(s, q.data(), c.T, c.pos0, k.data(), v.data(), got.data(), pool);
  attend_ref(s, q.data(), c.T, c.pos0, k.data(), v.data(), want.data(), pool);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  }
  EXPECT_LE(worst, 1e-5 * (vmax + 1)) << "heads " << c.heads << "/" << c.kv_heads << " T " << c.T << " pos0 "
                                       << c.pos0 << " window " << c.window << " softcap " << c.softcap;
}

TEST(Attention, BlockedMatchesReference) {
  const Case cases[] = {
      {8, 4, 8, 40, 0, 0, 0.0f, 1.0f},     {8, 2, 16, 130, 0, 0, 0.0f, 1.0f},
      {4, 4, 64, 70, 0, 12, 0.0f, 1.0f},   {6, 2, 24, 33, 9, 8, 0.0f, 1.0f},
      {4, 1, 32, 65, 0, 0, 20.0f, 3.0f},   {8, 4, 8, 1, 57, 0, 0.0f, 1.0f},
      {8, 4, 8, 1, 57, 16, 50.0f, 1.0f},   {2, 1, 8, 200, 0, 0, 0.0f, 30.0f},  // huge logits
  };
  for (const auto& c : cases)
    for (unsigned threads : {1u, 2u}) check(c, threads);
}

TEST(Attention, AllEqualKeysGiveTheMeanOfTheValues) {
  AttentionShape s;
  s.heads = s.kv_heads = 1;
  s.head_dim = 4;
  s.scale = 0.5f;
  const int64_t T = 3;
  std::vector<float> q(T * 4, 1.0f), k(T * 4, 0.0f), v = {1, 2, 3, 4, 3, 4, 5, 6, 5, 6, 7, 8}, out(T * 4);
  ThreadPool pool(1);
  attend(s, q.data(), T, 0, k.data(), v.data(), out.data(), pool);
  EXPECT_FLOAT_EQ(out[0], 1.0f);             // position 0 sees itself only
  EXPECT_FLOAT_EQ(out[4], 2.0f);             // mean of rows 0, 1
  EXPECT_NEAR(out[8 + 3], 6.0f, 1e-6);       // mean of rows 0..2, last column
}

}  // namespace
}  // namespace qloom::engine
