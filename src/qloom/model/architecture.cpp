#include "qloom/model/architecture.h"

#include <array>

namespace qloom::model {
namespace {

Architecture make_architecture(std::string_view type) {
  Architecture a;
  a.model_type = type;
  return a;
}

const std::array<Architecture, 11>& table() {
  static const std::array<Architecture, 11> archs = [] {
    std::array<Architecture, 11> t;
    Architecture llama = make_architecture("llama");
    Architecture mistral = make_architecture("mistral");
    mistral.sliding = SlidingRule::kAllLayers;
    Architecture qwen2 = make_architecture("qwen2");
    qwen2.sliding = SlidingRule::kFromMaxWindow;
    qwen2.honors_layer_types = true;
    qwen2.default_qkv_bias = true;
    Architecture qwen3 = make_architecture("qwen3");
    qwen3.sliding = SlidingRule::kFromMaxWindow;
    qwen3.honors_layer_types = true;
    qwen3.qk_norm = true;
    qwen3.default_head_dim = 128;
    Architecture gemma = make_architecture("gemma");
    gemma.gemma_norm = gemma.embed_scale = true;
    gemma.default_tie_embeddings = true;
    gemma.default_act = "gelu_pytorch_tanh";
    gemma.default_head_dim = 256;
    Architecture gemma2 = gemma;
    gemma2.model_type = "gemma2";
    gemma2.sandwich_norms = gemma2.query_pre_attn_scalar = gemma2.softcapping = true;
    gemma2.honors_layer_types = true;
    gemma2.sliding = SlidingRule::kEveryOther;
    gemma2.act_key = "hidden_activation";
    Architecture gemma3 = gemma2;
    gemma3.model_type = "gemma3_text";
    gemma3.qk_norm = gemma3.local_rope = true;
    gemma3.sliding = SlidingRule::kPattern;
    gemma3.default_rope_theta = 1e6;
    Architecture phi3 = make_architecture("phi3");
    phi3.fused_qkv = phi3.fused_gate_up = true;
    phi3.sliding = SlidingRule::kAllLayers;
    phi3.default_rms_norm_eps = 1e-5;
    Architecture mixtral = make_architecture("mixtral");
    mixtral.moe = MoeKind::kMixtral;
    mixtral.sliding = SlidingRule::kAllLayers;
    mixtral.default_rope_theta = 1e6;
    mixtral.default_rms_norm_eps = 1e-5;
    Architecture qwen2_moe = qwen2;
    qwen2_moe.model_type = "qwen2_moe";
    qwen2_moe.moe = MoeKind::kQwen2Moe;
    qwen2_moe.honors_layer_types = true;  // transformers 5 writes layer_types; 4.x configs lack it
    Architecture qwen3_moe = make_architecture("qwen3_moe");
    qwen3_moe.moe = MoeKind::kQwen3Moe;
    qwen3_moe.qk_norm = true;
    qwen3_moe.sliding = SlidingRule::kAllIfEnabled;
    t = {llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3, mixtral, qwen2_moe, qwen3_moe};
    return t;
  }();
  return archs;
}

}  // namespace

const Architecture* find_architecture(std::string_view model_type) {
  for (const Architecture& a : table()) {
    if (a.model_type == model_type) return &a;
  }
  return nullptr;
}

std::string supported_model_types() {
  std::string s;
  for (const Architecture& a : table()) {
    if (!s.empty()) s += ", ";
    s += a.model_type;
  }
  return s;
}

}  // namespace qloom::model
