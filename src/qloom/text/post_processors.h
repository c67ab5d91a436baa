// Post-processors of tokenizer.json ("post_processor") for single sequences:
// the special-token ids put around the encoded text when add_special_tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace qloom::text {

// What the post-processor adds: ids before and after the sequence.
// TemplateProcessing, Roberta/BertProcessing and Sequence reduce to this;
// ByteLevel (offset trimming only) adds nothing.
struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
  bool present = false;  // false when the JSON has no post_processor
  void apply(std::vector<int32_t>& ids) const;
};

// Throws kUnsupported for other types, kInvalidInput when malformed, when an
// id is outside [0, id_limit) or when more than kMaxPostProcessorIds ids
// would surround a sequence (tokenizer_limits.h).
PostProcessor make_post_processor(const nlohmann::json& j, const std::string& source,
                                  const std::string& item, int64_t id_limit);

}  // namespace qloom::text
