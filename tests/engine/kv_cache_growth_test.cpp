// The KV cache takes memory as the sequence grows (KvCacheImpl::grow), not
// for its whole capacity up front: a fresh cache of 4096 positions holds
// nothing, one that has seen n positions holds about n (chunks of
// kGrowChunk, 1.5x growth, never past capacity), and the logits are the
// same bit for bit as those of a cache grown to its capacity before use —
// for forward and forward_batch, fp32 and fp8 storage.
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/engine/kv_cache.h"
#include "qloom/engine/model.h"

namespace qloom::engine {
namespace {

std::unique_ptr<Model> demo(bool fp8) {
  LoadOptions lo;
  lo.threads = 2;
  if (fp8) lo.kv_cache_fp8_scales.assign(size_t(Model::load(QLOOM_DEMO_MODEL_DIR, lo)->config().num_layers), {0.02f, 0.01f});
  return Model::load(QLOOM_DEMO_MODEL_DIR, lo);
}

TEST(KvCacheGrowth, StorageFollowsPositionsNotCapacity) {
  KvCacheImpl c(2, 2, 8, 4096);
  EXPECT_EQ(c.allocated(), 0);
  EXPECT_EQ(c.allocated_bytes(), 0u);
  c.grow(10);
  EXPECT_EQ(c.allocated(), KvCacheImpl::kGrowChunk);
  EXPECT_EQ(c.allocated_bytes(), size_t(KvCacheImpl::kGrowChunk) * c.bytes_per_token());
  c.grow(KvCacheImpl::kGrowChunk + 1);  // 1.5x beats the next chunk
  EXPECT_EQ(c.allocated(), 2 * KvCacheImpl::kGrowChunk);
  c.grow(5);  // never shrinks
  EXPECT_EQ(c.allocated(), 2 * KvCacheImpl::kGrowChunk);
  c.grow(4000);
  EXPECT_EQ(c.allocated(), 4032);
  c.grow(4090);  // capped at capacity
  EXPECT_EQ(c.allocated(), 4096);
  EXPECT_EQ(c.allocated_bytes(), size_t(4096) * c.bytes_per_token());
  EXPECT_THROW(c.grow(4097), Error);
  KvCacheImpl f8(2, 2, 8, 4096, {{1.0f, 1.0f}, {1.0f, 1.0f}});
  f8.grow(1);  // codes for each layer plus the one fp32 window
  EXPECT_EQ(f8.allocated_bytes(), size_t(KvCacheImpl::kGrowChunk) * (f8.bytes_per_token() + 2 * 2 * 8 * 4));
  EXPECT_EQ(f8.bytes_for(KvCacheImpl::kGrowChunk), f8.allocated_bytes());
  EXPECT_EQ(c.bytes_for(4096), c.allocated_bytes());
}

// 150 decode steps on a lazily grown cache (crossing several growths) equal
// those on a cache grown to its capacity first; the lazy one holds memory for
// about the positions used, the other for all 4096.
void expect_same_as_pregrown(bool fp8) {
  auto m = demo(fp8);
  auto lazy = m->new_cache(4096), full = m->new_cache(4096);
  dynamic_cast<KvCacheImpl&>(*full).grow(4096);
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(1 + (i * 37) % 500);
  ASSERT_EQ(m->forward(p, *lazy, true), m->forward(p, *full, true));
  auto other = m->new_cache(4096);  // forward_batch grows each of its caches too
  m->forward(p, *other, true);
  for (int step = 0; step < 150; ++step) {
    const int32_t tok[1] = {int32_t(1 + (step * 13) % 500)};
    const std::vector<float> want = m->forward(tok, *full, true);
    if (step % 2) {
      ASSERT_EQ(m->forward(tok, *lazy, true), want) << step;
      continue;
    }
    const int32_t two[2] = {tok[0], 7};
    KvCache* caches[2] = {lazy.get(), other.get()};
    const std::vector<float> rows = m->forward_batch(two, caches);
    ASSERT_EQ(std::vector<float>(rows.begin(), rows.begin() + int64_t(want.size())), want) << step;
  }
  EXPECT_EQ(lazy->size(), 190);
  const int64_t held = dynamic_cast<KvCacheImpl&>(*lazy).allocated();
  EXPECT_GE(held, 190);
  EXPECT_LE(held, 2 * 190);
  EXPECT_GE(full->allocated_bytes(), size_t(4096) * full->bytes_per_token());
  EXPECT_LT(lazy->allocated_bytes() * 10, full->allocated_bytes());
}

TEST(KvCacheGrowth, LazyCacheGivesTheSameLogitsFp32) { expect_same_as_pregrown(false); }
TEST(KvCacheGrowth, LazyCacheGivesTheSameLogitsFp8) { expect_same_as_pregrown(true); }

}  // namespace
}  // namespace qloom::engine
