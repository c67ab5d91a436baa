// FakeModel: an engine::Model whose logits are a fixed function of the input
// token and position, for testing the evaluation loops without the engine.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "qloom/core/thread_pool.h"
#include "qloom/engine/model.h"

namespace qloom::test {

class FakeCache : public engine::KvCache {
 public:
  explicit FakeCache(int64_t cap) : cap_(cap) {}
  int64_t size() const override { return n_; }
  int64_t capacity() const override { return cap_; }
  void clear() override { n_ = 0; }
  void truncate(int64_t n) override { n_ = n; }
  size_t bytes_per_token() const override { return 0; }
  int64_t n_ = 0, cap_;
};

class FakeModel : public engine::Model {
 public:
  // logits_fn(token, position, out_row[vocab])
  using Fn = std::function<void(int32_t, int64_t, float*)>;
  FakeModel(int64_t vocab, Fn fn, int64_t max_pos = 512) : fn_(std::move(fn)), pool_(1) {
    cfg_.vocab_size = vocab;
    cfg_.max_position_embeddings = max_pos;
  }
  const model::ModelConfig& config() const override { return cfg_; }
  ThreadPool& pool() override { return pool_; }
  std::unique_ptr<engine::KvCache> new_cache(int64_t max_tokens) const override {
    return std::make_unique<FakeCache>(max_tokens);
  }
  std::vector<float> forward(std::span<const int32_t> tokens, engine::KvCache& cache,
                             bool last_only, const engine::ForwardHooks*) override {
    auto& c = static_cast<FakeCache&>(cache);
    const int64_t v = cfg_.vocab_size;
    std::vector<float> out(tokens.size() * size_t(v));
    for (size_t i = 0; i < tokens.size(); ++i) fn_(tokens[i], c.n_ + int64_t(i), &out[i * size_t(v)]);
    c.n_ += int64_t(tokens.size());
    ++forward_calls;
    if (last_only) out.erase(out.begin(), out.end() - v);
    return out;
  }
  size_t weight_bytes() const override { return 0; }
  int forward_calls = 0;

 private:
  model::ModelConfig cfg_;
  Fn fn_;
  ThreadPool pool_;
};

}  // namespace qloom::test
