// Added tokens (tokenizer.json "added_tokens"): found in the text before
// normalization (normalized == false) or after it (normalized == true), as
// HuggingFace tokenizers' AddedVocabulary: leftmost-longest matching, then
// single_word / lstrip / rstrip.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qloom/text/normalizers.h"
#include "qloom/text/pre_tokenizers.h"

namespace qloom::text {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false, normalized = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalizer` (may be null) turns the contents of normalized tokens into
  // the strings searched for in normalized text. Throws kInvalidInput naming
  // `source` and the token when the searched strings exceed
  // kMaxAddedSearchBytes together (tokenizer_limits.h).
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer,
                  const std::string& source = "tokenizer.json");

  // The whole input -> pieces: added tokens (token >= 0) and normalized text
  // between them (token < 0), empty pieces dropped.
  std::vector<Piece> extract_and_normalize(std::string_view text, const Normalizer* normalizer) const;

  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Byte trie over the searched strings; leftmost-longest, non-overlapping.
  struct Trie {
    struct Node {
      std::unordered_map<unsigned char, int32_t> next;
      int32_t token = -1;  // index into tokens_
    };
    std::vector<Node> nodes{Node{}};
    void insert(std::string_view s, int32_t token);
    // Longest match starting at `pos`: (length, token) or (0, -1).
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
  };
  // Splits one piece by the tokens of `trie`, appending to `out`.
  void split(const Piece& piece, const Trie& trie, std::vector<Piece>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace qloom::text
