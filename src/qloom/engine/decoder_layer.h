// The pieces of the forward pass shared by Model (model.cpp: all layers, KV
// cache) and LayerRunner (layer_runner.cpp: one layer at a time, for
// layer-by-layer calibration): per-model constants, the embedding lookup and
// one decoder layer on the residual stream. Both paths run this very code, so
// a layer computes bit for bit the same in either.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "qloom/engine/activations.h"
#include "qloom/engine/architecture.h"
#include "qloom/engine/forward_context.h"
#include "qloom/engine/layer_weights.h"
#include "qloom/engine/model_config.h"
#include "qloom/engine/rope.h"

namespace qloom::engine {

// What every layer of one model shares. `config` and `arch` must outlive it.
struct DecoderSetup {
  const ModelConfig* config = nullptr;
  const Architecture* arch = nullptr;
  Activation act = Activation::kSilu;
  Rope rope_global, rope_local;

  // Throws kUnsupported (from parse_activation) for an unknown activation;
  // `label` names config.json in errors.
  static DecoderSetup make(const ModelConfig& config, const Architecture& arch, const std::string& label);
};

// Throws kInvalidInput naming the first token id outside [0, vocab_size).
void check_token_ids(const ModelConfig& c, std::span<const int32_t> tokens);

// x[t, :] = embedding row of tokens[t] (widened to fp32, times embed_scale).
// Ids must be valid (check_token_ids).
void embed_tokens(const ModelConfig& c, const LinearWeight& embed, std::span<const int32_t> tokens, float* x);

// Which part of a decoder layer to run.
// kFirstHalf followed by kFeedForward on its result computes, bit for bit,
// what kFull computes (the same code in the same order), with the same hooks.
enum class LayerPart {
  kFull,       // the whole layer: x is updated in place
  kAttention,  // input norm + attention block only (q/k/v/o run, hooks see them);
               // x is left unchanged — for observing attention linears cheaply
  kFirstHalf,  // input norm + attention block + residual add: x is updated in
               // place to the residual stream the feed-forward half reads
  kFeedForward,  // x holds kFirstHalf's result: the feed-forward norm and block
                 // run (MLP or MoE linears, hooks see them); x is left unchanged
};

// One decoder layer on the residual stream x [T, hidden] (updated in place
// for kFull); h, y: scratch of T*hidden floats. Positions [pos0, pos0 + T);
// K/V go to kc / vc (this layer's buffers, see attention_block), which hold
// the earlier positions [0, pos0).
void run_decoder_layer(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                       float* h, float* y, int64_t T, int64_t pos0, float* kc, float* vc,
                       LayerPart part = LayerPart::kFull);

}  // namespace qloom::engine
