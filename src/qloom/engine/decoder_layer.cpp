#include "qloom/engine/decoder_layer.h"

#include <tuple>
#include <cstring>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/attention.h"
#include "qloom/engine/mlp.h"
#include "qloom/engine/moe.h"
#include "qloom/engine/norms.h"

namespace qloom::engine {

DecoderSetup DecoderSetup::make(const model::ModelConfig& config, const model::Architecture& arch, const std::string& label) {
  DecoderSetup s;
  s.config = &config;
  s.arch = &arch;
  s.act = parse_activation(config.hidden_act, label);
  const int64_t rot = static_cast<int64_t>(static_cast<double>(config.head_dim) * config.partial_rotary_factor);
  s.rope_global = Rope(config.rope, rot);
  s.rope_local = Rope(config.rope_local, rot);
  return s;
}

void check_token_ids(const model::ModelConfig& c, std::span<const int32_t> tokens) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size) {
      std::string msg = "token id ";
      msg += std::to_string(tokens[t]);
      msg += " at index ";
      msg += std::to_string(t);
      msg += " is outside the vocabulary [0, ";
      msg += std::to_string(c.vocab_size);
      msg += ")";
      throw_invalid("", "tokens", msg);
    }
  }
}

void embed_tokens(const model::ModelConfig& c, const LinearWeight& e, std::span<const int32_t> tokens, float* x) {
  const int64_t D = c.hidden_size;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t id = tokens[t];
    float* row = x + static_cast<int64_t>(t) * D;
    if (e.type == WeightType::kBF16) bf16_to_f32(e.bf16.data() + id * D, row, static_cast<size_t>(D));
    else std::memcpy(row, e.f32.data() + id * D, sizeof(float) * D);
    if (c.embed_scale != 1.0f) {
      for (int64_t i = 0; i < D; ++i) row[i] *= c.embed_scale;
    }
  }
}

namespace {

AttentionShape attention_shape(const model::ModelConfig& c, int layer) {
  AttentionShape shape;
  shape.heads = c.num_heads;
  shape.kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.scale = static_cast<float>(c.attn_scale);
  shape.softcap = static_cast<float>(c.attn_logit_softcapping);
  shape.norm_eps = static_cast<float>(c.rms_norm_eps);
  const bool sliding = c.layer_sliding[static_cast<size_t>(layer)] != 0;
  shape.window = sliding ? c.sliding_window : 0;
  return shape;
}

// attention_shape plus the layer's fp8 KV-cache scales, when the cache is fp8.
AttentionShape layer_attention_shape(const DecoderSetup& s, int layer) {
  AttentionShape shape = attention_shape(*s.config, layer);
  if (!s.kv_fp8_scales.empty()) std::tie(shape.kv_k_scale, shape.kv_v_scale) = s.kv_fp8_scales[static_cast<size_t>(layer)];
  return shape;
}

const Rope& layer_rope(const DecoderSetup& s, int layer) {
  return s.config->layer_sliding[static_cast<size_t>(layer)] != 0 ? s.rope_local : s.rope_global;
}

// x += y, after the sub-block's own output norm where the architecture has
// one (gemma2/3 sandwich norms). y is overwritten.
void add_residual(ForwardContext& ctx, const DecoderSetup& s, const std::vector<float>& out_norm, float* x, float* y,
                  int64_t T) {
  const int64_t D = s.config->hidden_size;
  if (s.arch->sandwich_norms) rms_norm(y, y, T, D, out_norm.data(), static_cast<float>(s.config->rms_norm_eps), &ctx.pool);
  for (int64_t i = 0; i < T * D; ++i) x[i] += y[i];
}

const std::vector<float>& ff_input_norm(const DecoderSetup& s, const LayerWeights& L) {
  return s.arch->sandwich_norms ? L.pre_ff_norm : L.post_attention_norm;
}

}  // namespace

namespace {

// The layer around its attention sub-block: attend(h, y) writes the block's
// output for the normed rows h into y.
template <class Attend>
void run_layer(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x, float* h,
               float* y, int64_t T, LayerPart part, const Attend& attend) {
  const model::ModelConfig& c = *s.config;
  const int64_t D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  if (part != LayerPart::kFeedForward) {
    rms_norm(x, h, T, D, L.input_norm.data(), eps, &ctx.pool);
    attend(h, y);
    if (part == LayerPart::kAttention) return;
    add_residual(ctx, s, L.post_attention_norm, x, y, T);
    if (part == LayerPart::kFirstHalf) return;
  }

  rms_norm(x, h, T, D, ff_input_norm(s, L).data(), eps, &ctx.pool);
  if (L.is_moe) {
    const MoeShape moe_shape{c.num_experts_per_tok, c.norm_topk_prob};
    moe_block(ctx, layer, moe_shape, L.moe, s.act, h, T, y);
  } else {
    mlp_block(ctx, layer, L.mlp, s.act, h, T, y);
  }
  if (part == LayerPart::kFeedForward) return;
  add_residual(ctx, s, L.post_ff_norm, x, y, T);
}

}  // namespace

void run_decoder_layer(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                       float* h, float* y, int64_t T, int64_t pos0, float* kc, float* vc, LayerPart part) {
  run_layer(ctx, s, layer, L, x, h, y, T, part, [&](const float* hn, float* out) {
    attention_block(ctx, layer, layer_attention_shape(s, layer), L.attn, layer_rope(s, layer), hn, T, pos0, kc, vc,
                    out);
  });
}

void run_decoder_layer_rows(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                            float* h, float* y, int64_t B, const RowSlot* rows) {
  run_layer(ctx, s, layer, L, x, h, y, B, LayerPart::kFull, [&](const float* hn, float* out) {
    attention_block_rows(ctx, layer, layer_attention_shape(s, layer), L.attn, layer_rope(s, layer), hn, B, rows,
                         out);
  });
}

void advance_decoder_layer(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                           float* y, int64_t T, float* kc, float* vc, LayerStep& st, int to) {
  if (L.is_moe)
    throw Error(ErrorKind::kUnsupported, "", "layer " + std::to_string(layer),
                "an MoE layer cannot be run stage by stage (its experts' inputs are routed)",
                "run it with LayerPart::kFull / kFirstHalf / kFeedForward");
  if (to <= st.reached || to > kLayerDone)
    throw Error(ErrorKind::kUsage, "", "layer " + std::to_string(layer),
                "cannot advance a layer from stage " + std::to_string(st.reached) + " to " + std::to_string(to));
  const model::ModelConfig& c = *s.config;
  const int64_t D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<float> next;
  for (int k = st.reached + 1; k <= to; ++k) {
    switch (k) {
      case 0:  // the attention input
        next.resize(static_cast<size_t>(T * D));
        rms_norm(x, next.data(), T, D, L.input_norm.data(), eps, &ctx.pool);
        break;
      case 1:  // q/k/v run: the attention context, o_proj's input
        next.resize(static_cast<size_t>(T * c.num_heads * c.head_dim));
        attention_context(ctx, layer, attention_shape(c, layer), L.attn, layer_rope(s, layer), st.in.data(), T, 0,
                          kc, vc, next.data());
        break;
      case 2:  // o_proj runs: the feed-forward input
        ctx.run_linear(L.attn.o, layer, st.in.data(), T, y);
        add_residual(ctx, s, L.post_attention_norm, x, y, T);
        next.resize(static_cast<size_t>(T * D));
        rms_norm(x, next.data(), T, D, ff_input_norm(s, L).data(), eps, &ctx.pool);
        break;
      case 3:  // gate/up run: down_proj's input
        next.resize(static_cast<size_t>(T * L.mlp.down.w.in));
        mlp_inner(ctx, layer, L.mlp, s.act, st.in.data(), T, next.data());
        break;
      default:  // down_proj runs: the layer's output
        ctx.run_linear(L.mlp.down, layer, st.in.data(), T, y);
        add_residual(ctx, s, L.post_ff_norm, x, y, T);
        next.clear();
        next.shrink_to_fit();
    }
    st.in.swap(next);
    st.reached = k;
  }
}

}  // namespace qloom::engine
