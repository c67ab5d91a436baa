// KvCacheImpl: the engine's KvCache — per layer, keys and values for up to
// capacity() positions, laid out [position][kv_head][head_dim]. Every layer
// stores all positions (sliding-window layers too); the window is applied
// when attending.
//
// Storage grows with the sequence, not with capacity(): grow(n) (called by
// the model before a forward writes positions up to n) extends every layer
// to max(n rounded up to kGrowChunk positions, 1.5 × the allocation), capped
// at capacity(), keeping what is stored. A request that may generate 4096
// tokens but stops after 20 holds a chunk, not 4096 positions.
//
// Storage is fp32, or fp8 e4m3 codes with one (k, v) scale pair per layer
// (LoadOptions::kv_cache_fp8_scales: an fp8-KV checkpoint on the native
// runtime). An fp8 cache keeps one fp32 window shared by all layers:
// prepare_layer() decodes a layer's codes [0, n) into it (code · scale), the
// layer appends its new rows there (already rounded to fp8 by attention,
// fp8_kv_round) and attends over the window, and commit_layer() stores the
// new rows' codes. keys() / values() return the window for every layer then.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "qloom/engine/model.h"

namespace qloom::engine {

// x[i] = e4m3(clamp(x[i] / scale, ±448)) · scale (RNE, saturating; NaN stays
// NaN): what an fp8 KV cache with this scale stores, the same rounding as the
// simulate runtime's static fp8 output quantization.
void fp8_kv_round(float* x, int64_t n, float scale);

class KvCacheImpl final : public KvCache {
 public:
  // fp8_scales: empty for an fp32 cache, else one (k, v) pair per layer.
  KvCacheImpl(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t capacity,
              std::vector<std::pair<float, float>> fp8_scales = {});

  int64_t size() const override { return size_; }
  int64_t capacity() const override { return capacity_; }
  void clear() override { size_ = 0; }
  // Throws kUsage when n is negative or above size().
  void truncate(int64_t n) override;
  size_t bytes_per_token() const override;
  size_t allocated_bytes() const override;
  size_t bytes_for(int64_t positions) const override;  // fp8: the codes plus the fp32 window

  static constexpr int64_t kGrowChunk = 64;
  // Positions storage exists for; grow(n): at least n (n <= capacity()).
  int64_t allocated() const { return allocated_; }
  void grow(int64_t n);

  // Row stride (floats) of one position.
  int64_t row() const { return kv_heads_ * head_dim_; }
  float* keys(int64_t layer) { return fp8() ? k_[0].data() : k_[static_cast<size_t>(layer)].data(); }
  float* values(int64_t layer) { return fp8() ? v_[0].data() : v_[static_cast<size_t>(layer)].data(); }
  void set_size(int64_t n) { size_ = n; }
  // Same shape and the same storage (fp32, or fp8 with these scales).
  bool matches(int64_t layers, int64_t kv_heads, int64_t head_dim,
               const std::vector<std::pair<float, float>>& fp8_scales = {}) const {
    return layers == layers_ && kv_heads == kv_heads_ && head_dim == head_dim_ && fp8_scales == scales_;
  }

  bool fp8() const { return !scales_.empty(); }
  // The (k, v) scales of `layer`, {0, 0} for an fp32 cache.
  std::pair<float, float> fp8_scales(int64_t layer) const {
    return fp8() ? scales_[static_cast<size_t>(layer)] : std::pair{0.0f, 0.0f};
  }
  // fp8 only (no-ops otherwise): decode positions [0, n) of `layer` into the
  // window; store the codes of window positions [pos0, pos0 + T).
  void prepare_layer(int64_t layer, int64_t n);
  void commit_layer(int64_t layer, int64_t pos0, int64_t T);

 private:
  int64_t layers_, kv_heads_, head_dim_, capacity_, size_ = 0, allocated_ = 0;
  std::vector<std::vector<float>> k_, v_;        // fp32: per layer; fp8: the one window
  std::vector<std::vector<uint8_t>> k8_, v8_;    // fp8 codes per layer
  std::vector<std::pair<float, float>> scales_;  // fp8 (k, v) scale per layer
};

}  // namespace qloom::engine
