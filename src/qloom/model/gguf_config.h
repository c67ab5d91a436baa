// config.json from a GGUF file's metadata: the `<arch>.*`, `general.*` and
// `tokenizer.ggml.*` keys mapped the way transformers' own GGUF loader maps
// them (AutoConfig.from_pretrained(dir, gguf_file=...)), plus the
// `architectures` and `dtype` a save of the converted model records.
//
// Strict where transformers is lenient: every `<arch>.*` key is either mapped,
// checked against the value the config implies, or refused (kUnsupported
// naming the key); a size the maths needs that the file lacks is kInvalidInput
// naming the key. Where transformers drops a value the file states (qwen3's
// attention.key_length, llama's rope.scaling.*, attention biases present as
// tensors), the value the file states is written. Architectures mapped:
// llama (and llama files named "mistral", which transformers reads as
// mistral), qwen2, qwen3; any other general.architecture is kUnsupported.
// Reads metadata and tensor infos only, never tensor data.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace qloom::io {
class GgufFile;
}

namespace qloom::model {

// The facts the tensor conversion needs, with the config they come from.
struct GgufModelInfo {
  std::string gguf_arch;   // general.architecture
  std::string model_type;  // the HF model_type ("llama", "mistral", ...)
  std::string hf_class;    // "LlamaForCausalLM", ...
  bool permute_qk = false; // llama.cpp permuted Q/K rows (llama family)
  int64_t layers = 0, hidden = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  bool tied = false;       // no output.weight: lm_head is the embedding
  nlohmann::json config;   // config.json (keys sorted as transformers writes them)
};

// `dtype` is the config's "dtype" ("bfloat16" or "float32").
GgufModelInfo read_gguf_model_info(const io::GgufFile& file, const std::string& dtype = "bfloat16");

// generation_config.json as transformers derives it from the config.
nlohmann::json gguf_generation_config(const GgufModelInfo& info);

}  // namespace qloom::model
