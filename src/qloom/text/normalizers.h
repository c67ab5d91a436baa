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
  virtual void normalize(std::string& text) const = 0;
};

// Builds from the JSON object at `item` (e.g. "normalizer"); null gives
// nullptr. Types: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase,
// Strip. Others throw kUnsupported naming `item`.type.
// {"String": s} or {"Regex": r} at `item`; throws kInvalidInput otherwise.
Pattern parse_pattern(const nlohmann::json& j, const std::string& source, const std::string& item);

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& source,
                                            const std::string& item);

}  // namespace qloom::text
