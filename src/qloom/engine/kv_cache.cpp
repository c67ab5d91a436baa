#include "qloom/engine/kv_cache.h"

#include "qloom/core/error.h"

namespace qloom::engine {

KvCacheImpl::KvCacheImpl(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t capacity)
    : kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity) {
  if (capacity < 0) throw Error(ErrorKind::kUsage, "", "max_tokens", "a KV cache needs max_tokens >= 0");
  const size_t n = static_cast<size_t>(capacity * kv_heads * head_dim);
  k_.assign(static_cast<size_t>(layers), std::vector<float>(n));
  v_.assign(static_cast<size_t>(layers), std::vector<float>(n));
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
