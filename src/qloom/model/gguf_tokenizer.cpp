#include "qloom/model/gguf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"

namespace qloom::model {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kControl = 3, kUserDefined = 4;

// The byte-level pre-tokenizer splits of the tokenizer.ggml.pre names
// transformers maps (others get ByteLevel's own split, as in transformers).
constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::map<std::string, const char*, std::less<>> kSplits = {
    {"llama3", kLlama3Split}, {"llama-v3", kLlama3Split}, {"llama-bpe", kLlama3Split},
    {"falcon3", kLlama3Split}, {"falcon-h1", kLlama3Split}, {"pixtral", kLlama3Split},
    {"midm-2.0", kLlama3Split}, {"lfm2", kLlama3Split}, {"jina-v5-nano", kLlama3Split},
    {"dbrx", kLlama3Split}, {"smaug-bpe", kLlama3Split}, {"qwen2", kQwen2Split},
    {"deepseek-r1-qwen", kQwen2Split}, {"kormo", kQwen2Split}, {"f2llmv2", kQwen2Split},
    {"megrez", kQwen2Split}};
// Names transformers splits with patterns qloom does not carry.
const char* const kUnmappedSplits[] = {"tekken", "qwen35", "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"};

// ---- UTF-8 -----------------------------------------------------------------

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
  }
}

// Code points of valid UTF-8; nullopt otherwise.
std::optional<std::vector<uint32_t>> decode_utf8(std::string_view s) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return std::nullopt;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 2) return std::nullopt;
      cp = (cp << 6) | (c & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    cps.push_back(cp);
    i += n;
  }
  return cps;
}

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the
// other 68 bytes for U+0100 onwards, in byte order.
std::vector<uint32_t> byte_alphabet() {
  std::vector<uint32_t> map(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    map[b] = printable ? b : next++;
  }
  return map;
}

// ---- reading the file ------------------------------------------------------

struct Vocab {
  std::vector<std::string> tokens;  // as the file spells them
  std::vector<int64_t> types;       // empty when the file has none
  std::string model;                // tokenizer.ggml.model
  std::string file;
};

Vocab read_vocab(const io::GgufFile& f) {
  Vocab v;
  v.file = f.path().string();
  if (!f.has("tokenizer.ggml.model"))
    throw_invalid(v.file, "tokenizer.ggml.model", "missing: the GGUF has no tokenizer",
                  "use a GGUF that embeds its tokenizer (llama.cpp's converter writes one)");
  v.model = f.get_string("tokenizer.ggml.model");
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (v.tokens.empty()) throw_invalid(v.file, "tokenizer.ggml.tokens", "is empty");
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (!decode_utf8(v.tokens[i]))
      throw_invalid(v.file, "tokenizer.ggml.tokens", "token " + std::to_string(i) + " is not valid UTF-8");
  if (f.has("tokenizer.ggml.token_type")) {
    v.types = f.get_int_array("tokenizer.ggml.token_type");
    if (v.types.size() != v.tokens.size())
      throw_invalid(v.file, "tokenizer.ggml.token_type", "has " + std::to_string(v.types.size()) +
                                                             " entries for " + std::to_string(v.tokens.size()) + " tokens");
  }
  return v;
}

std::optional<std::string> special_token(const io::GgufFile& f, const Vocab& v, const char* key) {
  const std::string k = std::string("tokenizer.ggml.") + key;
  if (!f.has(k)) return std::nullopt;
  const uint64_t id = f.get_uint(k);
  if (id >= v.tokens.size()) throw_invalid(v.file, k, "is " + std::to_string(id) + ", past the vocabulary");
  return v.tokens[id];
}

// ---- vocab and merges ------------------------------------------------------

// {token: id}; a repeated token keeps its last id, as a Python dict does.
using VocabMap = std::unordered_map<std::string, int64_t>;

VocabMap vocab_map(const std::vector<std::string>& tokens) {
  VocabMap m;
  for (size_t i = 0; i < tokens.size(); ++i) m[tokens[i]] = int64_t(i);
  return m;
}

ojson vocab_json(const VocabMap& m) {
  std::vector<std::pair<int64_t, const std::string*>> byid;
  for (const auto& [t, id] : m) byid.emplace_back(id, &t);
  std::sort(byid.begin(), byid.end());
  ojson j = ojson::object();
  for (const auto& [id, t] : byid) j[*t] = id;
  return j;
}

std::vector<std::pair<std::string, std::string>> file_merges(const io::GgufFile& f, const std::string& file) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : f.get_string_array("tokenizer.ggml.merges")) {
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos)
      throw_invalid(file, "tokenizer.ggml.merges", "entry '" + m + "' is not two tokens separated by one space");
    out.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return out;
}

// Merges implied by a scored vocabulary: every split of a token into two
// tokens of the vocabulary, best score first (then longer left, longer right
// part; ties keep vocabulary order, each token's splits by ascending ids).
std::vector<std::pair<std::string, std::string>> merges_from_scores(const Vocab& v, const std::vector<double>& scores) {
  const VocabMap vocab = vocab_map(v.tokens);
  struct Merge {
    std::string l, r;
    double score;
    size_t len_l, len_r;
  };
  std::vector<Merge> all;
  // dict(zip(tokens, scores)): first position, last score.
  std::unordered_map<std::string, double> last_score;
  for (size_t i = 0; i < v.tokens.size(); ++i) last_score[v.tokens[i]] = scores[i];
  std::unordered_map<std::string, bool> seen;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& tok = v.tokens[i];
    if (seen.count(tok)) continue;
    seen[tok] = true;
    const double score = last_score.at(tok);
    const auto cps = *decode_utf8(tok);
    std::vector<Merge> local;
    std::string left;
    for (size_t c = 0; c + 1 < cps.size(); ++c) {
      append_utf8(left, cps[c]);
      const std::string right = tok.substr(left.size());
      if (vocab.count(left) && vocab.count(right)) local.push_back({left, right, score, c + 1, cps.size() - c - 1});
    }
    std::stable_sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      return std::pair(vocab.at(a.l), vocab.at(a.r)) < std::pair(vocab.at(b.l), vocab.at(b.r));
    });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.len_l != b.len_l) return a.len_l > b.len_l;
    return a.len_r > b.len_r;
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(all.size());
  for (auto& m : all) out.emplace_back(std::move(m.l), std::move(m.r));
  return out;
}

ojson merges_json(const std::vector<std::pair<std::string, std::string>>& merges) {
  ojson j = ojson::array();
  for (const auto& [l, r] : merges) j.push_back(ojson::array({l, r}));
  return j;
}

// ---- the pieces of tokenizer.json -------------------------------------------

ojson added_token(int64_t id, const std::string& content, bool special) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

struct Specials {
  std::optional<std::string> bos, eos, unk, pad;
  bool add_bos = false, add_eos = false;
};

ojson added_tokens(const Vocab& v, const VocabMap& vocab, const Specials& s, bool byte_level) {
  const auto alphabet = byte_alphabet();
  auto spelled = [&](const std::string& t) {
    const auto cps = decode_utf8(t);
    for (uint32_t cp : *cps)
      if (std::find(alphabet.begin(), alphabet.end(), cp) == alphabet.end()) return false;
    return true;
  };
  std::map<int64_t, ojson> byid;
  auto add = [&](const std::string& content, bool special, const char* what) {
    const auto it = vocab.find(content);
    if (it == vocab.end())
      throw Error(ErrorKind::kUnsupported, v.file, what,
                  "token '" + content + "' is not in the vocabulary as spelled; transformers would append it");
    if (!byid.count(it->second)) byid[it->second] = added_token(it->second, content, special);
  };
  for (size_t i = 0; i < v.types.size(); ++i)
    if (v.types[i] == kControl && (!byte_level || spelled(v.tokens[i]))) add(v.tokens[i], true, "tokenizer.ggml.token_type");
  for (const auto* t : {&s.bos, &s.eos, &s.unk, &s.pad})
    if (*t) add(**t, true, "tokenizer.ggml.*_token_id");
  for (size_t i = 0; i < v.types.size(); ++i)
    if (v.types[i] == kUserDefined && vocab.count(v.tokens[i]) && !byid.count(vocab.at(v.tokens[i])))
      byid[vocab.at(v.tokens[i])] = added_token(vocab.at(v.tokens[i]), v.tokens[i], false);
  ojson out = ojson::array();
  for (auto& [id, t] : byid) out.push_back(std::move(t));
  return out;
}

ojson template_processing(const Specials& s, const VocabMap& vocab) {
  auto special = [](const std::string& t, int type) { return ojson{{"SpecialToken", {{"id", t}, {"type_id", type}}}}; };
  auto seq = [](const char* id, int type) { return ojson{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
  const bool bos = s.add_bos && s.bos, eos = s.add_eos && s.eos;
  ojson single = ojson::array(), pair = ojson::array();
  if (bos) single.push_back(special(*s.bos, 0));
  single.push_back(seq("A", 0));
  if (eos) single.push_back(special(*s.eos, 0));
  pair = single;
  if (bos) pair.push_back(special(*s.bos, 1));
  pair.push_back(seq("B", 1));
  if (eos) pair.push_back(special(*s.eos, 1));
  std::map<std::string, ojson> specials;
  for (const auto& [on, tok] : {std::pair(bos, s.bos), std::pair(eos, s.eos)})
    if (on) specials[*tok] = {{"id", *tok}, {"ids", ojson::array({vocab.at(*tok)})}, {"tokens", ojson::array({*tok})}};
  ojson sp = ojson::object();
  for (auto& [k, val] : specials) sp[k] = std::move(val);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", sp}};
}

ojson byte_level(bool use_regex, bool add_prefix_space) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

ojson gpt2_pre_tokenizer(const io::GgufFile& f, const std::string& file) {
  const std::string pre = f.get_string_opt("tokenizer.ggml.pre").value_or("");
  for (const char* name : kUnmappedSplits)
    if (pre == name)
      throw Error(ErrorKind::kUnsupported, file, "tokenizer.ggml.pre",
                  "pre-tokenizer '" + pre + "' is not mapped by qloom", "use the model's own tokenizer.json");
  const auto it = kSplits.find(pre);
  if (it == kSplits.end()) return byte_level(true, false);
  const ojson split = {{"type", "Split"}, {"pattern", {{"Regex", it->second}}}, {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", ojson::array({split, byte_level(false, false)})}};
}

ojson bpe_model(bool byte_level_style, const VocabMap& vocab, const std::vector<std::pair<std::string, std::string>>& merges) {
  const ojson affix = byte_level_style ? ojson("") : ojson(nullptr);
  return {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", affix},
          {"end_of_word_suffix", affix}, {"fuse_unk", !byte_level_style}, {"byte_fallback", !byte_level_style},
          {"ignore_merges", false}, {"vocab", vocab_json(vocab)}, {"merges", merges_json(merges)}};
}

ojson spm_decoder() {
  return {{"type", "Sequence"},
          {"decoders", ojson::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                     {{"type", "ByteFallback"}},
                                     {{"type", "Fuse"}},
                                     {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
}

ojson tokenizer_json(const io::GgufFile& f, const Vocab& v, const Specials& s) {
  const bool gpt2 = v.model == "gpt2";
  VocabMap vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  if (gpt2) {
    const auto alphabet = byte_alphabet();
    std::vector<std::string> spelled = v.tokens;
    for (auto& t : spelled) {
      bool in = true;
      const auto cps = decode_utf8(t);
      for (uint32_t cp : *cps) in = in && std::find(alphabet.begin(), alphabet.end(), cp) != alphabet.end();
      if (in) continue;
      std::string r;
      for (unsigned char b : t) append_utf8(r, alphabet[b]);
      t = r;
    }
    vocab = vocab_map(spelled);
    merges = file_merges(f, v.file);
  } else {
    vocab = vocab_map(v.tokens);
    if (f.has("tokenizer.ggml.merges")) {
      merges = file_merges(f, v.file);
    } else {
      const auto scores = f.get_float_array("tokenizer.ggml.scores");
      if (scores.size() != v.tokens.size()) throw_invalid(v.file, "tokenizer.ggml.scores", "has one score per token");
      merges = merges_from_scores(v, scores);
    }
  }
  ojson j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  j["added_tokens"] = added_tokens(v, vocab, s, gpt2);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = gpt2 ? gpt2_pre_tokenizer(f, v.file)
                            : ojson{{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", false}};
  j["post_processor"] = template_processing(s, vocab);
  j["decoder"] = gpt2 ? byte_level(true, true) : spm_decoder();
  j["model"] = bpe_model(gpt2, vocab, merges);
  return j;
}

// transformers' model_max_length when nothing states one: int(1e30).
constexpr const char* kHugeLength = "1000000000000000019884624838656";

// `tokenizer_class`: the class transformers' AutoTokenizer picks for the
// model type (Qwen2Tokenizer for qwen2 / qwen3, which also records
// add_prefix_space), TokenizersBackend otherwise.
std::string tokenizer_config(const Specials& s, const std::string& tokenizer_class) {
  auto tok = [](const std::optional<std::string>& t) { return t ? ojson(*t) : ojson(nullptr); };
  ojson c = ojson::object();
  if (tokenizer_class == "Qwen2Tokenizer") c["add_prefix_space"] = nullptr;
  c.update(ojson{{"backend", "tokenizers"}, {"bos_token", tok(s.bos)}, {"eos_token", tok(s.eos)},
                 {"is_local", true}, {"local_files_only", false}, {"model_max_length", 0},
                 {"pad_token", tok(s.pad)}, {"tokenizer_class", tokenizer_class}, {"unk_token", tok(s.unk)}});
  std::string text = c.dump(2);
  const std::string zero = "\"model_max_length\": 0";
  text.replace(text.find(zero), zero.size(), std::string("\"model_max_length\": ") + kHugeLength);
  return text + "\n";
}

}  // namespace

GgufTokenizerFiles gguf_tokenizer_files(const io::GgufFile& f) {
  const Vocab v = read_vocab(f);
  if (v.model != "gpt2" && v.model != "llama")
    throw Error(ErrorKind::kUnsupported, v.file, "tokenizer.ggml.model",
                "tokenizer model '" + v.model + "' is not converted (gpt2 and llama are)",
                "use the model's own tokenizer.json");
  if (v.model == "llama" && f.has("tokenizer.ggml.add_space_prefix") && !f.get_bool("tokenizer.ggml.add_space_prefix"))
    throw Error(ErrorKind::kUnsupported, v.file, "tokenizer.ggml.add_space_prefix",
                "is false: transformers' GGUF tokenizer always prefixes a space, llama.cpp would not",
                "use the model's own tokenizer.json");
  const std::string arch = f.get_string_opt("general.architecture").value_or("");
  const bool qwen = arch == "qwen2" || arch == "qwen3";
  if (qwen && v.model != "gpt2")
    throw Error(ErrorKind::kUnsupported, v.file, "tokenizer.ggml.model",
                "a " + arch + " model with a '" + v.model + "' tokenizer is not converted (qwen tokenizers are gpt2-style)",
                "use the model's own tokenizer.json");
  Specials s;
  s.bos = special_token(f, v, "bos_token_id");
  s.eos = special_token(f, v, "eos_token_id");
  s.unk = special_token(f, v, "unknown_token_id");
  s.pad = special_token(f, v, "padding_token_id");
  // transformers: a SentencePiece vocabulary adds BOS unless the file says otherwise.
  s.add_bos = f.has("tokenizer.ggml.add_bos_token") ? f.get_bool("tokenizer.ggml.add_bos_token") : v.model == "llama";
  s.add_eos = f.has("tokenizer.ggml.add_eos_token") && f.get_bool("tokenizer.ggml.add_eos_token");

  GgufTokenizerFiles out;
  out.tokenizer_json = tokenizer_json(f, v, s).dump(2) + "\n";
  out.tokenizer_config_json = tokenizer_config(s, qwen ? "Qwen2Tokenizer" : "TokenizersBackend");
  out.chat_template = f.get_string_opt("tokenizer.chat_template");
  return out;
}

}  // namespace qloom::model
