// The pieces of the forward pass shared by Model (model.cpp: all layers, KV
// cache) and LayerRunner (layer_runner.cpp: one layer at a time, for
// layer-by-layer calibration): per-model constants, the embedding lookup and
// one decoder layer on the residual stream. Both paths run this very code, so
// a layer computes bit for bit the same in either.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qloom/engine/activations.h"
#include "qloom/engine/attention.h"
#include "qloom/model/architecture.h"
#include "qloom/engine/forward_context.h"
#include "qloom/engine/layer_weights.h"
#include "qloom/model/model_config.h"
#include "qloom/engine/rope.h"

namespace qloom::engine {

// What every layer of one model shares. `config` and `arch` must outlive it.
struct DecoderSetup {
  const model::ModelConfig* config = nullptr;
  const model::Architecture* arch = nullptr;
  Activation act = Activation::kSilu;
  Rope rope_global, rope_local;
  // Per layer (k, v) scales of an fp8 KV cache (LoadOptions::kv_cache_fp8_scales), or empty.
  std::vector<std::pair<float, float>> kv_fp8_scales;

  // Throws kUnsupported (from parse_activation) for an unknown activation;
  // `label` names config.json in errors.
  static DecoderSetup make(const model::ModelConfig& config, const model::Architecture& arch, const std::string& label);
};

// Throws kInvalidInput naming the first token id outside [0, vocab_size).
void check_token_ids(const model::ModelConfig& c, std::span<const int32_t> tokens);

// x[t, :] = embedding row of tokens[t] (widened to fp32, times embed_scale).
// Ids must be valid (check_token_ids).
void embed_tokens(const model::ModelConfig& c, const LinearWeight& embed, std::span<const int32_t> tokens, float* x);

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

// The whole layer for B decode rows of B different sequences (attention
// _block_rows): row b gets exactly what run_decoder_layer computes for that
// sequence's one token at rows[b].pos.
void run_decoder_layer_rows(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                            float* h, float* y, int64_t B, const RowSlot* rows);

// A dense (not MoE) decoder layer run one linear stage at a time
// (LayerLinear::stage: 0 q/k/v, 1 o_proj, 2 gate/up, 3 down), for
// true-sequential calibration: a stage's linears can be changed (quantized)
// after their input is seen and before they run, and nothing upstream runs
// twice. After advancing to stage s (0..3), `in` holds the input every
// stage-s linear reads ([T, its in_features]: the attention input, the
// attention context, the feed-forward input, the gated activation); the
// linears of stages < s have run, with the hooks, once each; the residual
// stream x holds what those stages added. Advancing to kLayerDone runs the
// rest: x is then the layer's output, bit for bit what kFull computes from
// the same weights.
inline constexpr int kLayerDone = 4;
struct LayerStep {
  int reached = -1;  // the stage whose input is in `in`; -1 before the first
  std::vector<float> in;
};

// Advances `st` on the residual stream x [T, hidden] (positions 0..T-1) to
// stage `to` (> st.reached, <= kLayerDone); h, y: scratch of T*hidden floats;
// kc / vc: T*kv_heads*head_dim floats. Throws kUnsupported for an MoE layer
// and kUsage for a `to` that does not lie ahead.
void advance_decoder_layer(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                           float* y, int64_t T, float* kc, float* vc, LayerStep& st, int to);

}  // namespace qloom::engine
