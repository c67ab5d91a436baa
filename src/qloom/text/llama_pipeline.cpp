#include "qloom/text/llama_pipeline.h"

#include <cstdio>
#include <unordered_map>

#include "qloom/core/error.h"
#include "qloom/text/sentencepiece_model.h"
#include "qloom/text/tokenizer_limits.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

using nlohmann::json;

namespace {

const char* const kMetaspace = "\xE2\x96\x81";  // U+2581

std::string prepend_scheme_name(const TokenizerChoice& c) {
  if (!c.add_prefix_space) return "never";
  return c.legacy ? "always" : "first";
}

json llama_pre_tokenizer(const TokenizerChoice& c) {
  return {{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", prepend_scheme_name(c)},
          {"split", false}};
}

json llama_decoder(const TokenizerChoice& c) {
  json seq = json::array({{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
                          {{"type", "ByteFallback"}},
                          {{"type", "Fuse"}}});
  if (c.add_prefix_space) seq.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", seq}};
}

json llama_model(json vocab, json merges) {
  return {{"type", "BPE"},          {"dropout", nullptr},          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
          {"fuse_unk", true},       {"byte_fallback", true},       {"ignore_merges", false},
          {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
}

json added_token(const std::string& content, int64_t id, bool special) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", special}};
}

// Appends LlamaSpecials' tokens that `added` lacks: their vocab id, or the
// next id past the vocabulary and the added tokens (as add_tokens does).
void add_missing_specials(json& added, const json& vocab, const LlamaSpecials& s) {
  int64_t next = static_cast<int64_t>(vocab.size());
  for (const json& t : added) next = std::max(next, t["id"].get<int64_t>() + 1);
  std::vector<std::string> names;
  for (const auto* v : {&s.bos, &s.eos, &s.unk}) if (!v->empty()) names.push_back(*v);
  if (s.pad) names.push_back(*s.pad);
  names.insert(names.end(), s.extra.begin(), s.extra.end());
  for (const std::string& name : names) {
    bool have = false;
    for (const json& t : added) have = have || t["content"] == name;
    if (have) continue;
    auto it = vocab.find(name);
    added.push_back(added_token(name, it != vocab.end() ? it->get<int64_t>() : next++, true));
  }
}

// TemplateProcessing "[bos] $A [eos]" (pair: "... [bos] $B [eos]") as
// TokenizersBackend.update_post_processor writes it.
json bos_eos_template(const json& vocab, const json& added, const LlamaSpecials& s) {
  auto id_of = [&](const std::string& name) -> std::optional<int64_t> {
    for (const json& t : added) if (t["content"] == name) return t["id"].get<int64_t>();
    auto it = vocab.find(name);
    return it != vocab.end() ? std::optional<int64_t>(it->get<int64_t>()) : std::nullopt;
  };
  json single = json::array(), pair = json::array(), specials = json::object();
  auto special = [&](const std::string& name, int type_id, bool want, json& into) {
    const auto id = want && !name.empty() ? id_of(name) : std::nullopt;
    if (!id) return;
    into.push_back({{"SpecialToken", {{"id", name}, {"type_id", type_id}}}});
    specials[name] = {{"id", name}, {"ids", {*id}}, {"tokens", {name}}};
  };
  for (int part = 0; part < 2; ++part) {
    json& seq = part == 0 ? single : pair;
    for (int k = 0; k <= part; ++k) {
      special(s.bos, k, s.add_bos, seq);
      seq.push_back({{"Sequence", {{"id", k == 0 ? "A" : "B"}, {"type_id", k}}}});
      special(s.eos, k, s.add_eos, seq);
    }
  }
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

json assemble(json model, json added, json post, const TokenizerChoice& c) {
  json doc = json::object();
  doc["version"] = "1.0";
  doc["added_tokens"] = std::move(added);
  doc["normalizer"] = nullptr;
  doc["pre_tokenizer"] = llama_pre_tokenizer(c);
  doc["post_processor"] = std::move(post);
  doc["decoder"] = llama_decoder(c);
  doc["model"] = std::move(model);
  return doc;
}

// Every split of each piece into two pieces, by piece id then left length.
json generated_merges(const std::vector<std::string>& pieces, const json& vocab) {
  json merges = json::array();
  for (const std::string& piece : pieces) {
    size_t pos = 0;
    while (pos < piece.size()) {
      pos += utf8_len(static_cast<unsigned char>(piece[pos]));
      if (pos >= piece.size()) break;
      const std::string left = piece.substr(0, pos), right = piece.substr(pos);
      if (vocab.contains(left) && vocab.contains(right)) merges.push_back(json::array({left, right}));
    }
  }
  return merges;
}

std::string component_summary(const json& j) {
  if (j.is_null()) return "none";
  std::string type = j.value("type", std::string("?"));
  const char* list_key = j.contains("normalizers") ? "normalizers"
                         : j.contains("pretokenizers") ? "pretokenizers"
                         : j.contains("decoders") ? "decoders" : nullptr;
  if (!list_key || !j[list_key].is_array()) return type;
  std::string inner;
  for (const json& e : j[list_key]) inner += (inner.empty() ? "" : ", ") + component_summary(e);
  return type + ": " + inner;
}

bool has_all_byte_pieces(const json& vocab) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (!vocab.contains(name)) return false;
  }
  return true;
}

// "text", {"content": "text"} or null (nullopt); kInvalidInput otherwise.
std::optional<std::string> token_content(const json& v, const std::string& file, const std::string& item) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw_invalid(file, item, "expected a string or an object with \"content\"");
}

json parse_added_tokens_decoder(const json& dec, const std::string& file) {
  json out = json::array();
  if (dec.is_null()) return out;
  if (!dec.is_object()) throw_invalid(file, "added_tokens_decoder", "expected an object of id -> token");
  for (auto it = dec.begin(); it != dec.end(); ++it) {
    const std::string item = "added_tokens_decoder." + it.key();
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 9 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw_invalid(file, item, "the key is not a token id (a whole number from 0)");
    const int64_t id = std::stoll(key);
    if (id >= kMaxTokenId) {
      throw_invalid(file, item, "token id " + key + " is beyond the limit of " + std::to_string(kMaxTokenId),
                    "the file is damaged or hostile");
    }
    const json& t = it.value();
    const auto content = token_content(t, file, item);
    if (!content) throw_invalid(file, item, "expected a token");
    auto flag = [&](const char* key, bool dflt) {
      if (!t.is_object() || !t.contains(key) || t[key].is_null()) return dflt;
      if (!t[key].is_boolean()) throw_invalid(file, item + "." + key, "expected true or false");
      return t[key].get<bool>();
    };
    const bool special = flag("special", false);
    out.push_back({{"id", id}, {"content", *content}, {"single_word", flag("single_word", false)},
                   {"lstrip", flag("lstrip", false)}, {"rstrip", flag("rstrip", false)},
                   {"normalized", flag("normalized", !special)}, {"special", special}});
  }
  return out;
}

}  // namespace

LlamaSpecials llama_specials(const json& cfg, const std::string& file) {
  LlamaSpecials s;
  auto named = [&](const char* key, std::string& into) {
    if (!cfg.contains(key)) return;
    into = token_content(cfg[key], file, key).value_or("");
  };
  named("bos_token", s.bos);
  named("eos_token", s.eos);
  named("unk_token", s.unk);
  if (cfg.contains("pad_token")) s.pad = token_content(cfg["pad_token"], file, "pad_token");
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
    if (!cfg.contains(key) || cfg[key].is_null()) continue;
    const json& list = cfg[key];
    if (!list.is_array() && !list.is_object()) throw_invalid(file, key, "expected a list of tokens");
    for (const json& v : list) {
      if (auto t = token_content(v, file, key)) s.extra.push_back(*t);
    }
  }
  s.added = parse_added_tokens_decoder(cfg.contains("added_tokens_decoder") ? cfg["added_tokens_decoder"] : json(),
                                       file);
  for (auto [key, into] : {std::pair{"add_bos_token", &s.add_bos}, std::pair{"add_eos_token", &s.add_eos}}) {
    if (!cfg.contains(key) || cfg[key].is_null()) continue;
    if (!cfg[key].is_boolean()) throw_invalid(file, key, "expected true or false");
    *into = cfg[key].get<bool>();
  }
  return s;
}

json llama_pipeline_from_json(const json& doc, const TokenizerChoice& c, const LlamaSpecials& s,
                              const std::string& source) {
  const json& model = doc.contains("model") ? doc["model"] : json();
  if (!model.is_object() || !model.contains("vocab") || !model["vocab"].is_object()) {
    throw_invalid(source, "model.vocab", "expected an object of token -> id");
  }
  if (model.value("type", std::string("BPE")) != "BPE") {
    throw Error(ErrorKind::kUnsupported, source, "model.type",
                "tokenizer_class LlamaTokenizer needs a BPE model, not " + model.value("type", std::string()),
                "set tokenizer_class in tokenizer_config.json to the class the model was saved with");
  }
  json added = s.added;
  add_missing_specials(added, model["vocab"], s);
  json post = doc.contains("post_processor") ? doc["post_processor"] : json();
  return assemble(llama_model(model["vocab"], model.value("merges", json::array())), std::move(added),
                  std::move(post), c);
}

json llama_pipeline_from_sentencepiece(const SentencePieceModel& sp, const TokenizerChoice& c,
                                       const LlamaSpecials& s) {
  json vocab = json::object();
  std::vector<std::string> pieces;
  pieces.reserve(static_cast<size_t>(sp.vocab_size()));
  for (int32_t id = 0; id < sp.vocab_size(); ++id) {
    pieces.push_back(*sp.id_to_piece(id));
    if (pieces.back().size() > kMaxSpmPieceBytes) {
      // generated_merges costs the square of a piece's length.
      throw_invalid(c.file.string(), "pieces[" + std::to_string(id) + "]",
                    "piece " + shown_token(pieces.back()) + " is longer than the limit of " +
                        std::to_string(kMaxSpmPieceBytes) + " bytes",
                    "sentencepiece pieces are short; the file is damaged or hostile");
    }
    vocab[pieces.back()] = id;
  }
  json added = json::array();
  for (int32_t id = 0; id < sp.vocab_size(); ++id) {
    if (sp.is_control(id) || sp.is_user_defined(id)) added.push_back(added_token(pieces[id], id, sp.is_control(id)));
  }
  for (const json& t : s.added) added.push_back(t);
  add_missing_specials(added, vocab, s);
  json post = bos_eos_template(vocab, added, s);
  json merges = generated_merges(pieces, vocab);
  return assemble(llama_model(std::move(vocab), std::move(merges)), std::move(added), std::move(post), c);
}

std::vector<std::string> llama_replaced_components(const json& doc, const json& llama) {
  std::vector<std::string> out;
  for (const char* key : {"normalizer", "pre_tokenizer", "decoder"}) {
    const json mine = doc.contains(key) ? doc[key] : json();
    if (mine != llama[key]) out.push_back(std::string(key) + " (" + component_summary(mine) + ")");
  }
  const json& model = doc["model"];
  std::string options;
  for (const char* key : {"fuse_unk", "byte_fallback", "ignore_merges", "continuing_subword_prefix",
                          "end_of_word_suffix", "unk_token"}) {
    const json mine = model.contains(key) ? model[key] : json();
    const json want = llama["model"][key];
    const bool same = mine == want || (mine.is_null() && want == false) || (mine == "" && want.is_null());
    // unk_token matters only where a byte piece is missing (byte_fallback covers the rest).
    if (std::string(key) == "unk_token" && has_all_byte_pieces(model["vocab"])) continue;
    if (!same) options += (options.empty() ? "" : ", ") + std::string(key) + " " + mine.dump();
  }
  if (!options.empty()) out.push_back("model options (" + options + ")");
  return out;
}

}  // namespace qloom::text
