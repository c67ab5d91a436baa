// The BPE model of tokenizer.json ("model": {"type": "BPE"}): byte-level
// (GPT-2 style) and SentencePiece-style (byte_fallback, unk, fuse_unk) merges,
// as HuggingFace tokenizers' BPE with dropout disabled.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qloom::text {

class Bpe {
 public:
  // From the "model" object; throws kInvalidInput (bad vocab/merges; an id
  // outside [0, id_limit), two tokens with one id, a token over
  // kMaxTokenBytes: see tokenizer_limits.h) or kUnsupported (dropout > 0,
  // another model type) naming `item`.
  Bpe(const nlohmann::json& model, const std::string& source, const std::string& item, int64_t id_limit);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr when unknown
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  // One past the largest id in the vocab.
  int64_t id_end() const { return static_cast<int64_t>(id_to_token_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::vector<int32_t>& symbols) const;
  void load_vocab(const nlohmann::json& vocab, int64_t id_limit, const std::string& source,
                  const std::string& item);
  void load_merges(const nlohmann::json& merges, const std::string& source, const std::string& item);

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::vector<int32_t> byte_ids_;  // <0xXX> ids, -1 when absent (byte_fallback)
};

}  // namespace qloom::text
