// Which tokenizer qloom applies for a model directory. Where the directory
// has a SentencePiece tokenizer.model, qloom follows what transformers 5's
// AutoTokenizer builds for it (what Quark and vLLM tokenize with); elsewhere
// tokenizer.json runs as written.
//
// transformers 5 (5.25, models/auto/tokenization_auto.py
// AutoTokenizer.from_pretrained, tokenization_utils_tokenizers.py
// TokenizersBackend.convert_to_native_format, models/llama/tokenization_llama.py
// LlamaTokenizer.__init__) builds a LlamaTokenizer when the hub class
// (tokenizer_config.json "tokenizer_class", else config.json's, "Fast"
// dropped) is LlamaTokenizer, unless tokenizer_config.json names remote code
// (auto_map), tokenizer.json is ByteLevel, or config.json's model_type has
// another registered tokenizer that wins (kLlamaOverriddenModelTypes). That
// class takes only the vocabulary, merges and post-processor of tokenizer.json
// (or the pieces of tokenizer.model when there is no tokenizer.json) and
// installs its own pipeline: no normalizer, Metaspace("▁", prepend_scheme
// always / first (legacy false) / never (add_prefix_space false), split
// false), BPE with byte_fallback and fuse_unk, decoder Replace("▁", " "),
// ByteFallback, Fuse, Strip(" ", 1, 0) (the Strip only with add_prefix_space).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qloom::text {

enum class TokenizerKind {
  kTokenizerJson,  // tokenizer.json as written (HF tokenizers)
  kLlamaPipeline,  // transformers 5 LlamaTokenizer over tokenizer.json's or tokenizer.model's vocabulary
  kSentencePiece,  // tokenizer.model through libsentencepiece
};

struct TokenizerChoice {
  TokenizerKind kind = TokenizerKind::kTokenizerJson;
  std::filesystem::path file;  // the file the vocabulary comes from
  std::string hf_class;        // the hub class named by the checkpoint ("" when none)
  bool legacy = false;         // kLlamaPipeline: tokenizer_config.json "legacy" (default false)
  bool add_prefix_space = true;  // kLlamaPipeline: "add_prefix_space" (default true)
  std::string why;             // why this one, a short clause
};

// The model types (config.json model_type) for which transformers 5.25 does
// not build the hub's LlamaTokenizer; sorted. tests/data/tokenizers/hf5_rule.json
// records the same list as scripts/goldens/tokenizer_hf5_goldens.py reads it.
std::span<const std::string_view> llama_overridden_model_types();

// tokenizer_config.json of `dir` as an object (empty when absent). Throws
// kInvalidInput naming the file when it is not a JSON object.
nlohmann::json read_tokenizer_config(const std::filesystem::path& dir);

// The choice for `dir` given its tokenizer_config.json (read_tokenizer_config)
// and, when the directory has one, the text of tokenizer.json (else null).
// Reads config.json when the hub class is LlamaTokenizer. Throws kNotFound
// when the directory has neither tokenizer.json nor tokenizer.model, and
// kInvalidInput naming the file and field for mistyped config values.
TokenizerChoice choose_tokenizer(const std::filesystem::path& dir, const nlohmann::json& tokenizer_config,
                                 const std::string* tokenizer_json_text);

// One line for `qloom inspect`: what qloom applies and why, e.g.
// "transformers 5 LlamaTokenizer over tokenizer.json's vocabulary (as
// AutoTokenizer: ...); tokenizer.json's own normalizer (...) is not applied".
// `replaced`: llama_replaced_components (kLlamaPipeline over tokenizer.json).
std::string describe_choice(const TokenizerChoice& c, const std::vector<std::string>& replaced);
// "tokenizer_json", "llama_pipeline" or "sentencepiece".
const char* tokenizer_kind_name(TokenizerKind kind);

}  // namespace qloom::text
