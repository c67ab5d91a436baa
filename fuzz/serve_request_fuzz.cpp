// libFuzzer target: `qloom serve`'s request bodies (serve/request.h) on
// arbitrary bytes, each parsed as /v1/completions and as /v1/chat/completions.
//
// ApiError (a 400 naming the field) is the expected answer to bad input and
// is swallowed. Any other exception (an nlohmann type_error escaping the
// checks), a crash (a stack overflow on deep nesting), a sanitizer report, or
// an accepted request that breaks the documented bounds is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "qloom/serve/api_error.h"
#include "qloom/serve/request.h"

namespace {

using namespace qloom::serve;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_gen(const GenParams& g) {
  check(g.stop.size() <= kMaxStops);
  for (const auto& s : g.stop) check(s.size() <= kMaxStopBytes);
  check(g.sampling.temperature >= 0 && g.sampling.temperature <= 2);
  check(g.sampling.top_p > 0 && g.sampling.top_p <= 1);
  check(g.min_tokens >= 0 && (!g.max_tokens || g.min_tokens <= *g.max_tokens));
}

void completion(std::string_view body) {
  try {
    const CompletionRequest r = parse_completion_request(body, 8);
    check(!r.prompts.empty() && r.prompts.size() <= 8);
    for (const Prompt& p : r.prompts) check(p.is_text || !p.ids.empty());
    check(r.logprobs >= -1 && r.logprobs <= kMaxLogprobs);
    check_gen(r.gen);
  } catch (const ApiError& e) {
    check(e.status() == 400);
  }
}

void chat(std::string_view body) {
  try {
    const ChatRequest r = parse_chat_request(body);
    check(r.messages.is_array() && !r.messages.empty());
    for (const auto& m : r.messages) check(m["content"].is_string() && m["role"].is_string());
    check(r.template_kwargs.is_object());
    check(r.logprobs >= -1 && r.logprobs <= kMaxLogprobs);
    check_gen(r.gen);
  } catch (const ApiError& e) {
    check(e.status() == 400);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const size_t depth = json_shape(body).deepest;
  check(depth <= size);
  completion(body);
  chat(body);
  return 0;
}
