// Tokenizer: load / encode / decode over a parsed tokenizer.json pipeline
// (as written, or transformers 5's LlamaTokenizer pipeline built by
// llama_pipeline.h) or a SentencePiece tokenizer.model.
//
// From tokenizer_config.json (when the model directory has one) load() takes,
// for tokenizer.json as written and for sentencepiece:
//  - bos_token / eos_token (a string or {"content": ...}): bos_id() / eos_id();
//  - add_bos_token / add_eos_token: only when tokenizer.json has no
//    post_processor (ids are then put around the sequence on encode with
//    add_special_tokens), and for tokenizer.model (defaults true / false, as
//    transformers 4's LlamaTokenizer).
// Without bos_token/eos_token there, bos_id()/eos_id() fall back to the first
// special token of the post-processor template, then to well-known names.
// The LlamaTokenizer pipeline reads them as transformers 5 does (llama_specials).
#include "qloom/text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <unordered_map>

#include "qloom/core/error.h"
#include "qloom/io/text_file.h"
#include "qloom/text/json_util.h"
#include "qloom/text/llama_pipeline.h"
#include "qloom/text/sentencepiece_model.h"
#include "qloom/text/tokenizer_pipeline.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace fs = std::filesystem;

struct Tokenizer::Impl {
  std::optional<TokenizerPipeline> pipe;    // tokenizer.json (or the LlamaTokenizer pipeline)
  std::unique_ptr<SentencePieceModel> sp;   // or tokenizer.model
  std::vector<int32_t> sp_prefix, sp_suffix;  // SentencePiece add_bos / add_eos
  std::optional<int32_t> bos, eos;
  TokenizerChoice choice;
  std::vector<std::string> replaced;  // tokenizer.json components the LlamaTokenizer pipeline replaces
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

std::optional<int32_t> first_known(const Tokenizer& t, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto id = t.token_to_id(n)) return id;
  }
  return std::nullopt;
}

// bos_token / eos_token of tokenizer_config.json: "text" or {"content": "text"}.
std::optional<std::string> config_token(const nlohmann::json& cfg, const char* key,
                                        const std::string& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  throw_invalid(file, key, "expected a string or an object with \"content\"");
}

bool config_flag(const nlohmann::json& cfg, const char* key, bool dflt, const std::string& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) throw_invalid(file, key, "expected true or false");
  return it->get<bool>();
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->pipe = parse_tokenizer_json(json_text, source);
  Tokenizer t(std::move(impl));
  const PostProcessor& post = t.impl_->pipe->post;
  t.impl_->bos = !post.prefix.empty() ? std::optional<int32_t>(post.prefix.front())
                                      : first_known(t, {"<s>", "<|begin_of_text|>", "<bos>"});
  t.impl_->eos = first_known(t, {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>"});
  t.impl_->choice.file = source;
  t.impl_->choice.why = "no tokenizer.model";
  return t;
}

Tokenizer Tokenizer::load_as_written(const std::string& json_text, const fs::path& file, const nlohmann::json& cfg,
                                     const std::string& cfg_name) {
  Tokenizer t = from_json(json_text, file.string());
  t.set_specials_from_config(cfg, cfg_name);
  return t;
}

void Tokenizer::set_specials_from_config(const nlohmann::json& cfg, const std::string& cfg_name) {
  Impl& im = *impl_;
  if (const auto bos_name = config_token(cfg, "bos_token", cfg_name)) im.bos = token_to_id(*bos_name);
  if (const auto eos_name = config_token(cfg, "eos_token", cfg_name)) im.eos = token_to_id(*eos_name);
  if (im.sp) {
    if (config_flag(cfg, "add_bos_token", true, cfg_name) && im.bos) im.sp_prefix = {*im.bos};
    if (config_flag(cfg, "add_eos_token", false, cfg_name) && im.eos) im.sp_suffix = {*im.eos};
  } else if (!im.pipe->post.present) {
    if (config_flag(cfg, "add_bos_token", false, cfg_name) && im.bos) im.pipe->post.prefix = {*im.bos};
    if (config_flag(cfg, "add_eos_token", false, cfg_name) && im.eos) im.pipe->post.suffix = {*im.eos};
  }
}

Tokenizer Tokenizer::load_sentencepiece(const fs::path& file, const nlohmann::json& cfg, const std::string& cfg_name) {
  auto impl = std::make_unique<Impl>();
  impl->sp = std::make_unique<SentencePieceModel>(file);
  impl->bos = impl->sp->bos_id();
  impl->eos = impl->sp->eos_id();
  Tokenizer t(std::move(impl));
  t.set_specials_from_config(cfg, cfg_name);
  return t;
}

// transformers 5's LlamaTokenizer over tokenizer.json's vocabulary (json_text)
// or tokenizer.model's pieces (json_text null).
Tokenizer Tokenizer::load_llama(const TokenizerChoice& c, const std::string* json_text, const nlohmann::json& cfg,
                                const std::string& cfg_name) {
  const LlamaSpecials specials = llama_specials(cfg, cfg_name);
  const std::string source = c.file.string();
  nlohmann::json doc;
  std::vector<std::string> replaced;
  if (json_text) {
    const nlohmann::json original = json_util::parse_document(*json_text, source);
    if (!original.is_object()) throw_invalid(source, "", "expected a JSON object");
    doc = llama_pipeline_from_json(original, c, specials, source);
    replaced = llama_replaced_components(original, doc);
  } else {
    doc = llama_pipeline_from_sentencepiece(SentencePieceModel(c.file), c, specials);
  }
  auto impl = std::make_unique<Impl>();
  impl->pipe = parse_tokenizer_json(doc, source);
  impl->replaced = std::move(replaced);
  Tokenizer t(std::move(impl));
  if (!specials.bos.empty()) t.impl_->bos = t.token_to_id(specials.bos);
  if (!specials.eos.empty()) t.impl_->eos = t.token_to_id(specials.eos);
  return t;
}

Tokenizer Tokenizer::load(const fs::path& dir) {
  const fs::path json_file = dir / "tokenizer.json";
  const std::string cfg_name = (dir / "tokenizer_config.json").string();
  const nlohmann::json cfg = read_tokenizer_config(dir);
  std::error_code ec;
  std::optional<std::string> json_text;
  if (fs::is_regular_file(json_file, ec)) json_text = io::read_text_file(json_file);
  const TokenizerChoice choice = choose_tokenizer(dir, cfg, json_text ? &*json_text : nullptr);
  Tokenizer t = choice.kind == TokenizerKind::kLlamaPipeline
                    ? load_llama(choice, json_text ? &*json_text : nullptr, cfg, cfg_name)
                : choice.kind == TokenizerKind::kTokenizerJson ? load_as_written(*json_text, json_file, cfg, cfg_name)
                                                               : load_sentencepiece(choice.file, cfg, cfg_name);
  t.impl_->choice = choice;
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  // HF takes Rust strings: invalid UTF-8 is repaired first (U+FFFD).
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = lossy_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  if (impl_->sp) {
    ids = impl_->sp->encode(text);
    if (add_special_tokens) {
      ids.insert(ids.begin(), impl_->sp_prefix.begin(), impl_->sp_prefix.end());
      ids.insert(ids.end(), impl_->sp_suffix.begin(), impl_->sp_suffix.end());
    }
    return ids;
  }
  const TokenizerPipeline& p = *impl_->pipe;
  std::vector<Piece> pieces = p.added.extract_and_normalize(text, p.normalizer.get());
  if (p.pre_tokenizer) p.pre_tokenizer->apply(pieces);
  ids.reserve(text.size() / 3 + 8);
  // Words repeat a lot in running text: cache their ids for this call.
  std::unordered_map<std::string, std::vector<int32_t>> cache;
  for (const Piece& piece : pieces) {
    if (piece.token >= 0) {
      ids.push_back(piece.token);
      continue;
    }
    auto it = cache.find(piece.text);
    if (it == cache.end()) {
      std::vector<int32_t> word;
      p.model->tokenize(piece.text, word);
      it = cache.emplace(piece.text, std::move(word)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  if (add_special_tokens) p.post.apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  if (impl_->sp) return impl_->sp->decode(std::vector<int32_t>(ids.begin(), ids.end()), skip_special_tokens);
  const TokenizerPipeline& p = *impl_->pipe;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const AddedToken* added = p.added.find_id(id);
    const std::string* tok = added ? &added->content : p.model->id_to_token(id);
    if (!tok) continue;  // unknown ids are dropped, as HF
    if (skip_special_tokens) {
      const AddedToken* a = added ? added : p.added.find_content(*tok);
      if (a && a->special) continue;
    }
    tokens.push_back(*tok);
  }
  if (!p.decoder) {
    std::string out;
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
    return out;
  }
  p.decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

int64_t Tokenizer::vocab_size() const {
  if (impl_->sp) return impl_->sp->vocab_size();
  const TokenizerPipeline& p = *impl_->pipe;
  int64_t n = p.model->vocab_size();
  for (const AddedToken& t : p.added.tokens()) n += !p.model->token_to_id(t.content).has_value();
  return n;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (impl_->sp) return impl_->sp->piece_to_id(token);
  return impl_->pipe->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (impl_->sp) return impl_->sp->id_to_piece(id);
  const TokenizerPipeline& p = *impl_->pipe;
  if (const AddedToken* t = p.added.find_id(id)) return t->content;
  if (const std::string* s = p.model->id_to_token(id)) return *s;
  return std::nullopt;
}

const TokenizerChoice& Tokenizer::choice() const { return impl_->choice; }
std::string Tokenizer::describe() const { return describe_choice(impl_->choice, impl_->replaced); }
const std::vector<std::string>& Tokenizer::replaced_components() const { return impl_->replaced; }

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }

}  // namespace qloom::text
