// Model inspection: the facts `qloom inspect` prints about a HuggingFace model
// directory — configuration, tensor and parameter counts by dtype, shards,
// tokenizer files and sizes. Reads config and safetensors headers only; no
// tensor data is touched.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::io {
class ModelDir;
}

namespace qloom::model {

struct ModelSummary {
  std::string path;
  std::string model_type;
  std::vector<std::string> architectures;
  // Config facts (absent when the config does not state them).
  std::optional<int64_t> num_hidden_layers, hidden_size, intermediate_size,
      num_attention_heads, num_key_value_heads, head_dim, vocab_size,
      max_position_embeddings;
  std::string torch_dtype;
  bool tie_word_embeddings = false;
  std::string quant_method;  // from config.quantization_config, empty if none
  // Weights: counts of stored elements (packed formats count stored words).
  uint64_t parameters = 0;
  std::map<std::string, uint64_t> parameters_by_dtype;  // by safetensors dtype name
  uint64_t tensors = 0;
  uint64_t weights_bytes = 0;  // tensor data bytes
  uint64_t size_bytes = 0;     // all top-level files of the directory, on disk
  std::vector<std::string> shards;
  std::vector<std::string> tokenizer_files;
  std::vector<std::string> other_files;
};

ModelSummary summarize_model(const io::ModelDir& dir);
// The fields that come from config.json alone (no weights are opened):
// what `qloom inspect org/name` shows before the weights are downloaded.
ModelSummary summarize_config(const io::ModelDir& dir);

// One JSON object; keys: path, model_type, architectures, num_hidden_layers,
// hidden_size, ..., parameters, parameters_by_dtype, tensors, weights_bytes,
// size_bytes, shards, tokenizer_files, other_files, quant_method.
nlohmann::ordered_json summary_to_json(const ModelSummary& s);

// Human-readable, aligned, a few lines.
std::string format_summary(const ModelSummary& s);

}  // namespace qloom::model
