// serve responses: the OpenAI JSON objects built from scheduler results.
//   /v1/completions: {"id": "cmpl-N", "object": "text_completion", "created",
//     "model", "choices": [{"index", "text", "logprobs", "finish_reason"}],
//     "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}.
//     logprobs (when asked): {"tokens": [token strings], "token_logprobs",
//     "top_logprobs": [{token string: logprob}], "text_offset"}; with echo the
//     prompt's tokens come first, the first one with null log-probabilities
//     (lm-eval's local-completions reads token_logprobs[ctxlen:-1]). A top
//     dictionary holds the k most likely tokens and the chosen one.
//     text_offset: byte offsets into the choice's text, each token counted by
//     its own decoded string.
//   /v1/chat/completions: "object": "chat.completion", choices[].message =
//     {"role": "assistant", "content"}, choices[].logprobs = {"content":
//     [{"token", "logprob", "bytes", "top_logprobs": [...]}]} or null.
//   Streaming chunks: "text_completion" / "chat.completion.chunk" objects,
//     each sent as "data: <json>\n\n", then "data: [DONE]\n\n".
//   Every object also carries "seed" after "model" when ResponseHead::seed is
//     set (echoed_seed: when the request samples, temperature > 0): the seed
//     used (the request's, or the one drawn for it), so an unseeded sample can
//     be reproduced; greedy responses stay as they were. Neither OpenAI nor vLLM has a
//     response field for it; an extra top-level key is what their clients
//     ignore (the OpenAI SDK's models keep unknown fields), while
//     system_fingerprint means something else (the backend's configuration)
//     and stays absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/text/tokenizer.h"
#include "qloom/serve/scheduler.h"

namespace qloom::serve {

struct ResponseHead {
  std::string id;
  int64_t created = 0;
  std::string model;
  std::optional<int64_t> seed;  // echoed as "seed" when set
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  nlohmann::ordered_json json() const;
};

// The seed a response echoes: the sampling seed as an int64 (what the
// request sent, or 63 drawn bits) when temperature > 0; none for greedy.
std::optional<int64_t> echoed_seed(const SamplingParams& p);

Usage usage_of(const std::vector<SeqSpec>& specs, const std::vector<SeqResult>& results);

// One completion choice. `prompt_text`: what echo prepends.
nlohmann::ordered_json completion_choice(const text::Tokenizer& tok, size_t index, const SeqSpec& spec,
                                         const SeqResult& r, bool echo, const std::string& prompt_text);
nlohmann::ordered_json completion_response(const ResponseHead& h, nlohmann::ordered_json choices,
                                           const Usage& usage);
nlohmann::ordered_json completion_chunk(const ResponseHead& h, size_t index, const std::string& text,
                                        const std::string& finish_reason);

nlohmann::ordered_json chat_response(const text::Tokenizer& tok, const ResponseHead& h, const SeqSpec& spec,
                                     const SeqResult& r, const Usage& usage);
// delta: {"role": "assistant", "content": ""} first, {"content": text}, then {} with the finish reason.
nlohmann::ordered_json chat_chunk(const ResponseHead& h, nlohmann::ordered_json delta,
                                  const std::string& finish_reason);
nlohmann::ordered_json usage_chunk(const ResponseHead& h, const char* object, const Usage& usage);

std::string sse(const nlohmann::ordered_json& j);  // "data: <json>\n\n"
inline const char* kSseDone = "data: [DONE]\n\n";

}  // namespace qloom::serve
