#include "qloom/engine/decoder_layer.h"

#include <cstring>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/attention.h"
#include "qloom/engine/mlp.h"
#include "qloom/engine/moe.h"
#include "qloom/engine/norms.h"

namespace qloom::engine {

DecoderSetup DecoderSetup::make(const ModelConfig& config, const Architecture& arch, const std::string& label) {
  DecoderSetup s;
  s.config = &config;
  s.arch = &arch;
  s.act = parse_activation(config.hidden_act, label);
  const int64_t rot = static_cast<int64_t>(static_cast<double>(config.head_dim) * config.partial_rotary_factor);
  s.rope_global = Rope(config.rope, rot);
  s.rope_local = Rope(config.rope_local, rot);
  return s;
}

void check_token_ids(const ModelConfig& c, std::span<const int32_t> tokens) {
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

void embed_tokens(const ModelConfig& c, const LinearWeight& e, std::span<const int32_t> tokens, float* x) {
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

void run_decoder_layer(ForwardContext& ctx, const DecoderSetup& s, int layer, const LayerWeights& L, float* x,
                       float* h, float* y, int64_t T, int64_t pos0, float* kc, float* vc, LayerPart part) {
  const ModelConfig& c = *s.config;
  const int64_t D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  AttentionShape shape;
  shape.heads = c.num_heads;
  shape.kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.scale = static_cast<float>(c.attn_scale);
  shape.softcap = static_cast<float>(c.attn_logit_softcapping);
  shape.norm_eps = eps;
  const bool sliding = c.layer_sliding[static_cast<size_t>(layer)] != 0;
  shape.window = sliding ? c.sliding_window : 0;
  const bool sandwich = s.arch->sandwich_norms;

  if (part != LayerPart::kFeedForward) {
    rms_norm(x, h, T, D, L.input_norm.data(), eps, &ctx.pool);
    attention_block(ctx, layer, shape, L.attn, sliding ? s.rope_local : s.rope_global, h, T, pos0, kc, vc, y);
    if (part == LayerPart::kAttention) return;
    if (sandwich) rms_norm(y, y, T, D, L.post_attention_norm.data(), eps, &ctx.pool);
    for (int64_t i = 0; i < T * D; ++i) x[i] += y[i];
    if (part == LayerPart::kFirstHalf) return;
  }

  const float* ff_norm = sandwich ? L.pre_ff_norm.data() : L.post_attention_norm.data();
  rms_norm(x, h, T, D, ff_norm, eps, &ctx.pool);
  if (L.is_moe) {
    const MoeShape moe_shape{c.num_experts_per_tok, c.norm_topk_prob};
    moe_block(ctx, layer, moe_shape, L.moe, s.act, h, T, y);
  } else {
    mlp_block(ctx, layer, L.mlp, s.act, h, T, y);
  }
  if (part == LayerPart::kFeedForward) return;
  if (sandwich) rms_norm(y, y, T, D, L.post_ff_norm.data(), eps, &ctx.pool);
  for (int64_t i = 0; i < T * D; ++i) x[i] += y[i];
}

}  // namespace qloom::engine
