#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/text/json_util.h"
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

std::vector<AddedToken> parse_added(const json& list, const Bpe& model, const std::string& source) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  if (!list.is_array()) ju::bad_field(source, "added_tokens", "expected an array");
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string item = "added_tokens[" + std::to_string(k) + "]";
    const json& j = list[k];
    AddedToken t;
    t.content = ju::get<std::string>(j, "content", source, item);
    t.id = ju::get<int32_t>(j, "id", source, item);
    t.special = ju::get_or<bool>(j, "special", false, source, item);
    t.lstrip = ju::get_or<bool>(j, "lstrip", false, source, item);
    t.rstrip = ju::get_or<bool>(j, "rstrip", false, source, item);
    t.single_word = ju::get_or<bool>(j, "single_word", false, source, item);
    t.normalized = ju::get_or<bool>(j, "normalized", !t.special, source, item);
    // As HF: a token already in the model's vocab keeps the model's id.
    if (auto id = model.token_to_id(t.content)) t.id = *id;
    if (t.id < 0) ju::bad_field(source, item + ".id", "negative id");
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

TokenizerPipeline parse_tokenizer_json(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    ju::bad_field(source, "", std::string("not valid JSON: ") + e.what());
  }
  return parse_tokenizer_json(root, source);
}

TokenizerPipeline parse_tokenizer_json(const json& root, const std::string& source) {
  if (!root.is_object()) ju::bad_field(source, "", "expected a JSON object");
  const json& model = field(root, "model");
  if (!model.is_object()) ju::bad_field(source, "model", "missing or not an object");

  TokenizerPipeline p;
  p.model = std::make_unique<Bpe>(model, source, "model");
  p.normalizer = make_normalizer(field(root, "normalizer"), source, "normalizer");
  p.pre_tokenizer = make_pre_tokenizer(field(root, "pre_tokenizer"), source, "pre_tokenizer");
  p.post = make_post_processor(field(root, "post_processor"), source, "post_processor");
  p.decoder = make_decoder(field(root, "decoder"), source, "decoder");
  p.added = AddedVocabulary(parse_added(field(root, "added_tokens"), *p.model, source),
                            p.normalizer.get());
  return p;
}

}  // namespace qloom::text
