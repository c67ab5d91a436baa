// The parsed tokenizer.json pipeline behind Tokenizer (internal to engine).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "qloom/text/added_tokens.h"
#include "qloom/text/bpe.h"
#include "qloom/text/decoders.h"
#include "qloom/text/normalizers.h"
#include "qloom/text/post_processors.h"
#include "qloom/text/pre_tokenizers.h"

namespace qloom::text {

struct TokenizerPipeline {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> model;
  AddedVocabulary added;
  PostProcessor post;
  std::unique_ptr<Decoder> decoder;

  std::optional<int32_t> token_to_id(std::string_view token) const;
};

// Parses tokenizer.json text; `source` names it in errors. Throws
// qloom::Error: kInvalidInput (bad JSON, missing/mistyped fields),
// kUnsupported (model / normalizer / pre_tokenizer / decoder /
// post_processor types outside the handled set, naming the field).
TokenizerPipeline parse_tokenizer_json(std::string_view json_text, const std::string& source);
// The same from the parsed document.
TokenizerPipeline parse_tokenizer_json(const nlohmann::json& root, const std::string& source);

}  // namespace qloom::text
