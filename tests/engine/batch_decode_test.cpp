// Model::forward_batch (batched decode of several sequences in one pass)
// against one forward() per sequence: the same logits bit for bit, step after
// step, for sequences of different lengths; bad batches are refused before
// any cache changes.
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/engine/model.h"
#include "support/subprocess.h"

namespace qloom::engine {
namespace {

std::unique_ptr<Model> demo(unsigned threads) {
  LoadOptions lo;
  lo.threads = threads;
  return Model::load(QLOOM_DEMO_MODEL_DIR, lo);
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(1 + (i * 37 + salt * 11) % 500);
  return p;
}

void expect_batch_equals_one_by_one(unsigned threads) {
  auto m = demo(threads);
  const int lengths[3] = {1, 17, 70};
  std::vector<std::unique_ptr<KvCache>> solo, batch;
  std::vector<int32_t> next;
  for (int s = 0; s < 3; ++s) {
    solo.push_back(m->new_cache(128));
    batch.push_back(m->new_cache(128));
    const std::vector<int32_t> p = prompt(lengths[s], s);
    const std::vector<float> a = m->forward(p, *solo.back(), true);
    const std::vector<float> b = m->forward(p, *batch.back(), true);
    ASSERT_EQ(a, b);
    next.push_back(p.back());
  }
  const int64_t V = m->config().vocab_size;
  for (int step = 0; step < 6; ++step) {
    std::vector<KvCache*> caches{batch[0].get(), batch[1].get(), batch[2].get()};
    const std::vector<float> rows = m->forward_batch(next, caches);
    ASSERT_EQ(int64_t(rows.size()), 3 * V);
    for (int s = 0; s < 3; ++s) {
      const int32_t one[1] = {next[size_t(s)]};
      const std::vector<float> want = m->forward(one, *solo[size_t(s)], true);
      const std::vector<float> got(rows.begin() + s * V, rows.begin() + (s + 1) * V);
      ASSERT_EQ(got, want) << "step " << step << " sequence " << s;  // bit for bit
      EXPECT_EQ(batch[size_t(s)]->size(), solo[size_t(s)]->size());
      next[size_t(s)] = int32_t(1 + (step * 13 + s * 7) % 500);
    }
  }
}

TEST(BatchDecode, EqualsOneForwardPerSequenceBitForBit) { expect_batch_equals_one_by_one(1); }
TEST(BatchDecode, EqualsOneForwardPerSequenceWithThreads) { expect_batch_equals_one_by_one(3); }

// The GEMV / GEMM kernels of every ISA give a row the same bits whatever the
// row count, so the equality holds under each QLOOM_MAX_ISA cap too.
TEST(BatchDecode, EqualUnderEveryIsaCap) {
  test::expect_passes_under_isa_caps("BatchDecode.EqualsOneForwardPerSequenceBitForBit");
}

TEST(BatchDecode, BadBatchesAreRefusedBeforeAnyCacheChanges) {
  auto m = demo(1);
  auto a = m->new_cache(4), b = m->new_cache(1);
  const int32_t p[1] = {5};
  m->forward(p, *b, true);  // b is full
  const std::vector<int32_t> two{3, 4};
  std::vector<KvCache*> same{a.get(), a.get()};
  EXPECT_THROW(m->forward_batch(two, same), Error);
  std::vector<KvCache*> full{a.get(), b.get()};
  EXPECT_THROW(m->forward_batch(two, full), Error);
  EXPECT_EQ(a->size(), 0);
  std::vector<KvCache*> one{a.get()};
  EXPECT_THROW(m->forward_batch(two, one), Error);  // one token per cache
  const std::vector<int32_t> bad{-1};
  EXPECT_THROW(m->forward_batch(bad, one), Error);
  EXPECT_EQ(a->size(), 0);
  EXPECT_TRUE(m->forward_batch({}, {}).empty());
}

}  // namespace
}  // namespace qloom::engine
