#include "qloom/engine/layer_runner.h"


#include "qloom/core/error.h"
#include "qloom/engine/norms.h"
#include "qloom/engine/weight_loader.h"
#include "qloom/io/config_sizes.h"
#include "qloom/io/model_dir.h"

namespace qloom::engine {
namespace {

class LayerRunnerImpl final : public LayerRunner {
 public:
  LayerRunnerImpl(std::unique_ptr<io::ModelDir> dir, model::ModelConfig config, const model::Architecture& arch,
                  const LoadOptions& options, const WeightSource* weights, std::string label)
      : dir_(std::move(dir)), config_(std::move(config)), arch_(arch), mode_(options.weights),
        label_(std::move(label)), pool_(options.threads) {
    if (!weights) own_ = plain_weight_source(*dir_);
    src_ = weights ? weights : own_.get();
    setup_ = DecoderSetup::make(config_, arch_, label_);
    embed_ = load_embedding(*src_, config_, mode_, label_);
    final_norm_ = load_final_norm(*src_, config_, arch_, label_);
  }

  const model::ModelConfig& config() const override { return config_; }
  ThreadPool& pool() override { return pool_; }

  std::vector<float> embed(std::span<const int32_t> tokens) const override {
    if (embed_released_)
      throw Error(ErrorKind::kUsage, label_, "embed", "the token embedding was released (release_embedding)",
                  "embed every input before releasing it");
    check_token_ids(config_, tokens);
    std::vector<float> x(tokens.size() * static_cast<size_t>(config_.hidden_size));
    embed_tokens(config_, embed_.w, tokens, x.data());
    return x;
  }

  void release_embedding() override {
    embed_ = NamedLinear{};
    embed_released_ = true;
  }

  void load_layer(int64_t i) override {
    if (i < 0 || i >= config_.num_layers)
      throw Error(ErrorKind::kUsage, label_, "layer",
                  "layer " + std::to_string(i) + " is outside [0, " + std::to_string(config_.num_layers) + ")");
    unload();
    layer_ = load_layer_weights(*src_, config_, arch_, mode_, label_, i);
    index_ = i;
  }
  int64_t loaded_layer() const override { return index_; }
  void unload() override {
    layer_ = LayerWeights{};
    index_ = -1;
  }
  size_t layer_bytes() const override { return index_ >= 0 ? layer_.bytes() : 0; }

  std::vector<LayerLinear> linears() override;
  LinearWeight& linear(const std::string& module) override {
    for (LayerLinear& l : linears())
      if (l.name == module) return *l.weight;
    throw Error(ErrorKind::kNotFound, label_, module, "the loaded layer has no linear " + module);
  }
  LayerWeights& layer_weights() override {
    require_layer();
    return layer_;
  }

  void forward_layer(float* h, int64_t T, const ForwardHooks* hooks, LayerPart part) override {
    require_layer();
    if (T <= 0) return;
    size_scratch(T);
    ForwardContext ctx{pool_, hooks};
    run_decoder_layer(ctx, setup_, static_cast<int>(index_), layer_, h, scratch_.data(), y_.data(), T, 0,
                      kc_.data(), vc_.data(), part);
  }

  void advance_layer(float* h, int64_t T, LayerStep& step, int to, const ForwardHooks* hooks) override {
    require_layer();
    if (T <= 0) return;
    size_scratch(T);
    ForwardContext ctx{pool_, hooks};
    advance_decoder_layer(ctx, setup_, static_cast<int>(index_), layer_, h, y_.data(), T, kc_.data(), vc_.data(),
                          step, to);
  }
  bool steppable() const override { return index_ >= 0 && !layer_.is_moe; }

  void final_norm(const float* h, int64_t T, float* out) override {
    rms_norm(h, out, T, config_.hidden_size, final_norm_.data(), static_cast<float>(config_.rms_norm_eps), &pool_);
  }

 private:
  void size_scratch(int64_t T) {
    const size_t n = static_cast<size_t>(T * config_.hidden_size);
    const size_t kv = static_cast<size_t>(T * config_.num_kv_heads * config_.head_dim);
    y_.resize(n);
    scratch_.resize(n);
    kc_.resize(kv);
    vc_.resize(kv);
  }
  void require_layer() const {
    if (index_ < 0) throw Error(ErrorKind::kUsage, label_, "layer", "no decoder layer is loaded (call load_layer)");
  }

  std::unique_ptr<io::ModelDir> dir_;  // the plain source reads it (stable address)
  model::ModelConfig config_;
  const model::Architecture& arch_;
  LoadOptions::Weights mode_;
  std::unique_ptr<WeightSource> own_;
  const WeightSource* src_ = nullptr;
  std::string label_;
  ThreadPool pool_;
  DecoderSetup setup_;
  NamedLinear embed_;
  bool embed_released_ = false;
  std::vector<float> final_norm_;
  LayerWeights layer_;
  int64_t index_ = -1;
  std::vector<float> y_, scratch_, kc_, vc_;
};

std::vector<LayerLinear> LayerRunnerImpl::linears() {
  require_layer();
  std::vector<LayerLinear> out;
  int group = 0;
  auto add = [&](NamedLinear& l, int stage, int g) {
    if (!l.name.empty() && l.w.out > 0) out.push_back({l.name, &l.w, stage, g});
  };
  AttentionWeights& a = layer_.attn;
  add(a.q, 0, group);
  add(a.k, 0, group);
  add(a.v, 0, group);
  add(a.qkv, 0, group);
  add(a.o, 1, ++group);
  auto add_mlp = [&](MlpWeights& m, int in_group) {
    add(m.gate, 2, in_group);
    add(m.up, 2, in_group);
    add(m.gate_up, 2, in_group);
    add(m.down, 3, ++group);
  };
  const int mlp_in = ++group;
  if (!layer_.is_moe) {
    add_mlp(layer_.mlp, mlp_in);
    return out;
  }
  MoeWeights& m = layer_.moe;
  add(m.router, 2, mlp_in);
  for (MlpWeights& e : m.experts) add_mlp(e, ++group);
  if (m.has_shared) {
    add_mlp(m.shared, mlp_in);
    add(m.shared_gate, 2, mlp_in);
  }
  return out;
}

}  // namespace

std::unique_ptr<LayerRunner> LayerRunner::open(const std::filesystem::path& model_dir, const LoadOptions& options,
                                               const WeightSource* weights) {
  const std::string label = (model_dir / "config.json").string();
  auto dir = std::make_unique<io::ModelDir>(io::ModelDir::open(model_dir));
  // Size fields against the tensors present (io/config_sizes.h) before
  // anything is sized by them.
  if (!dir->weight_files().empty()) io::check_config_sizes(dir->config(), dir->weights(), label);
  model::ModelConfig config = model::ModelConfig::parse(dir->config(), label);
  const model::Architecture* arch = model::find_architecture(config.model_type);
  if (!arch) throw Error(ErrorKind::kInternal, label, "model_type", "architecture table out of sync");
  parse_activation(config.hidden_act, label);  // fail before reading any weight
  return std::make_unique<LayerRunnerImpl>(std::move(dir), std::move(config), *arch, options, weights, label);
}

}  // namespace qloom::engine
