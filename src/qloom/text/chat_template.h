// qloom::text::ChatTemplate — a model's Hugging Face chat template, rendered
// with qloom's own Jinja engine (engine/jinja) the way transformers'
// tokenizer.apply_chat_template(messages, tokenize=False, ...) renders it.
//
// Where the template comes from (transformers' order): model_dir/
// chat_template.jinja (the "default" template) and model_dir/
// additional_chat_templates/<name>.jinja; else tokenizer_config.json
// "chat_template": a string, or a list of {"name", "template"}. With several
// templates, "tool_use" is taken when tools are given and it exists, else
// "default".
//
// What the template sees: messages (each with its null-valued keys dropped,
// and reasoning given under "reasoning_content", "thinking" or "reasoning"
// copied to "thinking" first and "reasoning_content" last, as transformers
// does), add_generation_prompt, tools and documents (None unless extra gives
// them), the named special tokens of tokenizer_config.json (bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: strings
// or AddedToken objects {"content": ...}), then every other key of `extra`
// (overriding a special token of the same name). strftime_now formats the
// local time, or the clock set with set_clock.
// Not mirrored: continue_final_message, return_assistant_tokens_mask, control
// token sanitization, and the default special tokens a tokenizer class may
// add on its own when tokenizer_config.json does not name them.
#pragma once

#include <ctime>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/text/jinja/template.h"

namespace qloom::text {

class ChatTemplate {
 public:
  // Throws qloom::Error: kNotFound when the directory has no chat template,
  // kInvalidInput for unreadable JSON or a template that does not parse.
  static ChatTemplate load(const std::filesystem::path& model_dir);
  // One template from its text; `tokenizer_config` supplies the special tokens.
  static ChatTemplate from_string(const std::string& source, const std::string& name,
                                  const nlohmann::ordered_json& tokenizer_config = nlohmann::ordered_json::object());

  // `messages`: a non-empty array of message objects. `extra`: an object of
  // further template variables (tools, documents, enable_thinking, date_string,
  // ...). ordered_json keeps the caller's key order, which tojson output shows;
  // nlohmann::json sorts keys. Throws kUsage for malformed arguments,
  // kInvalidInput for arguments nested over 128 deep, and what
  // jinja::Template::render throws (raise_exception, a template error or an
  // exceeded RenderLimits -> kInvalidInput naming the template line).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra) const;

  void set_clock(std::function<std::tm()> clock) { options_.clock = std::move(clock); }
  // What one render may spend (jinja::RenderLimits' defaults unless set); an
  // exceeded limit is a qloom::Error kInvalidInput naming the template line.
  void set_limits(const jinja::RenderLimits& limits) { options_.limits = limits; }
  // Template names: "default" for a single template.
  std::vector<std::string> names() const;

 private:
  const jinja::Template& pick(bool with_tools) const;

  std::string origin_;  // what the templates came from, for errors
  std::vector<std::pair<std::string, jinja::Template>> templates_;
  jinja::Dict special_tokens_;
  jinja::RenderOptions options_;
};

}  // namespace qloom::text
