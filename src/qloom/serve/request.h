// serve requests: the JSON bodies of /v1/completions and /v1/chat/completions
// parsed and checked. Anything malformed throws ApiError 400 naming the
// parameter ("param"); unknown fields are ignored, as OpenAI-compatible
// servers do.
//
// Common fields: model (optional; checked against the served name by the
// server), max_tokens (chat: also max_completion_tokens; null = the default),
// temperature [0, 2] (default 1; 0 = greedy), top_p (0, 1] (default 1), seed
// (any integer; absent or null: 63 bits from std::random_device, so unseeded
// sampling differs per request as with OpenAI and vLLM, and the response
// echoes the seed used), stop (a string or up to kMaxStops strings of at most
// kMaxStopBytes each), stream, stream_options.include_usage, n and best_of
// (only 1), and vLLM's
// extensions ignore_eos (bool, default false: generate past EOS tokens) and
// min_tokens (>= 0, default 0: no EOS and no stop string ends the output
// before that many tokens; the EOS logits are masked until then).
// Completions: prompt = a string, a list of strings, a list of token ids, or
// a list of token-id lists (lm-eval's tokenized requests; at most
// max_prompts of them, default kDefaultMaxPrompts); echo; logprobs
// (0..kMaxLogprobs, null = none). Chat: messages (role + content: a string,
// a list of {"type": "text"} parts joined by "\n", or null / absent, which
// the template sees as "" as vLLM passes it; absent only for assistant
// turns), logprobs (bool) + top_logprobs (0..kMaxLogprobs),
// chat_template_kwargs (extra template variables).
// Every body: JSON nested at most kMaxJsonDepth levels (checked before the
// tree is built; deeper: 400 "json_too_deep").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/serve/sampler.h"

namespace qloom::serve {

inline constexpr int kMaxLogprobs = 20;
inline constexpr size_t kMaxStops = 16;
inline constexpr size_t kMaxStopBytes = 256;
// serde_json's default recursion limit; OpenAI request bodies nest < 10 levels.
inline constexpr size_t kMaxJsonDepth = 128;
// Members of one JSON object (the parse keeps them in order with a linear
// search per insert); more: 400 "json_too_large".
inline constexpr size_t kMaxJsonObjectMembers = 10'000;
inline constexpr size_t kDefaultMaxPrompts = 256;

struct GenParams {
  std::optional<int64_t> max_tokens;  // absent: the endpoint's default
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;
  int64_t min_tokens = 0;
};

struct Prompt {
  bool is_text = true;
  std::string text;          // is_text
  std::vector<int32_t> ids;  // !is_text
};

struct CompletionRequest {
  std::string model;
  std::vector<Prompt> prompts;
  GenParams gen;
  bool echo = false;
  int logprobs = -1;  // -1: none; k >= 0: the chosen token's and the top k
};

struct ChatRequest {
  std::string model;
  nlohmann::ordered_json messages;  // an array of {"role", "content": string, ...}
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  GenParams gen;
  int logprobs = -1;  // -1: none, else top_logprobs
};

// The deepest nesting of arrays and objects in `text` (brackets inside
// strings do not count) and the most members of one object; well-formed or
// not. Levels deeper than kMaxJsonDepth + 1 are not counted for members.
struct JsonShape {
  size_t deepest = 0;
  size_t most_members = 0;
};
JsonShape json_shape(std::string_view text);

// The body as a JSON object; 400 for malformed JSON, another JSON type,
// nesting deeper than kMaxJsonDepth or an object of more than
// kMaxJsonObjectMembers members.
nlohmann::ordered_json parse_body(std::string_view body);

CompletionRequest parse_completion_request(std::string_view body, size_t max_prompts = kDefaultMaxPrompts);
ChatRequest parse_chat_request(std::string_view body);

}  // namespace qloom::serve
