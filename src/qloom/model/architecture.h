// Architecture: what differs between the supported model_types at the level
// of the forward pass — norm style, extra norms, fused projections, MoE
// block layout, checkpoint tensor names. ModelConfig::parse uses it for
// per-model_type defaults; model.cpp uses it to find and name tensors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qloom::model {

enum class MoeKind { kNone, kMixtral, kQwen2Moe, kQwen3Moe };
// How a layer chooses sliding-window attention when config.json has no
// usable "layer_types" list.
enum class SlidingRule {
  kNone,            // never (llama, gemma)
  kAllLayers,       // every layer when sliding_window is set (mistral, mixtral, phi3)
  kAllIfEnabled,    // every layer when use_sliding_window (qwen3_moe)
  kFromMaxWindow,   // layers >= max_window_layers when use_sliding_window (qwen2, qwen3, qwen2_moe)
  kEveryOther,      // (i+1) % 2 != 0 (gemma2)
  kPattern,         // (i+1) % sliding_window_pattern != 0 (gemma3_text)
};

struct Architecture {
  std::string_view model_type;
  bool gemma_norm = false;       // RMSNorm scales by (1 + w)
  bool embed_scale = false;      // embeddings * sqrt(hidden) (gemma family)
  bool qk_norm = false;          // per-head RMSNorm on q and k before RoPE
  bool sandwich_norms = false;   // post-attn / pre-ff / post-ff norms (gemma2/3)
  bool fused_qkv = false;        // self_attn.qkv_proj (phi3)
  bool fused_gate_up = false;    // mlp.gate_up_proj (phi3)
  bool honors_layer_types = false;  // reads config "layer_types" when present
  bool local_rope = false;       // sliding layers use rope_local_base_freq, default RoPE
  bool query_pre_attn_scalar = false;  // attention scale = query_pre_attn_scalar^-0.5
  bool softcapping = false;      // attn / final logit softcapping fields exist
  MoeKind moe = MoeKind::kNone;
  SlidingRule sliding = SlidingRule::kNone;
  // transformers' config-class defaults for fields config.json may omit.
  double default_rope_theta = 10000.0;
  double default_rms_norm_eps = 1e-6;
  bool default_tie_embeddings = false;
  const char* default_act = "silu";
  const char* act_key = "hidden_act";  // gemma2/3 read "hidden_activation"
  int64_t default_head_dim = 0;        // 0: hidden_size / num_attention_heads
  bool default_qkv_bias = false;       // qwen2 family: q/k/v carry biases
};

// nullptr when the model_type is not supported.
const Architecture* find_architecture(std::string_view model_type);
// "llama, mistral, ..." for error messages.
std::string supported_model_types();

}  // namespace qloom::model
