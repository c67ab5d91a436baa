#include "qloom/engine/kv_cache.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

namespace qloom::engine {
namespace {

const std::array<float, 256>& fp8_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

void decode(const uint8_t* codes, float scale, float* out, int64_t n) {
  const std::array<float, 256>& t = fp8_values();
  for (int64_t i = 0; i < n; ++i) out[i] = t[codes[i]] * scale;
}

// The values are already code · scale (fp8_kv_round): dividing by the scale
// lands within an ulp of the code's value, which rounds back to the code.
void encode(const float* x, float scale, uint8_t* codes, int64_t n) {
  for (int64_t i = 0; i < n; ++i) codes[i] = float_to_fp8_e4m3(std::clamp(x[i] / scale, -448.0f, 448.0f));
}

}  // namespace

void fp8_kv_round(float* x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    x[i] = fp8_e4m3_to_float(float_to_fp8_e4m3(std::clamp(x[i] / scale, -448.0f, 448.0f))) * scale;
  }
}

KvCacheImpl::KvCacheImpl(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t capacity,
                         std::vector<std::pair<float, float>> fp8_scales)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity), scales_(std::move(fp8_scales)) {
  if (capacity < 0) throw Error(ErrorKind::kUsage, "", "max_tokens", "a KV cache needs max_tokens >= 0");
  if (!scales_.empty() && static_cast<int64_t>(scales_.size()) != layers)
    throw Error(ErrorKind::kUsage, "", "kv_cache_fp8_scales",
                std::to_string(scales_.size()) + " (k, v) scale pairs for " + std::to_string(layers) + " layers",
                "give one pair per decoder layer");
  for (const auto& [k, v] : scales_)
    if (!(k > 0.0f && std::isfinite(k) && v > 0.0f && std::isfinite(v)))
      throw Error(ErrorKind::kUsage, "", "kv_cache_fp8_scales", "an fp8 KV-cache scale is not finite and positive");
  const size_t windows = fp8() ? 1 : static_cast<size_t>(layers);
  k_.resize(windows);
  v_.resize(windows);
  if (fp8()) {
    k8_.resize(static_cast<size_t>(layers));
    v8_.resize(static_cast<size_t>(layers));
  }
}

void KvCacheImpl::grow(int64_t n) {
  if (n <= allocated_) return;
  if (n > capacity_)
    throw Error(ErrorKind::kUsage, "", "grow",
                "a KV cache of capacity " + std::to_string(capacity_) + " cannot hold " + std::to_string(n) + " positions");
  const int64_t chunked = (n + kGrowChunk - 1) / kGrowChunk * kGrowChunk;
  allocated_ = std::min(capacity_, std::max(chunked, allocated_ + allocated_ / 2));
  const auto elems = static_cast<size_t>(allocated_ * row());
  for (auto* side : {&k_, &v_})
    for (std::vector<float>& w : *side) w.reserve(elems), w.resize(elems);  // exactly elems, not doubled
  for (auto* side : {&k8_, &v8_})
    for (std::vector<uint8_t>& c : *side) c.reserve(elems), c.resize(elems);
}

size_t KvCacheImpl::bytes_for(int64_t positions) const {
  const size_t window = fp8() ? static_cast<size_t>(2 * row()) * sizeof(float) : 0;
  return static_cast<size_t>(positions) * (bytes_per_token() + window);
}

size_t KvCacheImpl::allocated_bytes() const {
  size_t bytes = 0;
  for (const auto* side : {&k_, &v_})
    for (const std::vector<float>& w : *side) bytes += w.capacity() * sizeof(float);
  for (const auto* side : {&k8_, &v8_})
    for (const std::vector<uint8_t>& c : *side) bytes += c.capacity();
  return bytes;
}

size_t KvCacheImpl::bytes_per_token() const {
  const size_t elems = static_cast<size_t>(2 * layers_ * kv_heads_ * head_dim_);
  return fp8() ? elems : elems * sizeof(float);
}

void KvCacheImpl::prepare_layer(int64_t layer, int64_t n) {
  if (!fp8() || n <= 0) return;
  const auto [ks, vs] = scales_[static_cast<size_t>(layer)];
  decode(k8_[static_cast<size_t>(layer)].data(), ks, k_[0].data(), n * row());
  decode(v8_[static_cast<size_t>(layer)].data(), vs, v_[0].data(), n * row());
}

void KvCacheImpl::commit_layer(int64_t layer, int64_t pos0, int64_t T) {
  if (!fp8() || T <= 0) return;
  const auto [ks, vs] = scales_[static_cast<size_t>(layer)];
  const int64_t off = pos0 * row();
  encode(k_[0].data() + off, ks, k8_[static_cast<size_t>(layer)].data() + off, T * row());
  encode(v_[0].data() + off, vs, v8_[static_cast<size_t>(layer)].data() + off, T * row());
}

void KvCacheImpl::truncate(int64_t n) {
  if (n < 0 || n > size_) {
    std::string msg = "cannot truncate a KV cache of ";
    msg += std::to_string(size_);
    msg += " positions to ";
    msg += std::to_string(n);
    throw Error(ErrorKind::kUsage, "", "truncate", msg);
  }
  size_ = n;
}

}  // namespace qloom::engine
