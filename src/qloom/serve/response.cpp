#include "qloom/serve/response.h"

namespace qloom::serve {
namespace {

using Json = nlohmann::ordered_json;

std::string token_string(const text::Tokenizer& tok, int32_t id) {
  const int32_t one[1] = {id};
  return tok.decode(one, false);
}

Json top_dict(const text::Tokenizer& tok, const TokenLogprob& t) {
  Json d = Json::object();
  for (const auto& [id, lp] : t.top) {
    const std::string s = token_string(tok, id);
    if (!d.contains(s)) d[s] = lp;
  }
  const std::string chosen = token_string(tok, t.id);
  if (!d.contains(chosen)) d[chosen] = t.logprob;
  return d;
}

// Appends one token to a completions logprobs object.
void add_token(const text::Tokenizer& tok, Json& lp, int32_t id, const TokenLogprob* t, size_t& offset) {
  const std::string s = token_string(tok, id);
  lp["tokens"].push_back(s);
  lp["token_logprobs"].push_back(t ? Json(t->logprob) : Json(nullptr));
  lp["top_logprobs"].push_back(t ? top_dict(tok, *t) : Json(nullptr));
  lp["text_offset"].push_back(offset);
  offset += s.size();
}

Json completion_logprobs(const text::Tokenizer& tok, const SeqSpec& spec, const SeqResult& r, bool echo) {
  Json lp = {{"tokens", Json::array()}, {"token_logprobs", Json::array()},
             {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
  size_t offset = 0;
  if (echo)
    for (size_t i = 0; i < spec.prompt.size(); ++i) {
      const bool has = i > 0 && i - 1 < r.prompt_logprobs.size();
      add_token(tok, lp, spec.prompt[i], has ? &r.prompt_logprobs[i - 1] : nullptr, offset);
    }
  for (size_t i = 0; i < r.tokens.size(); ++i)
    add_token(tok, lp, r.tokens[i], i < r.token_logprobs.size() ? &r.token_logprobs[i] : nullptr, offset);
  return lp;
}

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (char c : s) b.push_back(int(uint8_t(c)));
  return b;
}

Json chat_logprobs(const text::Tokenizer& tok, const SeqResult& r) {
  Json content = Json::array();
  for (const TokenLogprob& t : r.token_logprobs) {
    const std::string s = token_string(tok, t.id);
    Json top = Json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string ts = token_string(tok, id);
      top.push_back({{"token", ts}, {"logprob", lp}, {"bytes", bytes_of(ts)}});
    }
    content.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_of(s)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

Json head_json(const ResponseHead& h, const char* object) {
  Json j = {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
  if (h.seed) j["seed"] = *h.seed;
  return j;
}

Json reason(const std::string& r) { return r.empty() ? Json(nullptr) : Json(r); }

}  // namespace

std::optional<int64_t> echoed_seed(const SamplingParams& p) {
  if (p.temperature <= 0) return std::nullopt;
  return int64_t(p.seed);
}

Json Usage::json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

Usage usage_of(const std::vector<SeqSpec>& specs, const std::vector<SeqResult>& results) {
  Usage u;
  for (const SeqSpec& s : specs) u.prompt_tokens += int64_t(s.prompt.size());
  for (const SeqResult& r : results) u.completion_tokens += int64_t(r.tokens.size());
  return u;
}

Json completion_choice(const text::Tokenizer& tok, size_t index, const SeqSpec& spec, const SeqResult& r,
                       bool echo, const std::string& prompt_text) {
  Json c = {{"index", index}, {"text", (echo ? prompt_text : std::string()) + r.text}, {"logprobs", nullptr},
            {"finish_reason", reason(r.finish_reason)}};
  if (spec.top_logprobs >= 0) c["logprobs"] = completion_logprobs(tok, spec, r, echo);
  return c;
}

Json completion_response(const ResponseHead& h, Json choices, const Usage& usage) {
  Json j = head_json(h, "text_completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage.json();
  return j;
}

Json completion_chunk(const ResponseHead& h, size_t index, const std::string& text, const std::string& finish) {
  Json j = head_json(h, "text_completion");
  j["choices"] = Json::array(
      {Json{{"index", index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", reason(finish)}}});
  return j;
}

Json chat_response(const text::Tokenizer& tok, const ResponseHead& h, const SeqSpec& spec, const SeqResult& r,
                   const Usage& usage) {
  Json j = head_json(h, "chat.completion");
  Json choice = {{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", r.text}}},
                 {"logprobs", spec.top_logprobs >= 0 ? chat_logprobs(tok, r) : Json(nullptr)},
                 {"finish_reason", reason(r.finish_reason)}};
  j["choices"] = Json::array({choice});
  j["usage"] = usage.json();
  return j;
}

Json chat_chunk(const ResponseHead& h, Json delta, const std::string& finish) {
  Json j = head_json(h, "chat.completion.chunk");
  j["choices"] = Json::array(
      {Json{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", reason(finish)}}});
  return j;
}

Json usage_chunk(const ResponseHead& h, const char* object, const Usage& usage) {
  Json j = head_json(h, object);
  j["choices"] = Json::array();
  j["usage"] = usage.json();
  return j;
}

std::string sse(const Json& j) { return "data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n"; }

}  // namespace qloom::serve
