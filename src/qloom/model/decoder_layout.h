// Tensor layout of dense decoder-only transformers in HuggingFace naming:
// which tensors a config implies, with their shapes. Used to generate
// synthetic models and to check that a checkpoint holds what its config says.
// Families: llama, mistral, qwen2 (q/k/v bias), qwen3 (q/k RMSNorm). The
// config is read by ModelConfig::parse (model_config.h), the one strict
// config.json reader the engine uses too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::model {

struct DecoderShape {
  std::string model_type;
  uint64_t hidden_size = 0;
  uint64_t intermediate_size = 0;
  uint64_t num_layers = 0;
  uint64_t num_heads = 0;
  uint64_t num_kv_heads = 0;
  uint64_t head_dim = 0;
  uint64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // qwen2, or attention_bias: true
  bool o_bias = false;    // attention_bias: true (not qwen2)
  bool mlp_bias = false;  // mlp_bias: true
  bool qk_norm = false;   // qwen3
};

enum class TensorRole { kEmbedding, kNorm, kLinear, kBias, kLmHead };

struct LayoutTensor {
  std::string name;
  std::vector<uint64_t> shape;
  TensorRole role;
};

// Reads the shape from a config.json object through ModelConfig::parse.
// Throws qloom::Error naming `config_label` and the missing/invalid field;
// kUnsupported for other families.
DecoderShape decoder_shape_from_config(const nlohmann::json& config, const std::string& config_label);

// Every tensor of the model in module order (embeddings, layers, final norm, lm_head).
std::vector<LayoutTensor> decoder_tensors(const DecoderShape& shape);

// Total parameter count of decoder_tensors(shape).
uint64_t decoder_parameter_count(const DecoderShape& shape);

}  // namespace qloom::model
