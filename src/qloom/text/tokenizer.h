// Tokenizer: exact HuggingFace `tokenizers` encoding/decoding from a
// tokenizer.json (BPE: byte-level and SentencePiece-style with byte_fallback;
// added/special tokens; normalizers; pre-tokenizers; post-processor
// templates; decoders), or a SentencePiece tokenizer.model when that is all a
// model ships. Immutable after load; encode/decode are thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qloom::text {

class Tokenizer {
 public:
  // From a model directory: tokenizer.json when present, else tokenizer.model
  // (SentencePiece). tokenizer_config.json is read for add_bos/add_eos and
  // special tokens where it matters. Throws qloom::Error (kNotFound naming the
  // expected files; kInvalidInput naming the file and field).
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

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::text
