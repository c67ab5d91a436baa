// Normalizers of tokenizer.json ("normalizer"): applied to each piece of text
// between added tokens before pre-tokenization. Offsets are not tracked.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "qloom/text/onig_regex.h"

namespace qloom::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Normalizes `text` in place. Throws kInvalidInput naming the normalizer
  // (file and field) that would make it longer than growth_limit of its size
  // before (tokenizer_limits.h), before building the oversized text where
  // the size is known up front (Prepend, Replace).
  void normalize(std::string& text) const { apply(text, text.size()); }
  // One step; `input_bytes` is the size before the whole normalizer ran.
  virtual void apply(std::string& text, size_t input_bytes) const = 0;
};

// Builds from the JSON object at `item` (e.g. "normalizer"); null gives
// nullptr. Types: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase,
// Strip. Others throw kUnsupported naming `item`.type.
// {"String": s} or {"Regex": r} at `item`; throws kInvalidInput otherwise.
Pattern parse_pattern(const nlohmann::json& j, const std::string& source, const std::string& item);

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& source,
                                            const std::string& item);

}  // namespace qloom::text
