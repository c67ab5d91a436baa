// The GGUF metadata of a llama-architecture export, as llama.cpp reads it
// (keys as convert_hf_to_gguf.py writes them for LlamaForCausalLM):
//   general.architecture "llama", general.type "model", general.name,
//   general.file_type, general.quantization_version 2;
//   llama.block_count, context_length, embedding_length, feed_forward_length,
//   attention.head_count, attention.head_count_kv, rope.freq_base,
//   attention.layer_norm_rms_epsilon, vocab_size, rope.dimension_count,
//   attention.key_length / value_length (when config.json states head_dim),
//   rope.scaling.type / factor (linear rope scaling);
//   tokenizer.ggml.* from the model directory's tokenizer.json (+
//   tokenizer_config.json, chat_template.jinja):
//     byte-level BPE -> model "gpt2": tokens (holes up to vocab_size filled
//       with "[PAD<i>]", type 5 unused), token_type (1 normal, 3 control =
//       special added tokens, 4 user-defined = other added tokens), merges,
//       pre: the pre-tokenizer named by its split (ByteLevel alone "gpt-2",
//       individual digits + ByteLevel "smollm", llama-3's / qwen2's Split
//       regex "llama-bpe" / "qwen2"); anything else kUnsupported naming
//       tokenizer.json's pre_tokenizer;
//     SentencePiece-style BPE (Metaspace, byte fallback) -> model "llama":
//       tokens, token_type (2 unknown, 3 control, 6 byte <0xXX>, 1 normal),
//       scores = -(rank of the merge producing the token), so llama.cpp's
//       highest-score-first merging follows the merge list (tokens no merge
//       produces score below every merged one), add_space_prefix from the
//       Metaspace prepend_scheme, merges;
//   bos / eos / unknown / padding ids (config.json's *_token_id first, then
//   tokenizer_config.json's token strings), add_bos_token / add_eos_token
//   (tokenizer_config.json, else whether the post-processor adds them),
//   tokenizer.chat_template.
// What GGUF cannot express (a tokenizer normalizer llama.cpp does not apply)
// is a warning, not an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "qloom/model/model_config.h"
#include "qloom/io/gguf_writer.h"

namespace qloom::exporter {

// llama.* hyperparameters and general.*. Throws kUnsupported naming the
// config field for a rope scaling llama.cpp's llama graph does not take here.
void add_llama_metadata(io::GgufWriter& w, const model::ModelConfig& cfg, const std::string& name,
                        uint32_t file_type, const std::string& config_file);

// tokenizer.* from `model_dir`. Appends to `warnings`.
void add_tokenizer_metadata(io::GgufWriter& w, const std::filesystem::path& model_dir,
                            const model::ModelConfig& cfg, std::vector<std::string>& warnings);

}  // namespace qloom::exporter
