// libFuzzer target: parse and render arbitrary bytes as a chat template.
//
// The template sees a small conversation (messages with roles, content, a
// tool call, an assistant message without content), the special tokens and
// add_generation_prompt, under a low RenderLimits so that each input runs in
// milliseconds. A qloom::Error is the expected answer to a bad or hostile
// template and is swallowed. Any other exception, a crash, a sanitizer report,
// or output over the budget is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "qloom/core/error.h"
#include "qloom/text/jinja/template.h"

namespace {

using qloom::text::jinja::RenderLimits;
using qloom::text::jinja::Template;
using qloom::text::jinja::Value;

const Value& context() {
  static const Value kContext = Value::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi \u00e9 <|im_start|>"},
      {"role": "assistant", "tool_calls": [{"type": "function",
        "function": {"name": "get", "arguments": {"city": "Paris", "n": [1, 2.5, null, true]}}}]},
      {"role": "tool", "content": "{\"temp\": 21}"},
      {"role": "assistant", "content": "<think>x</think>done", "reasoning_content": "x"}
    ],
    "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })"));
  return kContext;
}

RenderLimits limits() {
  RenderLimits l;
  l.max_steps = 20000;
  l.max_output_bytes = 1 << 16;
  l.max_value_bytes = 1 << 16;
  l.max_macro_depth = 20;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  qloom::text::jinja::RenderOptions options;
  options.limits = limits();
  options.clock = [] { return std::tm{}; };
  try {
    const Template t = Template::parse(source, "fuzz.jinja");
    const std::string out = t.render(context(), options);
    if (out.size() > options.limits.max_output_bytes) std::abort();
  } catch (const qloom::Error&) {
    // expected for bad or hostile templates
  }
  return 0;
}
