#include "qloom/export/gguf_metadata.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/json_read.h"
#include "qloom/io/text_file.h"

namespace qloom::exporter {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// The two Split regexes llama.cpp names (llama-3's and qwen2's byte-level
// pre-tokenizers), as tokenizer.json spells them.
constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string str_or(const json& j, const char* key, const std::string& fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

[[noreturn]] void gguf_unsupported(const fs::path& file, const std::string& item, const std::string& what) {
  throw Error(ErrorKind::kUnsupported, file.string(), item, what,
              "GGUF export supports byte-level BPE (gpt2) and SentencePiece-style BPE (llama) tokenizers");
}

bool is_byte_level(const json& p) { return p.is_object() && str_or(p, "type", "") == "ByteLevel"; }

// llama.cpp's pre-tokenizer name for a byte-level tokenizer.json pre_tokenizer.
std::string byte_level_pre(const json& pre, const fs::path& file) {
  if (is_byte_level(pre) && pre.value("use_regex", true)) return "gpt-2";
  if (pre.is_object() && str_or(pre, "type", "") == "Sequence" && pre.contains("pretokenizers")) {
    const json& s = pre["pretokenizers"];
    if (s.size() == 2 && str_or(s[0], "type", "") == "Digits" && s[0].value("individual_digits", false) &&
        is_byte_level(s[1]) && s[1].value("use_regex", true))
      return "smollm";
    if (s.size() == 2 && str_or(s[0], "type", "") == "Split" && is_byte_level(s[1]) && !s[1].value("use_regex", true)) {
      const std::string re = s[0].contains("pattern") ? str_or(s[0]["pattern"], "Regex", "") : "";
      if (re == kLlama3Split) return "llama-bpe";
      if (re == kQwen2Split) return "qwen2";
    }
  }
  gguf_unsupported(file, "pre_tokenizer", "byte-level pre-tokenizer " + pre.dump() + " has no llama.cpp name qloom maps");
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<bool> present;
};

Vocab read_vocab(const json& tj, int64_t vocab_size, const fs::path& file) {
  const json& v = tj["model"]["vocab"];
  if (!v.is_object()) throw_invalid(file.string(), "model.vocab", "is not an object of token -> id");
  int64_t n = vocab_size;
  for (const auto& [tok, id] : v.items())
    if (id.is_number_integer()) n = std::max<int64_t>(n, id.get<int64_t>() + 1);
  for (const auto& a : tj.value("added_tokens", json::array())) n = std::max<int64_t>(n, a.value("id", int64_t{0}) + 1);
  Vocab out;
  out.tokens.resize(n);
  out.types.assign(n, kNormal);
  out.present.assign(n, false);
  for (const auto& [tok, id] : v.items()) {
    const int64_t i = id.get<int64_t>();
    if (i < 0) throw_invalid(file.string(), "model.vocab", "negative id for '" + tok + "'");
    out.tokens[i] = tok, out.present[i] = true;
  }
  for (const auto& a : tj.value("added_tokens", json::array())) {
    const int64_t i = a.value("id", int64_t{-1});
    if (i < 0) continue;
    out.tokens[i] = a.value("content", std::string());
    out.present[i] = true;
    out.types[i] = a.value("special", false) ? kControl : kUserDefined;
  }
  for (int64_t i = 0; i < n; ++i)
    if (!out.present[i]) out.tokens[i] = "[PAD" + std::to_string(i) + "]", out.types[i] = kUnused;
  return out;
}

std::vector<std::string> read_merges(const json& tj, const fs::path& file) {
  std::vector<std::string> out;
  for (const auto& m : tj["model"].value("merges", json::array())) {
    if (m.is_string()) out.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
      out.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else throw_invalid(file.string(), "model.merges", "an entry is neither \"a b\" nor [\"a\", \"b\"]");
  }
  return out;
}

// SentencePiece-style scores from the merge order (see the header).
std::vector<float> merge_scores(const Vocab& v, const std::vector<std::string>& merges) {
  std::unordered_map<std::string, size_t> rank;
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t sp = merges[r].find(' ');
    std::string merged = merges[r].substr(0, sp) + merges[r].substr(sp + 1);
    rank.emplace(std::move(merged), r);
  }
  std::vector<float> s(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != kNormal) continue;
    const auto it = rank.find(v.tokens[i]);
    s[i] = -static_cast<float>(it != rank.end() ? it->second : merges.size() + i);
  }
  return s;
}

bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.starts_with("<0x") && t.back() == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
         std::isxdigit(static_cast<unsigned char>(t[4]));
}

// Whether the post-processor's single-sequence template starts (front) or
// ends (!front) with a special token.
bool template_adds(const json& tj, bool front) {
  const auto it = tj.find("post_processor");
  if (it == tj.end() || !it->is_object() || str_or(*it, "type", "") != "TemplateProcessing") return false;
  const json& single = it->value("single", json::array());
  if (single.empty()) return false;
  return (front ? single.front() : single.back()).contains("SpecialToken");
}

std::optional<int64_t> token_id_of(const json& tc, const char* key, const Vocab& v) {
  const auto it = tc.find(key);
  if (it == tc.end()) return std::nullopt;
  const std::string s = it->is_string() ? it->get<std::string>() : it->is_object() ? str_or(*it, "content", "") : "";
  if (s.empty()) return std::nullopt;
  const auto pos = std::find(v.tokens.begin(), v.tokens.end(), s);
  if (pos == v.tokens.end()) return std::nullopt;
  return pos - v.tokens.begin();
}

std::optional<int64_t> config_id(const json& raw, const char* key) {
  const auto it = raw.find(key);
  if (it == raw.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) return (*it)[0].get<int64_t>();
  return std::nullopt;
}

void add_special_ids(io::GgufWriter& w, const json& raw, const json& tc, const json& tj, const Vocab& v) {
  const struct {
    const char* config_key;
    const char* tc_key;
    const char* gguf;
  } ids[] = {{"bos_token_id", "bos_token", "tokenizer.ggml.bos_token_id"},
             {"eos_token_id", "eos_token", "tokenizer.ggml.eos_token_id"},
             {"unk_token_id", "unk_token", "tokenizer.ggml.unknown_token_id"},
             {"pad_token_id", "pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& k : ids) {
    std::optional<int64_t> id = config_id(raw, k.config_key);
    if (!id) id = token_id_of(tc, k.tc_key, v);
    if (id && *id >= 0 && *id < static_cast<int64_t>(v.tokens.size())) w.add_u32(k.gguf, static_cast<uint32_t>(*id));
  }
  const bool add_bos = tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean() ? tc["add_bos_token"].get<bool>()
                                                                                       : template_adds(tj, true);
  const bool add_eos = tc.contains("add_eos_token") && tc["add_eos_token"].is_boolean() ? tc["add_eos_token"].get<bool>()
                                                                                       : template_adds(tj, false);
  w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
  w.add_bool("tokenizer.ggml.add_eos_token", add_eos);
}

std::optional<std::string> chat_template(const fs::path& dir, const json& tc) {
  if (fs::is_regular_file(dir / "chat_template.jinja")) return io::read_text_file(dir / "chat_template.jinja");
  const auto it = tc.find("chat_template");
  if (it != tc.end() && it->is_string()) return it->get<std::string>();
  return std::nullopt;
}

void add_gpt2_vocab(io::GgufWriter& w, const json& tj, Vocab v, const fs::path& file, std::vector<std::string>& warnings) {
  if (tj.contains("normalizer") && !tj["normalizer"].is_null())
    warnings.push_back("tokenizer.json normalizer " + tj["normalizer"].dump() + " is not applied by llama.cpp's gpt2 tokenizer");
  const std::string pre = byte_level_pre(tj["pre_tokenizer"], file);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add("tokenizer.ggml.tokens", io::gguf_string_array(v.tokens));
  w.add("tokenizer.ggml.token_type", io::gguf_i32_array(v.types));
  w.add("tokenizer.ggml.merges", io::gguf_string_array(read_merges(tj, file)));
}

void add_llama_vocab(io::GgufWriter& w, const json& tj, Vocab v, const fs::path& file, std::vector<std::string>& warnings) {
  const json& pre = tj["pre_tokenizer"];
  const std::string scheme = str_or(pre, "prepend_scheme", pre.value("add_prefix_space", true) ? "always" : "never");
  if (str_or(pre, "replacement", "\xe2\x96\x81") != "\xe2\x96\x81")
    gguf_unsupported(file, "pre_tokenizer.replacement", "a Metaspace replacement other than U+2581");
  const json& norm = tj.contains("normalizer") ? tj["normalizer"] : json();
  if (!norm.is_null())
    warnings.push_back("tokenizer.json normalizer " + norm.dump() +
                       " is not applied by llama.cpp's SentencePiece tokenizer (it only adds the space prefix)");
  const std::string unk = str_or(tj["model"], "unk_token", "");
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == unk) v.types[i] = kUnknown;  // SentencePiece's own type, also when an added token
    else if (v.types[i] == kNormal && is_byte_token(v.tokens[i])) v.types[i] = kByte;
  }
  const std::vector<std::string> merges = read_merges(tj, file);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add("tokenizer.ggml.tokens", io::gguf_string_array(v.tokens));
  w.add("tokenizer.ggml.scores", io::gguf_f32_array(merge_scores(v, merges)));
  w.add("tokenizer.ggml.token_type", io::gguf_i32_array(v.types));
  w.add("tokenizer.ggml.merges", io::gguf_string_array(merges));
  w.add_bool("tokenizer.ggml.add_space_prefix", scheme != "never");
}

}  // namespace

void add_llama_metadata(io::GgufWriter& w, const model::ModelConfig& cfg, const std::string& name, uint32_t file_type,
                        const std::string& config_file) {
  w.add_string("general.architecture", "llama");
  w.add_string("general.type", "model");
  w.add_string("general.name", name);
  w.add_u32("llama.block_count", static_cast<uint32_t>(cfg.num_layers));
  w.add_u32("llama.context_length", static_cast<uint32_t>(cfg.max_position_embeddings));
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(cfg.hidden_size));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(cfg.intermediate_size));
  w.add_u32("llama.attention.head_count", static_cast<uint32_t>(cfg.num_heads));
  w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(cfg.num_kv_heads));
  w.add_f32("llama.rope.freq_base", static_cast<float>(cfg.rope.theta));
  w.add_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(cfg.rms_norm_eps));
  if (cfg.raw.contains("head_dim") && cfg.raw["head_dim"].is_number_integer()) {
    w.add_u32("llama.attention.key_length", static_cast<uint32_t>(cfg.head_dim));
    w.add_u32("llama.attention.value_length", static_cast<uint32_t>(cfg.head_dim));
  }
  w.add_u32("general.file_type", file_type);
  w.add_u32("llama.vocab_size", static_cast<uint32_t>(cfg.vocab_size));
  w.add_u32("llama.rope.dimension_count", static_cast<uint32_t>(cfg.head_dim * cfg.partial_rotary_factor));
  if (cfg.rope.type == "linear") {
    w.add_string("llama.rope.scaling.type", "linear");
    w.add_f32("llama.rope.scaling.factor", static_cast<float>(cfg.rope.factor));
  } else if (cfg.rope.type != "default") {
    throw Error(ErrorKind::kUnsupported, config_file, "rope_scaling",
                "rope scaling type '" + cfg.rope.type + "' is not written to GGUF by qloom",
                "export a model with default or linear RoPE");
  }
  w.add_u32("general.quantization_version", 2);
}

void add_tokenizer_metadata(io::GgufWriter& w, const fs::path& model_dir, const model::ModelConfig& cfg,
                            std::vector<std::string>& warnings) {
  const fs::path file = model_dir / "tokenizer.json";
  if (!fs::is_regular_file(file))
    throw Error(ErrorKind::kNotFound, file.string(), "", "the checkpoint has no tokenizer.json; GGUF carries the tokenizer",
                "copy the source model's tokenizer.json into the checkpoint");
  const json tj = io::read_json_file(file);
  const json tc = fs::is_regular_file(model_dir / "tokenizer_config.json")
                      ? io::read_json_file(model_dir / "tokenizer_config.json") : json::object();
  if (!tj.contains("model") || str_or(tj["model"], "type", "") != "BPE")
    gguf_unsupported(file, "model.type", "tokenizer model '" + (tj.contains("model") ? str_or(tj["model"], "type", "") : "") +
                                        "' (only BPE tokenizers map to GGUF's gpt2 / llama vocabularies)");
  Vocab v = read_vocab(tj, cfg.vocab_size, file);
  const json& pre = tj.contains("pre_tokenizer") ? tj["pre_tokenizer"] : json();
  if (pre.is_object() && str_or(pre, "type", "") == "Metaspace" && tj["model"].value("byte_fallback", false))
    add_llama_vocab(w, tj, std::move(v), file, warnings);
  else if (is_byte_level(tj.value("decoder", json())))
    add_gpt2_vocab(w, tj, std::move(v), file, warnings);
  else
    gguf_unsupported(file, "pre_tokenizer", "neither byte-level BPE nor Metaspace BPE with byte fallback");
  add_special_ids(w, cfg.raw, tc, tj, read_vocab(tj, cfg.vocab_size, file));
  if (const auto t = chat_template(model_dir, tc)) w.add_string("tokenizer.chat_template", *t);
}

}  // namespace qloom::exporter
