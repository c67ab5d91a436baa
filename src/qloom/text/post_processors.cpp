#include "qloom/text/post_processors.h"

#include "qloom/text/json_util.h"

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

void add_template(PostProcessor& pp, const json& j, const std::string& source, const std::string& item) {
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
      const auto ids = ju::get<std::vector<int32_t>>(specials[name], "ids", source,
                                                     item + ".special_tokens." + name);
      auto& dst = seen_sequence ? pp.suffix : pp.prefix;
      dst.insert(dst.end(), ids.begin(), ids.end());
    } else {
      ju::bad_field(source, at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
}

// RobertaProcessing / BertProcessing: "cls": [token, id], "sep": [token, id].
void add_cls_sep(PostProcessor& pp, const json& j, const std::string& source, const std::string& item) {
  for (const char* key : {"cls", "sep"}) {
    const auto v = ju::get<json>(j, key, source, item);
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) {
      ju::bad_field(source, item + "." + key, "expected [token, id]");
    }
    (std::string(key) == "cls" ? pp.prefix : pp.suffix).push_back(v[1].get<int32_t>());
  }
}

void add(PostProcessor& pp, const json& j, const std::string& source, const std::string& item) {
  const auto type = ju::get<std::string>(j, "type", source, item);
  if (type == "TemplateProcessing") {
    add_template(pp, j, source, item);
  } else if (type == "ByteLevel") {
    // Offsets only; ids unchanged.
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    add_cls_sep(pp, j, source, item);
  } else if (type == "Sequence") {
    const auto list = ju::get<json>(j, "processors", source, item);
    if (!list.is_array()) ju::bad_field(source, item + ".processors", "expected an array");
    // Each processor wraps the result of the previous ones.
    for (size_t k = 0; k < list.size(); ++k) {
      PostProcessor sub;
      add(sub, list[k], source, item + ".processors[" + std::to_string(k) + "]");
      pp.prefix.insert(pp.prefix.begin(), sub.prefix.begin(), sub.prefix.end());
      pp.suffix.insert(pp.suffix.end(), sub.suffix.begin(), sub.suffix.end());
    }
  } else {
    ju::unsupported(source, item + ".type", "unsupported post_processor type \"" + type + "\"");
  }
}

}  // namespace

PostProcessor make_post_processor(const json& j, const std::string& source, const std::string& item) {
  PostProcessor pp;
  if (j.is_null()) return pp;
  pp.present = true;
  add(pp, j, source, item);
  return pp;
}

}  // namespace qloom::text
