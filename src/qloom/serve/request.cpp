#include <array>
#include "qloom/serve/request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "qloom/serve/api_error.h"

namespace qloom::serve {
namespace {

using Json = nlohmann::ordered_json;

bool present(const Json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

[[noreturn]] void bad_type(const char* key, const char* what) {
  throw_bad_request(std::string("'") + key + "' must be " + what, key);
}

double number_in(const Json& j, const char* key, double lo, double hi, bool lo_open, double dflt) {
  if (!present(j, key)) return dflt;
  if (!j[key].is_number()) bad_type(key, "a number");
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v > hi || v < lo || (lo_open && v == lo))
    throw_bad_request("'" + std::string(key) + "' is " + j[key].dump() + "; it must be in " +
                          (lo_open ? "(" : "[") + Json(lo).dump() + ", " + Json(hi).dump() + "]",
                      key);
  return v;
}

// An integer (a float with an integral value counts).
int64_t integer(const Json& v, const char* key) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return std::numeric_limits<int64_t>::max();
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18) return int64_t(d);
  }
  bad_type(key, "an integer");
}

bool boolean(const Json& j, const char* key, bool dflt) {
  if (!present(j, key)) return dflt;
  if (!j[key].is_boolean()) bad_type(key, "a boolean");
  return j[key].get<bool>();
}

std::string string_field(const Json& j, const char* key) {
  if (!present(j, key)) return {};
  if (!j[key].is_string()) bad_type(key, "a string");
  return j[key].get<std::string>();
}

std::vector<std::string> stop_list(const Json& j) {
  if (!present(j, "stop")) return {};
  const Json& s = j["stop"];
  if (s.is_string()) return {s.get<std::string>()};
  if (!s.is_array()) bad_type("stop", "a string or an array of strings");
  if (s.size() > kMaxStops)
    throw_bad_request("'stop' has " + std::to_string(s.size()) + " sequences; at most " +
                          std::to_string(kMaxStops) + " are accepted",
                      "stop");
  std::vector<std::string> out;
  for (const Json& e : s) {
    if (!e.is_string()) bad_type("stop", "a string or an array of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// Each stop string at most kMaxStopBytes (the scheduler looks for every
// stop's prefixes at the end of the text after each token).
std::vector<std::string> checked_stop(const Json& j) {
  std::vector<std::string> out = stop_list(j);
  for (const std::string& s : out)
    if (s.size() > kMaxStopBytes)
      throw_bad_request("a 'stop' sequence has " + std::to_string(s.size()) + " bytes; at most " +
                            std::to_string(kMaxStopBytes) + " are accepted",
                        "stop");
  return out;
}

// The request's seed, or one drawn from the OS's entropy (63 bits, so the
// value echoed in the response can be sent back as a seed).
uint64_t seed_of(const Json& j) {
  if (present(j, "seed")) return uint64_t(integer(j["seed"], "seed"));
  std::random_device rd;
  return ((uint64_t(rd()) << 32) ^ uint64_t(rd())) & uint64_t(std::numeric_limits<int64_t>::max());
}

// n and best_of: one choice per prompt (best_of, vLLM's and the legacy
// completions API's, must then be 1 too).
void check_single_choice(const Json& j) {
  for (const char* key : {"n", "best_of"})
    if (present(j, key) && integer(j[key], key) != 1)
      throw_bad_request(std::string("only ") + key + " = 1 is supported", key);
}

std::optional<int64_t> parse_max_tokens(const Json& j, const char* key, int64_t min) {
  if (!present(j, key)) return std::nullopt;
  const int64_t v = integer(j[key], key);
  if (v < min) throw_bad_request("'" + std::string(key) + "' must be at least " + std::to_string(min), key);
  return v;
}

GenParams parse_gen(const Json& j, bool chat) {
  GenParams g;
  g.max_tokens = parse_max_tokens(j, "max_tokens", chat ? 1 : 0);
  if (chat && !g.max_tokens) g.max_tokens = parse_max_tokens(j, "max_completion_tokens", 1);
  g.sampling.temperature = number_in(j, "temperature", 0, 2, false, 1.0);
  g.sampling.top_p = number_in(j, "top_p", 0, 1, true, 1.0);
  g.sampling.seed = seed_of(j);
  g.stop = checked_stop(j);
  g.stream = boolean(j, "stream", false);
  if (present(j, "stream_options")) {
    if (!j["stream_options"].is_object()) bad_type("stream_options", "an object");
    g.include_usage = boolean(j["stream_options"], "include_usage", false);
  }
  check_single_choice(j);
  g.ignore_eos = boolean(j, "ignore_eos", false);
  if (present(j, "min_tokens")) {
    g.min_tokens = integer(j["min_tokens"], "min_tokens");
    if (g.min_tokens < 0) throw_bad_request("'min_tokens' must not be negative", "min_tokens");
    if (g.max_tokens && g.min_tokens > *g.max_tokens)
      throw_bad_request("'min_tokens' must be at most 'max_tokens'", "min_tokens");
  }
  return g;
}

std::vector<int32_t> token_ids(const Json& a) {
  std::vector<int32_t> ids;
  for (const Json& v : a) {
    if (!v.is_number_integer()) bad_type("prompt", "a string, a list of strings, or token ids");
    const int64_t id = integer(v, "prompt");
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      throw_bad_request("token id " + std::to_string(id) + " in 'prompt' is out of range", "prompt");
    ids.push_back(int32_t(id));
  }
  if (ids.empty()) throw_bad_request("a token-id prompt must not be empty", "prompt");
  return ids;
}

std::vector<Prompt> parse_prompts(const Json& j, size_t max_prompts) {
  if (!present(j, "prompt")) throw_bad_request("'prompt' is required", "prompt");
  const Json& p = j["prompt"];
  if (p.is_string()) return {Prompt{true, p.get<std::string>(), {}}};
  if (!p.is_array() || p.empty()) bad_type("prompt", "a string, a non-empty list of strings, or token ids");
  if (p[0].is_number()) return {Prompt{false, {}, token_ids(p)}};
  if (p.size() > max_prompts)
    throw_bad_request("'prompt' holds " + std::to_string(p.size()) + " prompts; this server accepts at most " +
                          std::to_string(max_prompts) + " per request (--max-prompts-per-request)",
                      "prompt", "too_many_prompts");
  std::vector<Prompt> out;
  for (const Json& e : p) {
    if (e.is_string())
      out.push_back(Prompt{true, e.get<std::string>(), {}});
    else if (e.is_array())
      out.push_back(Prompt{false, {}, token_ids(e)});
    else
      bad_type("prompt", "a string, a list of strings, or token ids");
  }
  return out;
}

int parse_logprobs_count(const Json& j, const char* key) {
  const int64_t k = integer(j[key], key);
  if (k < 0 || k > kMaxLogprobs)
    throw_bad_request("'" + std::string(key) + "' must be between 0 and " + std::to_string(kMaxLogprobs), key);
  return int(k);
}

// A message's content as the template sees it, as vLLM's "string" content
// format gives it: a string, text parts joined by "\n", and an absent or
// null content (an assistant turn with tool_calls, a null user content) "".
Json message_content(const Json& msg) {
  if (!msg.contains("content") || msg["content"].is_null()) return "";
  const Json& c = msg["content"];
  if (c.is_string()) return c;
  if (!c.is_array()) bad_type("messages", "a list of messages whose content is a string or a list of text parts");
  std::string text;
  for (const Json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw_bad_request("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported",
                        "messages");
    if (&part != &c.front()) text += '\n';
    text += part["text"].get<std::string>();
  }
  return text;
}

Json parse_messages(const Json& j) {
  if (!present(j, "messages")) throw_bad_request("'messages' is required", "messages");
  const Json& m = j["messages"];
  if (!m.is_array() || m.empty()) bad_type("messages", "a non-empty list of messages");
  Json out = Json::array();
  for (const Json& msg : m) {
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      throw_bad_request("every message must be an object with a string 'role'", "messages");
    const std::string role = msg["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      throw_bad_request("unknown message role '" + role + "'", "messages");
    if (!msg.contains("content") && role != "assistant")
      throw_bad_request("a '" + role + "' message needs 'content' (a string, text parts or null)", "messages");
    Json copy = msg;
    copy["content"] = message_content(msg);
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace

// The deepest nesting and the most members of one object, counted on the
// text: levels past kMaxJsonDepth are not counted (the body is refused anyway).
JsonShape json_shape(std::string_view text) {
  JsonShape shape;
  size_t depth = 0;
  std::array<size_t, kMaxJsonDepth + 2> members{};  // ':' seen at each object level
  std::array<bool, kMaxJsonDepth + 2> is_object{};
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      shape.deepest = std::max(shape.deepest, ++depth);
      if (depth < members.size()) members[depth] = 0, is_object[depth] = c == '{';
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ':' && depth > 0 && depth < members.size() && is_object[depth]) {
      shape.most_members = std::max(shape.most_members, ++members[depth]);
    }
  }
  return shape;
}

Json parse_body(std::string_view body) {
  // Before any tree is built: nlohmann's parser, copies and destructor all
  // recurse once per level, so a deep enough body would overflow the stack.
  const JsonShape shape = json_shape(body);
  if (shape.deepest > kMaxJsonDepth)
    throw ApiError(400,
                   "the request body nests JSON " + std::to_string(shape.deepest) + " levels deep; at most " +
                       std::to_string(kMaxJsonDepth) + " are accepted",
                   "invalid_request_error", {}, "json_too_deep");
  // An object's members are kept in order (ordered_json: a linear search per
  // insert), so their number is bounded before parsing too.
  if (shape.most_members > kMaxJsonObjectMembers)
    throw ApiError(400,
                   "a JSON object in the request body has " + std::to_string(shape.most_members) +
                       " members; at most " + std::to_string(kMaxJsonObjectMembers) + " are accepted",
                   "invalid_request_error", {}, "json_too_large");
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded())
    throw ApiError(400, "the request body is not valid JSON", "invalid_request_error", {}, "invalid_json");
  if (!j.is_object())
    throw ApiError(400, "the request body must be a JSON object", "invalid_request_error", {}, "invalid_json");
  return j;
}

CompletionRequest parse_completion_request(std::string_view body, size_t max_prompts) {
  const Json j = parse_body(body);
  CompletionRequest r;
  r.model = string_field(j, "model");
  r.prompts = parse_prompts(j, max_prompts);
  r.gen = parse_gen(j, false);
  r.echo = boolean(j, "echo", false);
  if (present(j, "logprobs")) r.logprobs = parse_logprobs_count(j, "logprobs");
  return r;
}

ChatRequest parse_chat_request(std::string_view body) {
  const Json j = parse_body(body);
  ChatRequest r;
  r.model = string_field(j, "model");
  r.messages = parse_messages(j);
  r.gen = parse_gen(j, true);
  if (boolean(j, "logprobs", false))
    r.logprobs = present(j, "top_logprobs") ? parse_logprobs_count(j, "top_logprobs") : 0;
  if (present(j, "chat_template_kwargs")) {
    if (!j["chat_template_kwargs"].is_object()) bad_type("chat_template_kwargs", "an object");
    r.template_kwargs = j["chat_template_kwargs"];
  }
  return r;
}

}  // namespace qloom::serve
