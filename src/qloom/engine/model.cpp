// Model::load and the decoder layer loop (embedding -> layers -> final norm ->
// lm_head). One layer is decoder_layer.cpp (shared with layer_runner.cpp);
// the blocks live in attention.cpp, mlp.cpp, moe.cpp; tensor
// naming and loading in weight_loader.cpp; per-model_type options in
// architecture.cpp / model_config.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "qloom/core/error.h"
#include "qloom/model/architecture.h"
#include "qloom/engine/decoder_layer.h"
#include "qloom/engine/kv_cache.h"
#include "qloom/engine/norms.h"
#include "qloom/engine/weight_loader.h"
#include "qloom/io/config_sizes.h"
#include "qloom/io/model_dir.h"

namespace qloom::engine {
namespace {

class ModelImpl final : public Model {
 public:
  ModelImpl(model::ModelConfig config, const model::Architecture& arch, ModelWeights weights, const LoadOptions& options,
            const std::string& label)
      : config_(std::move(config)), w_(std::move(weights)), pool_(options.threads) {
    setup_ = DecoderSetup::make(config_, arch, label);
    setup_.kv_fp8_scales = options.kv_cache_fp8_scales;
  }

  const model::ModelConfig& config() const override { return config_; }
  ThreadPool& pool() override { return pool_; }
  size_t weight_bytes() const override { return w_.bytes(); }

  std::unique_ptr<KvCache> new_cache(int64_t max_tokens) const override {
    return std::make_unique<KvCacheImpl>(config_.num_layers, config_.num_kv_heads, config_.head_dim, max_tokens,
                                         setup_.kv_fp8_scales);
  }

  std::vector<float> forward(std::span<const int32_t> tokens, KvCache& cache_base, bool last_only,
                             const ForwardHooks* hooks) override;
  std::vector<float> forward_batch(std::span<const int32_t> tokens, std::span<KvCache* const> caches,
                                   const ForwardHooks* hooks) override;

 private:
  // Final norm, lm_head and softcapping of `rows` rows of the residual stream x
  // (h: scratch of rows * hidden floats).
  std::vector<float> head_logits(ForwardContext& ctx, const float* x, int64_t rows, float* h);

  model::ModelConfig config_;
  ModelWeights w_;
  ThreadPool pool_;
  DecoderSetup setup_;  // points into config_
};

std::vector<float> ModelImpl::forward(std::span<const int32_t> tokens, KvCache& cache_base,
                                      bool last_only, const ForwardHooks* hooks) {
  auto* cache = dynamic_cast<KvCacheImpl*>(&cache_base);
  if (!cache || !cache->matches(config_.num_layers, config_.num_kv_heads, config_.head_dim, setup_.kv_fp8_scales))
    throw Error(ErrorKind::kUsage, "", "cache", "the KV cache was not created by this model's new_cache()");
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t pos0 = cache->size();
  if (pos0 + T > cache->capacity()) {
    std::string msg = "KV cache overflow: ";
    msg += std::to_string(pos0);
    msg += " positions held + ";
    msg += std::to_string(T);
    msg += " new tokens exceed its capacity of ";
    msg += std::to_string(cache->capacity());
    throw_invalid("", "tokens", msg, "create the cache with a larger max_tokens");
  }
  check_token_ids(config_, tokens);
  if (T == 0) return {};
  cache->grow(pos0 + T);

  const int64_t D = config_.hidden_size;
  ForwardContext ctx{pool_, hooks};
  std::vector<float> x(static_cast<size_t>(T * D)), h(static_cast<size_t>(T * D)),
      y(static_cast<size_t>(T * D));
  embed_tokens(config_, w_.embed.w, tokens, x.data());

  for (int64_t li = 0; li < config_.num_layers; ++li) {
    cache->prepare_layer(li, pos0);
    run_decoder_layer(ctx, setup_, static_cast<int>(li), w_.layers[static_cast<size_t>(li)], x.data(), h.data(),
                      y.data(), T, pos0, cache->keys(li), cache->values(li));
    cache->commit_layer(li, pos0, T);
  }
  // Every layer has appended its K/V; the cache now holds pos0 + T positions.
  cache->set_size(pos0 + T);

  const int64_t rows = last_only ? 1 : T;
  return head_logits(ctx, x.data() + (T - rows) * D, rows, h.data());
}

std::vector<float> ModelImpl::head_logits(ForwardContext& ctx, const float* x, int64_t rows, float* h) {
  const int64_t D = config_.hidden_size;
  rms_norm(x, h, rows, D, w_.final_norm.data(), static_cast<float>(config_.rms_norm_eps), &pool_);
  const LinearWeight& head = w_.tied_head && !w_.lm_head.w.native ? w_.embed.w : w_.lm_head.w;
  std::vector<float> logits(static_cast<size_t>(rows * config_.vocab_size));
  ctx.run_linear(w_.lm_head.name, head, -1, h, rows, logits.data());
  if (config_.final_logit_softcapping > 0.0) {
    const float cap = static_cast<float>(config_.final_logit_softcapping);
    for (float& v : logits) v = cap * std::tanh(v / cap);
  }
  return logits;
}

// Every cache is this model's, distinct, with room for one more position.
std::vector<KvCacheImpl*> batch_caches(const model::ModelConfig& c, const DecoderSetup& setup,
                                       std::span<KvCache* const> caches) {
  std::vector<KvCacheImpl*> out;
  for (KvCache* base : caches) {
    auto* cache = dynamic_cast<KvCacheImpl*>(base);
    if (!cache || !cache->matches(c.num_layers, c.num_kv_heads, c.head_dim, setup.kv_fp8_scales))
      throw Error(ErrorKind::kUsage, "", "cache", "a KV cache was not created by this model's new_cache()");
    if (std::find(out.begin(), out.end(), cache) != out.end())
      throw Error(ErrorKind::kUsage, "", "cache", "forward_batch was given the same KV cache twice");
    if (cache->size() + 1 > cache->capacity())
      throw_invalid("", "tokens", "KV cache overflow: " + std::to_string(cache->size()) +
                                      " positions held + 1 new token exceed its capacity of " +
                                      std::to_string(cache->capacity()),
                    "create the cache with a larger max_tokens");
    out.push_back(cache);
  }
  return out;
}

std::vector<float> ModelImpl::forward_batch(std::span<const int32_t> tokens, std::span<KvCache* const> caches_base,
                                            const ForwardHooks* hooks) {
  if (tokens.size() != caches_base.size())
    throw Error(ErrorKind::kUsage, "", "forward_batch", "one token per cache is needed");
  const std::vector<KvCacheImpl*> caches = batch_caches(config_, setup_, caches_base);
  check_token_ids(config_, tokens);
  const auto B = static_cast<int64_t>(tokens.size());
  if (B == 0) return {};
  for (KvCacheImpl* c : caches) c->grow(c->size() + 1);
  const int64_t D = config_.hidden_size;
  ForwardContext ctx{pool_, hooks};
  std::vector<float> x(static_cast<size_t>(B * D)), h(x.size()), y(x.size());
  embed_tokens(config_, w_.embed.w, tokens, x.data());
  std::vector<RowSlot> rows(static_cast<size_t>(B));
  for (int64_t li = 0; li < config_.num_layers; ++li) {
    for (int64_t b = 0; b < B; ++b) {
      KvCacheImpl* c = caches[size_t(b)];
      c->prepare_layer(li, c->size());
      rows[size_t(b)] = {c->size(), c->keys(li), c->values(li)};
    }
    run_decoder_layer_rows(ctx, setup_, static_cast<int>(li), w_.layers[static_cast<size_t>(li)], x.data(), h.data(),
                           y.data(), B, rows.data());
    for (KvCacheImpl* c : caches) c->commit_layer(li, c->size(), 1);
  }
  for (KvCacheImpl* c : caches) c->set_size(c->size() + 1);
  return head_logits(ctx, x.data(), B, h.data());
}

}  // namespace

std::vector<float> Model::forward_batch(std::span<const int32_t> tokens, std::span<KvCache* const> caches,
                                        const ForwardHooks* hooks) {
  if (tokens.size() != caches.size())
    throw Error(ErrorKind::kUsage, "", "forward_batch", "one token per cache is needed");
  std::vector<float> out;
  for (size_t b = 0; b < tokens.size(); ++b) {
    const std::vector<float> row = forward(tokens.subspan(b, 1), *caches[b], true, hooks);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

std::unique_ptr<Model> Model::load(const std::filesystem::path& model_dir, const LoadOptions& options,
                                   const WeightSource* weights) {
  io::ModelDir dir = io::ModelDir::open(model_dir);
  const std::string label = (model_dir / "config.json").string();
  // Size fields against the tensors present (io/config_sizes.h) before
  // anything is sized by them.
  if (!dir.weight_files().empty()) io::check_config_sizes(dir.config(), dir.weights(), label);
  model::ModelConfig config = model::ModelConfig::parse(dir.config(), label);
  const model::Architecture* arch = model::find_architecture(config.model_type);
  if (!arch) throw Error(ErrorKind::kInternal, label, "model_type", "architecture table out of sync");
  parse_activation(config.hidden_act, label);  // fail before reading any weight
  if (!options.kv_cache_fp8_scales.empty() &&
      static_cast<int64_t>(options.kv_cache_fp8_scales.size()) != config.num_layers)
    throw Error(ErrorKind::kUsage, label, "kv_cache_fp8_scales",
                std::to_string(options.kv_cache_fp8_scales.size()) + " fp8 KV-cache scale pairs for " +
                    std::to_string(config.num_layers) + " decoder layers",
                "give one (k, v) pair per layer");
  std::unique_ptr<WeightSource> own;
  if (!weights) {
    own = plain_weight_source(dir);
    weights = own.get();
  }
  ModelWeights w = load_weights(*weights, config, *arch, options.weights, model_dir.string(), options.compute);
  return std::make_unique<ModelImpl>(std::move(config), *arch, std::move(w), options, label);
}

}  // namespace qloom::engine
