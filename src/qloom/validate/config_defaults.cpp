// transformers' config defaults, as facts read from its configuration classes
// (PretrainedConfig of 4.x, PreTrainedConfig of 5.x, and the Llama, Mistral,
// Qwen2 and Qwen3 config classes, whose defaults agree between 4.57 and 5.x).
// A key missing from config.json loads as these values, so a key one side has
// and the other lacks is benign drift only when its value is listed here.
#include <map>
#include <string>

#include "qloom/validate/drift.h"

namespace qloom::validate {

namespace {

using json = nlohmann::json;
using Table = std::map<std::string, json>;

// Attributes every config class has (4.x wrote them all with use_diff=False,
// 5.x writes none of them when they hold these values).
const Table& base_defaults() {
  static const Table t = {
      {"return_dict", true},
      {"output_hidden_states", false},
      {"output_attentions", false},
      {"torchscript", false},
      {"torch_dtype", nullptr},
      {"dtype", nullptr},
      {"use_bfloat16", false},
      {"tf_legacy_loss", false},
      {"pruned_heads", json::object()},
      {"chunk_size_feed_forward", 0},
      {"is_encoder_decoder", false},
      {"is_decoder", false},
      {"cross_attention_hidden_size", nullptr},
      {"add_cross_attention", false},
      {"tie_encoder_decoder", false},
      {"finetuning_task", nullptr},
      {"id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}}},
      {"label2id", {{"LABEL_0", 0}, {"LABEL_1", 1}}},
      {"tokenizer_class", nullptr},
      {"prefix", nullptr},
      {"bos_token_id", nullptr},
      {"pad_token_id", nullptr},
      {"eos_token_id", nullptr},
      {"sep_token_id", nullptr},
      {"decoder_start_token_id", nullptr},
      {"task_specific_params", nullptr},
      {"problem_type", nullptr},
      // 4.x's generation attributes on the model config.
      {"max_length", 20},
      {"min_length", 0},
      {"do_sample", false},
      {"early_stopping", false},
      {"num_beams", 1},
      {"num_beam_groups", 1},
      {"diversity_penalty", 0.0},
      {"temperature", 1.0},
      {"top_k", 50},
      {"top_p", 1.0},
      {"typical_p", 1.0},
      {"repetition_penalty", 1.0},
      {"length_penalty", 1.0},
      {"no_repeat_ngram_size", 0},
      {"encoder_no_repeat_ngram_size", 0},
      {"bad_words_ids", nullptr},
      {"num_return_sequences", 1},
      {"output_scores", false},
      {"return_dict_in_generate", false},
      {"forced_bos_token_id", nullptr},
      {"forced_eos_token_id", nullptr},
      {"remove_invalid_values", false},
      {"exponential_decay_length_penalty", nullptr},
      {"suppress_tokens", nullptr},
      {"begin_suppress_tokens", nullptr},
  };
  return t;
}

// Per architecture. rope_theta is not here: default_rope_theta() and the
// rope normalisation handle it.
const std::map<std::string, Table>& arch_defaults() {
  static const std::map<std::string, Table> t = {
      {"llama",
       {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008},
        {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"hidden_act", "silu"},
        {"max_position_embeddings", 2048}, {"initializer_range", 0.02}, {"rms_norm_eps", 1e-6},
        {"use_cache", true}, {"pad_token_id", nullptr}, {"bos_token_id", 1},
        {"eos_token_id", 2}, {"pretraining_tp", 1}, {"tie_word_embeddings", false},
        {"rope_scaling", nullptr}, {"attention_bias", false}, {"attention_dropout", 0.0},
        {"mlp_bias", false}}},
      {"mistral",
       {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336},
        {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
        {"hidden_act", "silu"}, {"max_position_embeddings", 131072},
        {"initializer_range", 0.02}, {"rms_norm_eps", 1e-6}, {"use_cache", true},
        {"pad_token_id", nullptr}, {"bos_token_id", 1}, {"eos_token_id", 2},
        {"tie_word_embeddings", false}, {"rope_scaling", nullptr}, {"sliding_window", 4096},
        {"attention_dropout", 0.0}}},
      {"qwen2",
       {{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
        {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
        {"hidden_act", "silu"}, {"max_position_embeddings", 32768},
        {"initializer_range", 0.02}, {"rms_norm_eps", 1e-6}, {"use_cache", true},
        {"tie_word_embeddings", false}, {"rope_scaling", nullptr},
        {"use_sliding_window", false}, {"sliding_window", 4096}, {"max_window_layers", 28},
        {"attention_dropout", 0.0}, {"pad_token_id", nullptr}, {"bos_token_id", nullptr},
        {"eos_token_id", nullptr}}},
      {"qwen3",
       {{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
        {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
        {"head_dim", 128}, {"hidden_act", "silu"}, {"max_position_embeddings", 32768},
        {"initializer_range", 0.02}, {"rms_norm_eps", 1e-6}, {"use_cache", true},
        {"tie_word_embeddings", false}, {"rope_scaling", nullptr}, {"attention_bias", false},
        {"use_sliding_window", false}, {"sliding_window", 4096}, {"max_window_layers", 28},
        {"attention_dropout", 0.0}, {"pad_token_id", nullptr}, {"bos_token_id", nullptr},
        {"eos_token_id", nullptr}}},
  };
  return t;
}

// config[key] when it is an integer, else the architecture's default.
std::optional<int64_t> int_or_default(const Table& arch, const json& config, const char* key) {
  const auto it = config.find(key);
  if (it != config.end() && it->is_number_integer()) return it->get<int64_t>();
  const auto d = arch.find(key);
  if (d != arch.end() && d->second.is_number_integer()) return d->second.get<int64_t>();
  return std::nullopt;
}

// Defaults computed from other fields (the config classes' __post_init__).
std::optional<json> derived_default(const std::string& model_type, const Table& arch,
                                    const std::string& key, const json& config) {
  const bool llama_like = model_type == "llama" || model_type == "mistral";
  if (key == "head_dim" && llama_like) {
    const auto h = int_or_default(arch, config, "hidden_size");
    const auto n = int_or_default(arch, config, "num_attention_heads");
    if (h && n && *n > 0) return json(*h / *n);
  }
  if (key == "num_key_value_heads" && model_type == "llama") {
    if (const auto n = int_or_default(arch, config, "num_attention_heads")) return json(*n);
  }
  if (key == "layer_types" && (model_type == "qwen2" || model_type == "qwen3")) {
    const auto layers = int_or_default(arch, config, "num_hidden_layers");
    const auto window_layers = int_or_default(arch, config, "max_window_layers");
    const auto usw = config.find("use_sliding_window");
    const bool sliding = usw != config.end() && usw->is_boolean() && usw->get<bool>();
    const auto sw = config.find("sliding_window");
    const bool has_window = sliding && !(sw != config.end() && sw->is_null());
    if (!layers || *layers < 0 || *layers > 100000 || !window_layers) return std::nullopt;
    json types = json::array();
    for (int64_t i = 0; i < *layers; ++i)
      types.push_back(has_window && i >= *window_layers ? "sliding_attention" : "full_attention");
    return types;
  }
  return std::nullopt;
}

}  // namespace

std::optional<json> config_default(const std::string& model_type, const std::string& key,
                                   const json& config) {
  if (key == "rope_theta") {
    if (const auto t = default_rope_theta(model_type)) return json(*t);
  }
  const auto a = arch_defaults().find(model_type);
  if (a != arch_defaults().end()) {
    if (auto d = derived_default(model_type, a->second, key, config)) return d;
    const auto it = a->second.find(key);
    if (it != a->second.end()) return it->second;
  }
  // tie_word_embeddings differs between 4.x's base class (true) and the
  // architectures (false): no default outside the table.
  const auto b = base_defaults().find(key);
  if (b != base_defaults().end()) return b->second;
  return std::nullopt;
}

std::optional<double> default_rope_theta(const std::string& model_type) {
  if (arch_defaults().count(model_type)) return 10000.0;
  return std::nullopt;
}

}  // namespace qloom::validate
