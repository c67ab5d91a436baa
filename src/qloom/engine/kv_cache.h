// KvCacheImpl: the engine's KvCache — per layer, keys and values for up to
// capacity() positions, laid out [position][kv_head][head_dim] in fp32.
// Every layer stores all positions (sliding-window layers too); the window is
// applied when attending.
#pragma once

#include <cstdint>
#include <vector>

#include "qloom/engine/model.h"

namespace qloom::engine {

class KvCacheImpl final : public KvCache {
 public:
  KvCacheImpl(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t capacity);

  int64_t size() const override { return size_; }
  int64_t capacity() const override { return capacity_; }
  void clear() override { size_ = 0; }
  // Throws kUsage when n is negative or above size().
  void truncate(int64_t n) override;

  // Row stride (floats) of one position.
  int64_t row() const { return kv_heads_ * head_dim_; }
  float* keys(int64_t layer) { return k_[static_cast<size_t>(layer)].data(); }
  float* values(int64_t layer) { return v_[static_cast<size_t>(layer)].data(); }
  void set_size(int64_t n) { size_ = n; }
  bool matches(int64_t layers, int64_t kv_heads, int64_t head_dim) const {
    return layers == static_cast<int64_t>(k_.size()) && kv_heads == kv_heads_ && head_dim == head_dim_;
  }

 private:
  int64_t kv_heads_, head_dim_, capacity_, size_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace qloom::engine
