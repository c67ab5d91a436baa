// Auxiliary JSON files compared semantically (drift.h): what transformers
// changes when it re-saves tokenizer_config.json, generation_config.json and
// the other JSON files beside a model.
#include <map>
#include <set>
#include <string>

#include "qloom/validate/drift.h"

namespace qloom::validate {

namespace {

using json = nlohmann::json;

std::optional<json> tokenizer_key(const json& j, const std::string& k) {
  const auto it = j.find(k);
  if (it == j.end()) return std::nullopt;
  return *it;
}

// Keys written about the saving run, not the tokenizer.
const std::set<std::string>& tokenizer_metadata_keys() {
  static const std::set<std::string> k = {"transformers_version", "is_local", "local_files_only",
                                          "name_or_path", "_commit_hash"};
  return k;
}

// What transformers assumes for a tokenizer_config.json key it does not find
// (PreTrainedTokenizerBase and the tokenizers backend of 4.x and 5.x).
const std::map<std::string, json>& tokenizer_defaults() {
  static const std::map<std::string, json> t = {
      {"add_prefix_space", nullptr},
      {"add_eos_token", false},
      {"additional_special_tokens", json::array()},
      {"extra_special_tokens", json::object()},
      {"backend", "tokenizers"},
      {"clean_up_tokenization_spaces", false},
      {"errors", "replace"},
      {"model_input_names", {"input_ids", "attention_mask"}},
      {"model_max_length", json::parse("1000000000000000019884624838656")},
      {"pad_token", nullptr},
      {"padding_side", "right"},
      {"truncation_side", "right"},
      {"sp_model_kwargs", json::object()},
      {"split_special_tokens", false},
      {"use_default_system_prompt", false},
  };
  return t;
}

// Keys transformers 5 takes from tokenizer.json (its post_processor and
// added_tokens) and no longer writes.
const std::set<std::string>& superseded_keys() {
  static const std::set<std::string> k = {"add_bos_token", "add_eos_token", "legacy",
                                          "added_tokens_decoder"};
  return k;
}

bool special_token_key(const std::string& k) {
  return k.size() > 6 && k.compare(k.size() - 6, 6, "_token") == 0 && k != "add_bos_token" &&
         k != "add_eos_token";
}

// {"content": "<s>", "__type": "AddedToken", ...} is "<s>".
json token_text(const json& v) {
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  return v;
}

// An added_tokens_decoder entry with its default flags filled in.
json full_added_token(json t) {
  if (!t.is_object()) return t;
  t.erase("__type");
  for (const char* k : {"lstrip", "rstrip", "single_word", "special"})
    if (!t.contains(k)) t[k] = false;
  if (!t.contains("normalized")) t["normalized"] = !(t["special"].is_boolean() && t["special"].get<bool>());
  return t;
}

json full_decoder(const json& d) {
  if (!d.is_object()) return d;
  json out = json::object();
  for (auto it = d.begin(); it != d.end(); ++it) out[it.key()] = full_added_token(*it);
  return out;
}

// "LlamaTokenizerFast" is "LlamaTokenizer"; the generic tokenizers classes
// of 4.x and 5.x are one.
std::string class_family(std::string c) {
  if (c == "PreTrainedTokenizerFast" || c == "TokenizersBackend") return "<tokenizers>";
  if (c.size() > 4 && c.compare(c.size() - 4, 4, "Fast") == 0) c.resize(c.size() - 4);
  return c;
}

void take_equivalent_forms(json& s, json& q, Comparison& out) {
  std::set<std::string> keys;
  for (auto it = s.begin(); it != s.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    if (!q.contains(k) || s[k] == q[k]) continue;
    json sn = s[k], qn = q[k];
    std::string note;
    if (special_token_key(k)) {
      sn = token_text(sn), qn = token_text(qn), note = "the same token, as a string or an AddedToken";
    } else if (k == "added_tokens_decoder") {
      sn = full_decoder(sn), qn = full_decoder(qn), note = "the same tokens once default flags are filled in";
    } else if (k == "tokenizer_class" && sn.is_string() && qn.is_string()) {
      if (class_family(sn.get<std::string>()) == class_family(qn.get<std::string>())) qn = sn;
      note = "the slow and fast (tokenizers) class of one tokenizer";
    }
    if (note.empty()) continue;
    if (sn != qn) {  // a real difference: compared in the normalised form, flag by flag
      if (k != "tokenizer_class") s[k] = sn, q[k] = qn;
      continue;
    }
    out.drift.push_back({k, "equivalent", s[k], q[k], note});
    s.erase(k);
    q.erase(k);
  }
}

void take_one_sided(json& s, json& q, bool same_tokenizer_json, Comparison& out) {
  std::set<std::string> keys;
  for (auto it = s.begin(); it != s.end(); ++it) keys.insert(it.key());
  for (auto it = q.begin(); it != q.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    const auto sv = tokenizer_key(s, k), qv = tokenizer_key(q, k);
    if (sv && qv) continue;
    const json& present = sv ? *sv : *qv;
    const auto d = tokenizer_defaults().find(k);
    if (d != tokenizer_defaults().end() && d->second == present) {
      out.drift.push_back({k, "default", sv, qv, "transformers' default, what the side without it loads"});
    } else if (sv && same_tokenizer_json && superseded_keys().count(k)) {
      out.drift.push_back({k, "superseded", sv, qv,
                           "not written by transformers 5; the identical tokenizer.json carries it"});
    } else {
      continue;
    }
    s.erase(k);
    q.erase(k);
  }
}

void take_tokenizer_metadata(json& s, json& q, const std::set<std::string>& keys, Comparison& out) {
  for (const auto& k : keys) {
    const auto sv = tokenizer_key(s, k), qv = tokenizer_key(q, k);
    if (sv != qv) out.drift.push_back({k, "metadata", sv, qv, "about the saving run, not the tokenizer"});
    s.erase(k);
    q.erase(k);
  }
}

}  // namespace

Comparison compare_json_files(const std::string& name, const json& source, const json& quantized,
                              bool same_tokenizer_json) {
  Comparison out;
  if (source == quantized) {
    out.drift.push_back({"(whole file)", "reserialised", std::nullopt, std::nullopt,
                         "equal as JSON: only key order, spacing or number spelling differ"});
    return out;
  }
  if (!source.is_object() || !quantized.is_object()) {
    out.real = json_differences(source, quantized);
    return out;
  }
  json s = source, q = quantized;
  if (name == "tokenizer_config.json") {
    take_tokenizer_metadata(s, q, tokenizer_metadata_keys(), out);
    take_equivalent_forms(s, q, out);
    take_one_sided(s, q, same_tokenizer_json, out);
  } else {
    take_tokenizer_metadata(s, q, {"transformers_version"}, out);
  }
  out.real = json_differences(s, q);
  return out;
}

}  // namespace qloom::validate
