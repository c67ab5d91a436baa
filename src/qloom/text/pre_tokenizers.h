// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split each piece of
// text into words for the model, as HuggingFace tokenizers' PreTokenizedString.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "qloom/text/onig_regex.h"

namespace qloom::text {

// One split of the input. `token` >= 0: an added token, left untouched by
// pre-tokenizers and the model. `at_origin`: the split begins at byte 0 of
// the original input (Metaspace prepend_scheme "first" needs it).
struct Piece {
  std::string text;
  bool at_origin = false;
  int32_t token = -1;
};

// How a Split keeps the delimiters (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `piece` at `matches` (sorted, non-overlapping) as HF
// NormalizedString::split does, appending non-empty results to `out`.
void split_piece(const Piece& piece, const std::vector<Range>& matches, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Rewrites `pieces` (pieces with token >= 0 pass through).
  virtual void apply(std::vector<Piece>& pieces) const = 0;
};

// Types: Sequence, ByteLevel, Split, Metaspace, Digits, Whitespace,
// WhitespaceSplit. Null gives nullptr; others throw kUnsupported naming
// `item`.type.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& source,
                                                 const std::string& item);

}  // namespace qloom::text
