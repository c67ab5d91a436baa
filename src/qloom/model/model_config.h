// ModelConfig: the fields of a HF config.json the engine needs, parsed
// strictly per model_type (defaults as transformers' config classes define
// them). Throws qloom::Error kUnsupported naming the model_type or the
// feature (e.g. an unknown rope_scaling type), kInvalidInput naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::model {

struct ModelConfig {
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;

  // ---- attention / RoPE ----
  struct Rope {
    // "default", "linear" (positions / factor) or "llama3" (frequency bands).
    std::string type = "default";
    double theta = 10000.0;
    double factor = 1.0;
    double low_freq_factor = 1.0;   // llama3
    double high_freq_factor = 4.0;  // llama3
    int64_t original_max_position_embeddings = 8192;  // llama3
  };
  Rope rope;        // full-attention layers (and every layer without local_rope)
  Rope rope_local;  // sliding layers (gemma3_text: rope_local_base_freq, default type)
  double partial_rotary_factor = 1.0;  // rotary dims = head_dim * factor (phi3)
  bool qkv_bias = false;     // q/k/v projections carry a bias
  bool o_bias = false;       // o_proj carries a bias
  bool mlp_bias = false;     // gate/up/down carry a bias (llama mlp_bias)
  int64_t sliding_window = 0;        // 0: none; a query at p sees keys in (p - window, p]
  std::vector<uint8_t> layer_sliding;  // per layer: 1 = sliding-window attention
  double attn_scale = 0.0;   // multiplies q·k (head_dim^-0.5 or query_pre_attn_scalar^-0.5)
  double attn_logit_softcapping = 0.0;   // 0: off; scores = cap * tanh(scores / cap)
  double final_logit_softcapping = 0.0;  // 0: off
  std::string hidden_act = "silu";
  // gemma family: embeddings * sqrt(hidden_size), the factor rounded to the
  // checkpoint dtype (torch_dtype bf16/f16) as HF does; 1 elsewhere.
  float embed_scale = 1.0f;

  // ---- MoE (mixtral, qwen2_moe, qwen3_moe) ----
  int64_t num_experts = 0;           // 0: dense model
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // qwen2_moe; 0: no shared expert
  bool norm_topk_prob = true;        // renormalize the top-k router weights
  std::vector<uint8_t> layer_moe;    // per layer: 1 = sparse MoE block, 0 = dense MLP

  nlohmann::json raw;  // the whole config.json

  static ModelConfig parse(const nlohmann::json& config, const std::string& source = "config.json");
};

}  // namespace qloom::model
