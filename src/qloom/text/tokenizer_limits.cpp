#include "qloom/text/tokenizer_limits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "qloom/core/error.h"

namespace qloom::text {

int64_t token_id_limit(int64_t tokens) { return std::min(kMaxTokenId, std::max<int64_t>(tokens, 0) + kTokenIdSlack); }

size_t growth_limit(size_t input_bytes) {
  const size_t cap = std::numeric_limits<size_t>::max();
  if (input_bytes > (cap - kGrowthSlack) / kGrowthFactor) return cap;
  return kGrowthFactor * input_bytes + kGrowthSlack;
}

std::string shown_token(std::string_view token) {
  constexpr size_t kMax = 60;
  std::string out = "\"";
  if (token.size() <= kMax) {
    out += token;
    return out + "\"";
  }
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(token[cut]) & 0xC0) == 0x80) --cut;
  out += token.substr(0, cut);
  return out + "...\" (" + std::to_string(token.size()) + " bytes)";
}

int32_t checked_token_id(const nlohmann::json& v, int64_t limit, const std::string& source,
                         const std::string& item, std::string_view token) {
  const std::string who = "token " + shown_token(token);
  if (!v.is_number_integer()) {
    throw_invalid(source, item, who + " has id " + v.dump() + ", not an integer",
                  "token ids are whole numbers from 0; the file is damaged or not a HuggingFace tokenizer file");
  }
  if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0) {
    throw_invalid(source, item, who + " has a negative id (" + v.dump() + ")",
                  "token ids are whole numbers from 0 (HF tokenizers rejects this file too)");
  }
  const uint64_t id = v.get<uint64_t>();
  if (id >= static_cast<uint64_t>(limit)) {
    throw_invalid(source, item,
                  who + " has id " + std::to_string(id) + ", beyond this tokenizer's id limit of " +
                      std::to_string(limit),
                  "ids must be below the token count + " + std::to_string(kTokenIdSlack) + " and below " +
                      std::to_string(kMaxTokenId) + "; the file is damaged or hostile");
  }
  return static_cast<int32_t>(id);
}

void check_token_size(std::string_view token, const std::string& source, const std::string& item) {
  if (token.size() <= kMaxTokenBytes) return;
  throw_invalid(source, item,
                "token " + shown_token(token) + " is longer than the limit of " + std::to_string(kMaxTokenBytes) +
                    " bytes",
                "real tokens are short; the file is damaged or hostile");
}

void check_growth(size_t from, size_t to, const std::string& source, const std::string& item,
                  const std::string& what) {
  const size_t limit = growth_limit(from);
  if (to <= limit) return;
  throw_invalid(source, item,
                what + " would grow " + std::to_string(from) + " bytes of text to " + std::to_string(to) +
                    " bytes, over the limit of " + std::to_string(limit) + " (" + std::to_string(kGrowthFactor) +
                    " x input + " + std::to_string(kGrowthSlack) + ")",
                "this component multiplies its input; fix it in the tokenizer file");
}

}  // namespace qloom::text
