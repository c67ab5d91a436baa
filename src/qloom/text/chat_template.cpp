#include "qloom/text/chat_template.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "qloom/core/error.h"

namespace qloom::text {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_errno(errno, p.string(), "open", false);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ordered_json read_config(const fs::path& p) {
  try {
    return ordered_json::parse(read_text(p));
  } catch (const ordered_json::exception& e) {
    throw Error(ErrorKind::kInvalidInput, p.string(), "", std::string("not valid JSON: ") + e.what(),
                "restore the model's tokenizer_config.json");
  }
}

jinja::Dict special_tokens_of(const ordered_json& config) {
  jinja::Dict out;
  if (!config.is_object()) return out;
  for (const char* key : kSpecialTokens) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) out.set(key, jinja::Value(it->get<std::string>()));
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      out.set(key, jinja::Value((*it)["content"].get<std::string>()));
  }
  return out;
}

// The templates tokenizer_config.json holds: a string, or [{name, template}].
std::vector<std::pair<std::string, std::string>> config_templates(const ordered_json& config, const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return out;
  const ordered_json& ct = config["chat_template"];
  if (ct.is_string()) {
    out.emplace_back("default", ct.get<std::string>());
    return out;
  }
  if (!ct.is_array())
    throw Error(ErrorKind::kInvalidInput, file.string(), "chat_template",
                "must be a string or a list of {\"name\", \"template\"} objects");
  for (const auto& e : ct) {
    if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["name"].is_string() ||
        !e["template"].is_string())
      throw Error(ErrorKind::kInvalidInput, file.string(), "chat_template",
                  "each entry of the list must be {\"name\": string, \"template\": string}");
    out.emplace_back(e["name"].get<std::string>(), e["template"].get<std::string>());
  }
  return out;
}

// Drops null-valued keys and aliases reasoning fields, as transformers does.
ordered_json normalise_message(const ordered_json& m, size_t index) {
  if (!m.is_object())
    throw Error(ErrorKind::kUsage, "messages", "messages[" + std::to_string(index) + "]",
                "chat messages must be objects, got " + std::string(m.type_name()));
  ordered_json out = ordered_json::object();
  for (const auto& [k, v] : m.items())
    if (!v.is_null()) out[k] = v;
  const ordered_json* reasoning = nullptr;
  for (const char* f : kReasoningFields) {
    if (!reasoning && out.contains(f)) reasoning = &out[f];
  }
  if (!reasoning) return out;
  ordered_json r = *reasoning, aliased = ordered_json::object();
  aliased["thinking"] = r;
  for (const auto& [k, v] : out.items()) aliased[k] = v;
  aliased["thinking"] = out.contains("thinking") ? out["thinking"] : r;
  aliased["reasoning_content"] = r;
  return aliased;
}

}  // namespace

ChatTemplate ChatTemplate::load(const fs::path& model_dir) {
  ChatTemplate ct;
  ct.origin_ = model_dir.string();
  std::vector<std::pair<std::string, std::string>> sources;
  std::vector<std::string> names;
  if (fs::is_regular_file(model_dir / "chat_template.jinja"))
    sources.emplace_back("default", read_text(model_dir / "chat_template.jinja"));
  fs::path extra_dir = model_dir / "additional_chat_templates";
  if (fs::is_directory(extra_dir)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(extra_dir))
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) sources.emplace_back(f.stem().string(), read_text(f));
  }
  fs::path config_path = model_dir / "tokenizer_config.json";
  ordered_json config = ordered_json::object();
  if (fs::is_regular_file(config_path)) config = read_config(config_path);
  if (sources.empty()) sources = config_templates(config, config_path);
  if (sources.empty())
    throw Error(ErrorKind::kNotFound, model_dir.string(), "chat_template",
                "the model has no chat template (no chat_template.jinja, no \"chat_template\" in "
                "tokenizer_config.json)",
                "use an instruct/chat model, or add the model's chat_template.jinja to the directory");
  for (const auto& [name, text] : sources) {
    std::string label = (name == "default" && fs::is_regular_file(model_dir / "chat_template.jinja"))
                            ? (model_dir / "chat_template.jinja").string()
                            : config_path.string() + " chat_template " + name;
    ct.templates_.emplace_back(name, jinja::Template::parse(text, label));
  }
  ct.special_tokens_ = special_tokens_of(config);
  return ct;
}

ChatTemplate ChatTemplate::from_string(const std::string& source, const std::string& name,
                                       const ordered_json& tokenizer_config) {
  ChatTemplate ct;
  ct.origin_ = name;
  ct.templates_.emplace_back("default", jinja::Template::parse(source, name));
  ct.special_tokens_ = special_tokens_of(tokenizer_config);
  return ct;
}

std::vector<std::string> ChatTemplate::names() const {
  std::vector<std::string> out;
  for (const auto& [n, t] : templates_) out.push_back(n);
  return out;
}

const jinja::Template& ChatTemplate::pick(bool with_tools) const {
  if (templates_.size() == 1 && templates_[0].first == "default") return templates_[0].second;
  auto find = [&](const char* n) -> const jinja::Template* {
    for (const auto& [name, t] : templates_)
      if (name == n) return &t;
    return nullptr;
  };
  if (const jinja::Template* t = with_tools ? find("tool_use") : nullptr) return *t;
  if (const jinja::Template* t = find("default")) return *t;
  std::string all;
  for (const auto& n : names()) all += (all.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::kUnsupported, origin_, "chat_template",
              "the model has several chat templates and none is named \"default\" (" + all + ")");
}

std::string ChatTemplate::render(const ordered_json& messages, bool add_generation_prompt,
                                 const ordered_json& extra) const {
  if (!messages.is_array() || messages.empty())
    throw Error(ErrorKind::kUsage, origin_, "messages",
                "cannot apply a chat template to an empty conversation (or one that is not a list)");
  if (!extra.is_null() && !extra.is_object())
    throw Error(ErrorKind::kUsage, origin_, "extra", "extra template variables must be an object");
  ordered_json chat = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) chat.push_back(normalise_message(messages[i], i));
  ordered_json vars = extra.is_object() ? extra : ordered_json::object();
  for (const char* reserved : {"messages", "add_generation_prompt"}) {
    if (vars.contains(reserved))
      throw Error(ErrorKind::kUsage, origin_, reserved, "set by render() itself, not through extra");
  }
  // extra's keys are distinct and none is reserved: appended without a search
  // each (a request may send many), after the special tokens they override.
  jinja::Dict ctx;
  for (const auto& [k, v] : special_tokens_.items())
    if (!vars.contains(k)) ctx.append_new(k, v);
  for (const auto& [k, v] : vars.items()) ctx.append_new(k, jinja::Value::from_json(v));
  for (const char* k : {"tools", "documents"})
    if (!vars.contains(k)) ctx.append_new(k, jinja::Value::none());
  ctx.append_new("messages", jinja::Value::from_json(chat));
  ctx.append_new("add_generation_prompt", jinja::Value(add_generation_prompt));
  bool with_tools = vars.contains("tools") && !vars["tools"].is_null();
  return pick(with_tools).render(jinja::Value::dict(std::move(ctx)), options_);
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra) const {
  return render(ordered_json::parse(messages.dump()), add_generation_prompt,
                extra.is_null() ? ordered_json::object() : ordered_json::parse(extra.dump()));
}

}  // namespace qloom::text
