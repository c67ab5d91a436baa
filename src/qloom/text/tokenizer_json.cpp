#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/text/json_util.h"
#include "qloom/text/tokenizer_limits.h"
#include "qloom/text/tokenizer_pipeline.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

std::optional<int32_t> TokenizerPipeline::token_to_id(std::string_view token) const {
  if (const AddedToken* t = added.find_content(token)) return t->id;
  return model->token_to_id(token);
}

namespace {

const json& field(const json& root, const char* key) {
  static const json null_value;
  auto it = root.find(key);
  return it == root.end() ? null_value : *it;
}

// The id of added_tokens[k] `j` with content `content`, checked (HF reads it
// as an unsigned 32-bit number) even where the vocab's id replaces it.
int32_t added_id(const json& j, const std::string& content, int64_t id_limit, const std::string& source,
                 const std::string& item) {
  if (!j.is_object() || !j.contains("id")) ju::bad_field(source, item + ".id", "missing field");
  return checked_token_id(j["id"], id_limit, source, item + ".id", content);
}

std::vector<AddedToken> parse_added(const json& list, const Bpe& model, int64_t id_limit,
                                    const std::string& source) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  if (!list.is_array()) ju::bad_field(source, "added_tokens", "expected an array");
  size_t total_bytes = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string item = "added_tokens[" + std::to_string(k) + "]";
    const json& j = list[k];
    AddedToken t;
    t.content = ju::get<std::string>(j, "content", source, item);
    check_token_size(t.content, source, item + ".content");
    total_bytes += t.content.size();
    if (total_bytes > kMaxAddedTokensBytes) {
      ju::bad_field(source, item, "the added tokens' contents exceed " + std::to_string(kMaxAddedTokensBytes) +
                                      " bytes together (the limit)");
    }
    t.id = added_id(j, t.content, id_limit, source, item);
    t.special = ju::get_or<bool>(j, "special", false, source, item);
    t.lstrip = ju::get_or<bool>(j, "lstrip", false, source, item);
    t.rstrip = ju::get_or<bool>(j, "rstrip", false, source, item);
    t.single_word = ju::get_or<bool>(j, "single_word", false, source, item);
    t.normalized = ju::get_or<bool>(j, "normalized", !t.special, source, item);
    // As HF: a token already in the model's vocab keeps the model's id.
    if (auto id = model.token_to_id(t.content)) t.id = *id;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

TokenizerPipeline parse_tokenizer_json(std::string_view json_text, const std::string& source) {
  return parse_tokenizer_json(ju::parse_document(json_text, source), source);
}

TokenizerPipeline parse_tokenizer_json(const json& root, const std::string& source) {
  if (!root.is_object()) ju::bad_field(source, "", "expected a JSON object");
  const json& model = field(root, "model");
  if (!model.is_object()) ju::bad_field(source, "model", "missing or not an object");

  // Ids are bounded by the number of tokens the file holds (tokenizer_limits.h).
  const json& vocab = field(model, "vocab");
  const json& added = field(root, "added_tokens");
  const int64_t id_limit = token_id_limit(static_cast<int64_t>((vocab.is_object() ? vocab.size() : 0) +
                                                               (added.is_array() ? added.size() : 0)));
  TokenizerPipeline p;
  p.model = std::make_unique<Bpe>(model, source, "model", id_limit);
  p.normalizer = make_normalizer(field(root, "normalizer"), source, "normalizer");
  p.pre_tokenizer = make_pre_tokenizer(field(root, "pre_tokenizer"), source, "pre_tokenizer");
  p.post = make_post_processor(field(root, "post_processor"), source, "post_processor", id_limit);
  p.decoder = make_decoder(field(root, "decoder"), source, "decoder");
  p.added = AddedVocabulary(parse_added(added, *p.model, id_limit, source),
                            p.normalizer.get(), source);
  return p;
}

}  // namespace qloom::text
