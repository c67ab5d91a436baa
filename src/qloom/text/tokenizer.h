// Tokenizer: exact HuggingFace `tokenizers` encoding/decoding from a
// tokenizer.json (BPE: byte-level and SentencePiece-style with byte_fallback;
// added/special tokens; normalizers; pre-tokenizers; post-processor
// templates; decoders); where the model ships a SentencePiece tokenizer.model,
// what transformers 5's AutoTokenizer builds for it (tokenizer_choice.h).
// Immutable after load; encode/decode are thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/text/tokenizer_choice.h"

namespace qloom::text {

class Tokenizer {
 public:
  // From a model directory, as choose_tokenizer (tokenizer_choice.h) picks:
  // tokenizer.json as written; transformers 5's LlamaTokenizer pipeline over
  // the vocabulary of tokenizer.json or tokenizer.model; or tokenizer.model
  // through sentencepiece. tokenizer_config.json is read for add_bos/add_eos
  // and special tokens where it matters. Throws qloom::Error (kNotFound naming
  // the expected files; kInvalidInput naming the file and field).
  static Tokenizer load(const std::filesystem::path& model_dir);
  // From tokenizer.json text; `source` names it in errors.
  static Tokenizer from_json(std::string_view json_text, const std::string& source = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // As tokenizers' Tokenizer.encode(text, add_special_tokens).ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // As tokenizers' Tokenizer.decode(ids, skip_special_tokens).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // including added tokens
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

  // What load() applies and why; from_json: tokenizer.json as written.
  const TokenizerChoice& choice() const;
  // One line for `qloom inspect` (describe_choice).
  std::string describe() const;
  // tokenizer.json's components that the applied LlamaTokenizer pipeline
  // replaces by different ones (llama_replaced_components); else empty.
  const std::vector<std::string>& replaced_components() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // The three ways of load() (see tokenizer_choice.h).
  static Tokenizer load_as_written(const std::string& json_text, const std::filesystem::path& file,
                                   const nlohmann::json& cfg, const std::string& cfg_name);
  static Tokenizer load_llama(const TokenizerChoice& c, const std::string* json_text, const nlohmann::json& cfg,
                              const std::string& cfg_name);
  static Tokenizer load_sentencepiece(const std::filesystem::path& file, const nlohmann::json& cfg,
                                      const std::string& cfg_name);
  // bos/eos from tokenizer_config.json's bos_token/eos_token, and its
  // add_bos_token/add_eos_token where the pipeline has no post-processor
  // (tokenizer.json as written, sentencepiece).
  void set_specials_from_config(const nlohmann::json& cfg, const std::string& cfg_name);

  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::text
