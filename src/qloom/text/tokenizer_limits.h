// Bounds on what a tokenizer file may make qloom allocate, and on how much a
// normalizer or decoder may grow text (issue 30: hostile input). Each limit
// sits far above what real tokenizers use, and breaking one is a
// qloom::Error kInvalidInput naming the file and the field at fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace qloom::text {

// Token ids are < kMaxTokenId (16,777,216; the largest real vocabularies hold
// ~262k tokens) and < the token count (vocab + added tokens) + kTokenIdSlack,
// so that the id -> token table stays proportional to the file.
inline constexpr int64_t kMaxTokenId = int64_t{1} << 24;
inline constexpr int64_t kTokenIdSlack = 65'536;
// One vocab or added token string (real ones: under 1 KiB).
inline constexpr size_t kMaxTokenBytes = 65'536;
// One piece of a tokenizer.model read into the LlamaTokenizer pipeline, whose
// generated merges cost the square of a piece's length (sentencepiece
// trains pieces of at most 16 characters by default).
inline constexpr size_t kMaxSpmPieceBytes = 1'024;
// All added-token contents together (searched through a byte trie of ~100
// bytes a byte; real files: under 200 KiB).
inline constexpr size_t kMaxAddedTokensBytes = size_t{1} << 20;
// The same after normalizing the normalized ones (what the tries hold).
inline constexpr size_t kMaxAddedSearchBytes = size_t{2} << 20;
// Special-token ids a post-processor puts around one sequence (real: 1-4).
inline constexpr size_t kMaxPostProcessorIds = 4'096;
// Normalizers may turn n bytes into at most kGrowthFactor * n + kGrowthSlack
// bytes, decoders the same of the tokens' bytes (NFKC expands a character at
// most ~11x in UTF-8 bytes; Prepend / Replace of spaces add a few bytes).
inline constexpr size_t kGrowthFactor = 64;
inline constexpr size_t kGrowthSlack = 65'536;

// The exclusive bound on ids of a tokenizer with `tokens` vocab + added tokens.
int64_t token_id_limit(int64_t tokens);
// The most bytes a normalizer (or decoder) may make of `input_bytes` bytes.
size_t growth_limit(size_t input_bytes);

// `v` as a token id of `token`: an integer in [0, limit); else kInvalidInput
// naming `source`, `item`, the token and the value.
int32_t checked_token_id(const nlohmann::json& v, int64_t limit, const std::string& source,
                         const std::string& item, std::string_view token);
// kInvalidInput naming `item` when `token` is longer than kMaxTokenBytes.
void check_token_size(std::string_view token, const std::string& source, const std::string& item);
// kInvalidInput naming `what` at `item` when `to` bytes exceed growth_limit(from).
void check_growth(size_t from, size_t to, const std::string& source, const std::string& item,
                  const std::string& what);
// At most ~60 bytes of `token` (cut at a character boundary), quoted, for messages.
std::string shown_token(std::string_view token);

}  // namespace qloom::text
