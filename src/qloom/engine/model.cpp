// Model::load and the decoder layer loop (embedding -> layers -> final norm ->
// lm_head). The blocks live in attention.cpp, mlp.cpp, moe.cpp; tensor
// naming and loading in weight_loader.cpp; per-model_type options in
// architecture.cpp / model_config.cpp.
#include <cmath>
#include <cstring>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/activations.h"
#include "qloom/engine/architecture.h"
#include "qloom/engine/attention.h"
#include "qloom/engine/kv_cache.h"
#include "qloom/engine/mlp.h"
#include "qloom/engine/moe.h"
#include "qloom/engine/norms.h"
#include "qloom/engine/rope.h"
#include "qloom/engine/weight_loader.h"
#include "qloom/io/model_dir.h"

namespace qloom::engine {
namespace {

class ModelImpl final : public Model {
 public:
  ModelImpl(ModelConfig config, const Architecture& arch, ModelWeights weights, unsigned threads,
            const std::string& label)
      : config_(std::move(config)), arch_(arch), w_(std::move(weights)), pool_(threads) {
    act_ = parse_activation(config_.hidden_act, label);
    const int64_t rot = static_cast<int64_t>(static_cast<double>(config_.head_dim) * config_.partial_rotary_factor);
    rope_global_ = Rope(config_.rope, rot);
    rope_local_ = Rope(config_.rope_local, rot);
  }

  const ModelConfig& config() const override { return config_; }
  ThreadPool& pool() override { return pool_; }
  size_t weight_bytes() const override { return w_.bytes(); }

  std::unique_ptr<KvCache> new_cache(int64_t max_tokens) const override {
    return std::make_unique<KvCacheImpl>(config_.num_layers, config_.num_kv_heads, config_.head_dim, max_tokens);
  }

  std::vector<float> forward(std::span<const int32_t> tokens, KvCache& cache_base, bool last_only,
                             const ForwardHooks* hooks) override;

 private:
  void embed(std::span<const int32_t> tokens, float* x);

  ModelConfig config_;
  const Architecture& arch_;
  ModelWeights w_;
  ThreadPool pool_;
  Activation act_ = Activation::kSilu;
  Rope rope_global_, rope_local_;
};

void ModelImpl::embed(std::span<const int32_t> tokens, float* x) {
  const int64_t D = config_.hidden_size;
  const LinearWeight& e = w_.embed.w;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t id = tokens[t];
    float* row = x + static_cast<int64_t>(t) * D;
    if (e.type == WeightType::kBF16) bf16_to_f32(e.bf16.data() + id * D, row, static_cast<size_t>(D));
    else std::memcpy(row, e.f32.data() + id * D, sizeof(float) * D);
    if (config_.embed_scale != 1.0f) {
      for (int64_t i = 0; i < D; ++i) row[i] *= config_.embed_scale;
    }
  }
}

std::vector<float> ModelImpl::forward(std::span<const int32_t> tokens, KvCache& cache_base,
                                      bool last_only, const ForwardHooks* hooks) {
  auto* cache = dynamic_cast<KvCacheImpl*>(&cache_base);
  if (!cache || !cache->matches(config_.num_layers, config_.num_kv_heads, config_.head_dim))
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
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[static_cast<size_t>(t)] < 0 || tokens[static_cast<size_t>(t)] >= config_.vocab_size) {
      std::string msg = "token id ";
      msg += std::to_string(tokens[static_cast<size_t>(t)]);
      msg += " at index ";
      msg += std::to_string(t);
      msg += " is outside the vocabulary [0, ";
      msg += std::to_string(config_.vocab_size);
      msg += ")";
      throw_invalid("", "tokens", msg);
    }
  }
  if (T == 0) return {};

  const int64_t D = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  ForwardContext ctx{pool_, hooks};
  std::vector<float> x(static_cast<size_t>(T * D)), h(static_cast<size_t>(T * D)),
      y(static_cast<size_t>(T * D));
  embed(tokens, x.data());

  AttentionShape shape;
  shape.heads = config_.num_heads;
  shape.kv_heads = config_.num_kv_heads;
  shape.head_dim = config_.head_dim;
  shape.scale = static_cast<float>(config_.attn_scale);
  shape.softcap = static_cast<float>(config_.attn_logit_softcapping);
  shape.norm_eps = eps;
  const MoeShape moe_shape{config_.num_experts_per_tok, config_.norm_topk_prob};

  for (int64_t li = 0; li < config_.num_layers; ++li) {
    const LayerWeights& L = w_.layers[static_cast<size_t>(li)];
    const int layer = static_cast<int>(li);
    const bool sliding = config_.layer_sliding[static_cast<size_t>(li)] != 0;
    shape.window = sliding ? config_.sliding_window : 0;

    rms_norm(x.data(), h.data(), T, D, L.input_norm.data(), eps, &pool_);
    attention_block(ctx, layer, shape, L.attn, sliding ? rope_local_ : rope_global_, h.data(), T, pos0,
                    *cache, y.data());
    if (arch_.sandwich_norms) rms_norm(y.data(), y.data(), T, D, L.post_attention_norm.data(), eps, &pool_);
    for (int64_t i = 0; i < T * D; ++i) x[static_cast<size_t>(i)] += y[static_cast<size_t>(i)];

    const float* ff_norm = arch_.sandwich_norms ? L.pre_ff_norm.data() : L.post_attention_norm.data();
    rms_norm(x.data(), h.data(), T, D, ff_norm, eps, &pool_);
    if (L.is_moe) moe_block(ctx, layer, moe_shape, L.moe, act_, h.data(), T, y.data());
    else mlp_block(ctx, layer, L.mlp, act_, h.data(), T, y.data());
    if (arch_.sandwich_norms) rms_norm(y.data(), y.data(), T, D, L.post_ff_norm.data(), eps, &pool_);
    for (int64_t i = 0; i < T * D; ++i) x[static_cast<size_t>(i)] += y[static_cast<size_t>(i)];
  }
  // Every layer has appended its K/V; the cache now holds pos0 + T positions.
  cache->set_size(pos0 + T);

  const int64_t rows = last_only ? 1 : T;
  const float* last = x.data() + (T - rows) * D;
  rms_norm(last, h.data(), rows, D, w_.final_norm.data(), eps, &pool_);
  const LinearWeight& head = config_.tie_word_embeddings ? w_.embed.w : w_.lm_head.w;
  std::vector<float> logits(static_cast<size_t>(rows * config_.vocab_size));
  ctx.run_linear(w_.lm_head.name, head, -1, h.data(), rows, logits.data());
  if (config_.final_logit_softcapping > 0.0) {
    const float cap = static_cast<float>(config_.final_logit_softcapping);
    for (float& v : logits) v = cap * std::tanh(v / cap);
  }
  return logits;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::filesystem::path& model_dir, const LoadOptions& options,
                                   const WeightSource* weights) {
  io::ModelDir dir = io::ModelDir::open(model_dir);
  const std::string label = (model_dir / "config.json").string();
  ModelConfig config = ModelConfig::parse(dir.config(), label);
  const Architecture* arch = find_architecture(config.model_type);
  if (!arch) throw Error(ErrorKind::kInternal, label, "model_type", "architecture table out of sync");
  parse_activation(config.hidden_act, label);  // fail before reading any weight
  std::unique_ptr<WeightSource> own;
  if (!weights) {
    own = plain_weight_source(dir);
    weights = own.get();
  }
  ModelWeights w = load_weights(*weights, config, *arch, options.weights, model_dir.string());
  return std::make_unique<ModelImpl>(std::move(config), *arch, std::move(w), options.threads, label);
}

}  // namespace qloom::engine
