#include "qloom/text/post_processors.h"

#include "qloom/text/json_util.h"
#include "qloom/text/tokenizer_limits.h"

namespace qloom::text {

namespace ju = json_util;
using nlohmann::json;

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  if (prefix.empty() && suffix.empty()) return;
  std::vector<int32_t> out;
  out.reserve(prefix.size() + ids.size() + suffix.size());
  out.insert(out.end(), prefix.begin(), prefix.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix.begin(), suffix.end());
  ids = std::move(out);
}

namespace {

// special_tokens[name].ids, each checked.
std::vector<int32_t> special_ids(const json& specials, const std::string& name, int64_t id_limit,
                                 const std::string& source, const std::string& item) {
  const std::string at = item + ".special_tokens." + name;
  const auto ids = ju::get<json>(specials[name], "ids", source, at);
  if (!ids.is_array()) ju::bad_field(source, at + ".ids", "expected an array of ids");
  std::vector<int32_t> out;
  for (const json& id : ids) out.push_back(checked_token_id(id, id_limit, source, at + ".ids", name));
  return out;
}

void add_template(PostProcessor& pp, const json& j, const std::string& source, const std::string& item,
                  int64_t id_limit) {
  const auto single = ju::get<json>(j, "single", source, item);
  const auto specials = ju::get_or<json>(j, "special_tokens", json::object(), source, item);
  if (!single.is_array()) ju::bad_field(source, item + ".single", "expected an array");
  bool seen_sequence = false;
  for (size_t k = 0; k < single.size(); ++k) {
    const std::string at = item + ".single[" + std::to_string(k) + "]";
    const auto& piece = single[k];
    if (piece.contains("Sequence")) {
      if (seen_sequence) ju::bad_field(source, at, "the single template names the sequence twice");
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      const auto name = ju::get<std::string>(piece["SpecialToken"], "id", source, at + ".SpecialToken");
      if (!specials.contains(name)) {
        ju::bad_field(source, item + ".special_tokens", "missing special token \"" + name + "\"");
      }
      const auto ids = special_ids(specials, name, id_limit, source, item);
      if (pp.prefix.size() + pp.suffix.size() + ids.size() > kMaxPostProcessorIds) {
        ju::bad_field(source, at, "the template puts more than " + std::to_string(kMaxPostProcessorIds) +
                                      " special-token ids around a sequence (the limit)");
      }
      auto& dst = seen_sequence ? pp.suffix : pp.prefix;
      dst.insert(dst.end(), ids.begin(), ids.end());
    } else {
      ju::bad_field(source, at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
}

// RobertaProcessing / BertProcessing: "cls": [token, id], "sep": [token, id].
void add_cls_sep(PostProcessor& pp, const json& j, const std::string& source, const std::string& item,
                 int64_t id_limit) {
  for (const char* key : {"cls", "sep"}) {
    const auto v = ju::get<json>(j, key, source, item);
    if (!v.is_array() || v.size() != 2 || !v[0].is_string()) {
      ju::bad_field(source, item + "." + key, "expected [token, id]");
    }
    const int32_t id = checked_token_id(v[1], id_limit, source, item + "." + key, v[0].get<std::string>());
    (std::string(key) == "cls" ? pp.prefix : pp.suffix).push_back(id);
  }
}

void add(PostProcessor& pp, const json& j, const std::string& source, const std::string& item, int64_t id_limit) {
  const auto type = ju::get<std::string>(j, "type", source, item);
  if (type == "TemplateProcessing") {
    add_template(pp, j, source, item, id_limit);
  } else if (type == "ByteLevel") {
    // Offsets only; ids unchanged.
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    add_cls_sep(pp, j, source, item, id_limit);
  } else if (type == "Sequence") {
    const auto list = ju::get<json>(j, "processors", source, item);
    if (!list.is_array()) ju::bad_field(source, item + ".processors", "expected an array");
    // Each processor wraps the result of the previous ones.
    for (size_t k = 0; k < list.size(); ++k) {
      PostProcessor sub;
      add(sub, list[k], source, item + ".processors[" + std::to_string(k) + "]", id_limit);
      if (pp.prefix.size() + pp.suffix.size() + sub.prefix.size() + sub.suffix.size() > kMaxPostProcessorIds) {
        ju::bad_field(source, item + ".processors", "the processors put more than " +
                                                        std::to_string(kMaxPostProcessorIds) +
                                                        " special-token ids around a sequence (the limit)");
      }
      pp.prefix.insert(pp.prefix.begin(), sub.prefix.begin(), sub.prefix.end());
      pp.suffix.insert(pp.suffix.end(), sub.suffix.begin(), sub.suffix.end());
    }
  } else {
    ju::unsupported(source, item + ".type", "unsupported post_processor type \"" + type + "\"");
  }
}

}  // namespace

PostProcessor make_post_processor(const json& j, const std::string& source, const std::string& item,
                                  int64_t id_limit) {
  PostProcessor pp;
  if (j.is_null()) return pp;
  pp.present = true;
  add(pp, j, source, item, id_limit);
  return pp;
}

}  // namespace qloom::text
