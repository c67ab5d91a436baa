// LayerRunner: the engine one decoder layer at a time, for layer-by-layer
// calibration (quant/pipeline.h). Only the config, the token embedding, the
// final norm and the currently loaded layer are held, so memory is one layer
// whatever the depth. The layer code is the very code Model::forward runs
// (decoder_layer.h), so running layers 0..N-1 in turn on embed()'s output
// gives Model's hidden states bit for bit.
//
//   auto r = LayerRunner::open(dir);
//   std::vector<float> h = r->embed(tokens);            // [T, hidden]
//   for (int64_t i = 0; i < r->config().num_layers; ++i) {
//     r->load_layer(i);
//     r->linear("model.layers.0.mlp.down_proj") ...      // read / replace weights
//     r->forward_layer(h.data(), T, &hooks);             // h <- layer i (h)
//     r->unload();
//   }
//
// Every sequence is run on its own from position 0 (no KV cache is kept
// between calls). Works for every architecture Model supports; MoE experts
// are linears named "...experts.N.<proj>".
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qloom/engine/decoder_layer.h"
#include "qloom/engine/model.h"

namespace qloom::engine {

// One linear of the loaded layer.
struct LayerLinear {
  std::string name;       // module name, e.g. "model.layers.3.self_attn.q_proj"
  LinearWeight* weight;   // owned by the runner; valid until unload()
  // Order of dependence inside the layer: 0 attention inputs (q/k/v or
  // qkv), 1 o_proj, 2 MLP inputs (gate/up or gate_up, MoE router, experts'
  // gate/up, shared expert gate/up and its gate), 3 down projections. The
  // inputs of stage s depend only on the weights of stages < s.
  int stage = 0;
  // Linears with the same input_group receive identical inputs (same rows)
  // in every forward: q/k/v; gate/up; an expert's gate/up; ...
  int input_group = 0;
};

class LayerRunner {
 public:
  // Reads config.json, the token embedding and the final norm from `weights`
  // (default: the directory's safetensors; it must outlive the runner).
  // Errors as Model::load.
  static std::unique_ptr<LayerRunner> open(const std::filesystem::path& model_dir, const LoadOptions& options = {},
                                           const WeightSource* weights = nullptr);
  virtual ~LayerRunner() = default;

  virtual const model::ModelConfig& config() const = 0;
  virtual ThreadPool& pool() = 0;

  // The embedded tokens, [T, hidden] fp32. Throws kInvalidInput for ids
  // outside the vocabulary.
  virtual std::vector<float> embed(std::span<const int32_t> tokens) const = 0;
  // Frees the token embedding once every input is embedded (calibration
  // embeds its samples first): embed() then throws kUsage.
  virtual void release_embedding() = 0;

  // Loads decoder layer i (replacing a loaded one); each source tensor is
  // released once copied. Throws kUsage for i out of range, else as Model::load.
  virtual void load_layer(int64_t i) = 0;
  virtual int64_t loaded_layer() const = 0;  // -1 when none
  virtual void unload() = 0;
  // Bytes of the loaded layer's weights.
  virtual size_t layer_bytes() const = 0;

  // The loaded layer's linears in forward order (kUsage when none is loaded).
  virtual std::vector<LayerLinear> linears() = 0;
  // One of them by module name (kNotFound naming it when absent). Replacing
  // its contents (e.g. by a dequantized F32 weight of the same shape) changes
  // what forward_layer computes.
  virtual LinearWeight& linear(const std::string& module) = 0;
  // The loaded layer's weights (norms included), e.g. for folding scales.
  virtual LayerWeights& layer_weights() = 0;

  // Runs the loaded layer on one sequence h [T, hidden] at positions
  // 0..T-1; kFull replaces h by the layer's output, kAttention runs only
  // the attention half (for its hooks) and leaves h unchanged, kFirstHalf
  // replaces h by the residual stream after the attention half, and
  // kFeedForward runs only the feed-forward half on such a stream (for its
  // hooks), leaving h unchanged (decoder_layer.h).
  virtual void forward_layer(float* h, int64_t T, const ForwardHooks* hooks = nullptr,
                             LayerPart part = LayerPart::kFull) = 0;
  // Runs the loaded layer on one sequence h [T, hidden] (positions 0..T-1)
  // stage by stage: advances `step` to stage `to` (decoder_layer.h,
  // advance_decoder_layer), updating h with what the stages that ran add to
  // the residual stream. A step belongs to one sequence and one loaded layer.
  // Throws kUnsupported for an MoE layer (see steppable()).
  virtual void advance_layer(float* h, int64_t T, LayerStep& step, int to, const ForwardHooks* hooks = nullptr) = 0;
  // True when the loaded layer can be advanced stage by stage (a dense layer).
  virtual bool steppable() const = 0;
  // The final RMSNorm (lm_head's input) of h [T, hidden] into out.
  virtual void final_norm(const float* h, int64_t T, float* out) = 0;
};

}  // namespace qloom::engine
