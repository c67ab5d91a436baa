#include "qloom/model/config_keys.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

#include "qloom/core/error.h"

namespace qloom::model {
namespace {

using Keys = std::vector<std::string_view>;

// Harmless for every architecture: metadata, generation defaults
// (PretrainedConfig), training-only settings, tooling.
const Keys kIgnoredEverywhere = {
    "_name_or_path", "architectures", "transformers_version", "dtype", "torch_dtype", "use_cache",
    "initializer_range", "pad_token_id", "sep_token_id", "decoder_start_token_id", "attention_dropout",
    "id2label", "label2id", "problem_type", "tokenizer_class", "task_specific_params", "finetuning_task",
    "return_dict", "output_attentions", "output_hidden_states", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "pruned_heads", "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "add_cross_attention",
    "tie_encoder_decoder", "cross_attention_hidden_size", "prefix", "max_length", "min_length", "do_sample",
    "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
    "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "bad_words_ids", "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "auto_map", "quantization_config", "_attn_implementation_autoset",
    "bos_token_id", "eos_token_id"};

// Interpreted for every architecture (model_config.cpp / rope_config.cpp).
const Keys kInterpretedEverywhere = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
    "rope_parameters", "tie_word_embeddings"};

struct ArchKeys {
  std::string_view model_type;
  Keys interpreted;
  Keys ignored;
};

const Keys kMoeTraining = {"output_router_logits", "router_aux_loss_coef"};

const std::array<ArchKeys, 11>& arch_keys() {
  static const std::array<ArchKeys, 11> t = {{
      {"llama", {"hidden_act", "attention_bias", "mlp_bias"}, {"pretraining_tp"}},
      {"mistral", {"hidden_act", "sliding_window"}, {}},
      {"qwen2", {"hidden_act", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}, {}},
      {"qwen3",
       {"hidden_act", "attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types"},
       {}},
      // transformers' GemmaMLP reads hidden_act; hidden_activation is kept for old configs.
      {"gemma", {"hidden_act", "attention_bias", "use_bidirectional_attention"}, {"hidden_activation"}},
      // Gemma2/3 read hidden_activation; their configs often carry a hidden_act nobody reads.
      {"gemma2",
       {"hidden_activation", "attention_bias", "attn_logit_softcapping", "final_logit_softcapping",
        "query_pre_attn_scalar", "sliding_window", "layer_types", "use_bidirectional_attention"},
       {"hidden_act", "cache_implementation"}},
      {"gemma3_text",
       {"hidden_activation", "attention_bias", "attn_logit_softcapping", "final_logit_softcapping",
        "query_pre_attn_scalar", "sliding_window", "layer_types", "rope_local_base_freq", "sliding_window_pattern",
        "_sliding_window_pattern", "use_bidirectional_attention"},
       {"hidden_act", "cache_implementation"}},
      {"phi3", {"hidden_act", "partial_rotary_factor", "sliding_window", "original_max_position_embeddings"},
       {"embd_pdrop", "resid_pdrop"}},
      {"mixtral", {"hidden_act", "sliding_window", "num_local_experts", "num_experts", "num_experts_per_tok"},
       {"output_router_logits", "router_aux_loss_coef", "router_jitter_noise"}},
      {"qwen2_moe",
       {"hidden_act", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",
        "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob", "num_experts",
        "num_experts_per_tok", "shared_expert_intermediate_size", "qkv_bias"},
       kMoeTraining},
      {"qwen3_moe",
       {"hidden_act", "attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
        "decoder_sparse_step", "mlp_only_layers", "moe_intermediate_size", "norm_topk_prob", "num_experts",
        "num_local_experts", "num_experts_per_tok"},
       kMoeTraining},
  }};
  return t;
}

bool in(const Keys& keys, std::string_view k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); }

}  // namespace

bool config_key_known(std::string_view model_type, std::string_view key) {
  if (in(kIgnoredEverywhere, key) || in(kInterpretedEverywhere, key)) return true;
  for (const ArchKeys& a : arch_keys())
    if (a.model_type == model_type) return in(a.interpreted, key) || in(a.ignored, key);
  return false;
}

bool key_suggests_maths(std::string_view key) {
  static constexpr std::array<std::string_view, 30> kHints = {
      "rope", "scal", "norm", "window", "head", "act", "softcap", "eps", "bias", "partial",
      "theta", "freq", "expert", "factor", "logit", "dim", "attn", "attention", "embed", "layer",
      "rotary", "position", "moe", "router", "mlp", "multiplier", "sparse", "clip", "alibi", "hidden"};
  std::string k(key);
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view h : kHints)
    if (k.find(h) != std::string::npos) return true;
  return false;
}

void check_config_keys(const nlohmann::json& config, std::string_view model_type, const std::string& source,
                       const std::string& path) {
  for (auto it = config.begin(); it != config.end(); ++it) {
    const std::string& key = it.key();
    if (config_key_known(model_type, key) || !key_suggests_maths(key)) continue;
    const std::string f = path + key;
    throw Error(ErrorKind::kUnsupported, source, f,
                "config field \"" + f + "\" is not known to qloom's engine for model_type \"" +
                    std::string(model_type) + "\" and may change the model's maths",
                "remove the field if it is metadata, or use a checkpoint without it (qloom would need a change "
                "to implement it)");
  }
}

}  // namespace qloom::model
