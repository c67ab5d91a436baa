// ModelConfig: the fields of a HF config.json the engine needs, parsed
// strictly per model_type (defaults as transformers' config classes define
// them). Throws qloom::Error kUnsupported naming the model_type or the
// feature (e.g. an unknown rope_scaling type), kInvalidInput naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::engine {

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
  // Further fields (rope scaling, sliding window, gemma and MoE settings) are
  // added by the engine as it needs them.
  nlohmann::json raw;  // the whole config.json

  static ModelConfig parse(const nlohmann::json& config, const std::string& source = "config.json");
};

}  // namespace qloom::engine
