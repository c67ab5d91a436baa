// ChatTemplate goldens: every real model template in tests/data/chat_templates
// rendered over every conversation of conversations.json, with and without the
// generation prompt, byte for byte against transformers' render_jinja_template
// (scripts/goldens/chat_templates.py); templates that raise must raise the same
// message. Each template is loaded from a model directory the way qloom meets
// it: chat_template.jinja, or tokenizer_config.json "chat_template" (string or
// named list).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "qloom/text/chat_template.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::text {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kDir = fs::path(QLOOM_TEST_DATA_DIR) / "chat_templates";

ordered_json read_json(const fs::path& p) { return ordered_json::parse(test::read_file(p)); }

std::tm fixed_time() {  // conversations.json "fixed_local_time": 2025-03-07T14:30:00
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 7;
  tm.tm_hour = 14;
  tm.tm_min = 30;
  tm.tm_wday = 5;
  tm.tm_yday = 65;
  return tm;
}

std::vector<std::string> template_names() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".jinja") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A model dir holding the template in one of the three places it can be.
void write_model_dir(const test::TempDir& dir, const std::string& name, int form) {
  std::string text = test::read_file(kDir / (name + ".jinja"));
  ordered_json config = read_json(kDir / "special_tokens.json")[name];
  if (form == 0) {
    dir.write("chat_template.jinja", text);
  } else if (form == 1) {
    config["chat_template"] = text;
  } else {
    config["chat_template"] = ordered_json::array({{{"name", "rag"}, {"template", "{{ 'wrong template' }}"}},
                                                   {{"name", "default"}, {"template", text}}});
  }
  dir.write("tokenizer_config.json", config.dump(2));
}

class ChatTemplateGolden : public testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, MatchesTransformers) {
  const std::string name = GetParam();
  const ordered_json conversations = read_json(kDir / "conversations.json")["conversations"];
  std::map<std::string, ordered_json> by_name;
  for (const auto& c : conversations) by_name[c["name"].get<std::string>()] = c;
  const ordered_json goldens = read_json(kDir / "goldens.json")["cases"];
  std::vector<std::string> names = template_names();
  int form = static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin()) % 3;
  test::TempDir dir("chat-template");
  write_model_dir(dir, name, form);
  ChatTemplate ct = ChatTemplate::load(dir.path());
  ct.set_clock(fixed_time);
  jinja::RenderLimits tight;  // real templates need a fiftieth of the default step budget
  tight.max_steps = 100'000;
  ct.set_limits(tight);
  int checked = 0;
  for (const auto& g : goldens) {
    if (g["template"] != name) continue;
    const ordered_json& conv = by_name.at(g["conversation"].get<std::string>());
    bool agp = g["add_generation_prompt"].get<bool>();
    ordered_json extra = conv.contains("extra") ? conv["extra"] : ordered_json::object();
    SCOPED_TRACE(g["conversation"].get<std::string>() + (agp ? " +generation prompt" : ""));
    if (g.contains("output")) {
      EXPECT_EQ(ct.render(conv["messages"], agp, extra), g["output"].get<std::string>());
    } else {
      Error e = test::catch_error([&] { ct.render(conv["messages"], agp, extra); });
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_EQ(e.message(), g["error"].get<std::string>());
      EXPECT_NE(e.file().find("chat_template"), std::string::npos) << e.file();
      EXPECT_NE(e.item().find(':'), std::string::npos) << e.item();
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(conversations.size()));
}

INSTANTIATE_TEST_SUITE_P(ChatTemplate, ChatTemplateGolden, testing::ValuesIn(template_names()),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ChatTemplate, EveryCollectedTemplateHasGoldensAndProvenance) {
  std::set<std::string> in_goldens;
  const ordered_json goldens = read_json(kDir / "goldens.json");
  for (const auto& g : goldens["cases"]) in_goldens.insert(g["template"].get<std::string>());
  std::string provenance = test::read_file(kDir / "PROVENANCE.md");
  ordered_json tokens = read_json(kDir / "special_tokens.json");
  EXPECT_GE(template_names().size(), 8u);
  for (const auto& n : template_names()) {
    EXPECT_TRUE(in_goldens.count(n)) << n;
    EXPECT_NE(provenance.find(n + ".jinja"), std::string::npos) << n;
    EXPECT_TRUE(tokens.contains(n)) << n;
  }
}

TEST(ChatTemplate, NoTemplateIsNotFound) {
  test::TempDir dir("chat-template");
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  Error e = test::catch_error([&] { ChatTemplate::load(dir.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_NE(e.message().find("no chat template"), std::string::npos);
  test::TempDir empty("chat-template");
  EXPECT_EQ(test::catch_error([&] { ChatTemplate::load(empty.path()); }).kind(), ErrorKind::kNotFound);
}

TEST(ChatTemplate, ChatTemplateJinjaWinsOverTokenizerConfig) {
  test::TempDir dir("chat-template");
  dir.write("chat_template.jinja", "file:{{ messages[0].content }}");
  dir.write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": {"content": "</s>"}})");
  ChatTemplate ct = ChatTemplate::load(dir.path());
  EXPECT_EQ(ct.render(ordered_json::parse(R"([{"role": "user", "content": "x"}])"), false), "file:x");
}

TEST(ChatTemplate, SpecialTokensAndExtraReachTheTemplate) {
  ordered_json config = {{"bos_token", {{"content", "<B>"}}}, {"eos_token", "<E>"}, {"pad_token", nullptr}};
  ChatTemplate ct = ChatTemplate::from_string(
      "{{ bos_token }}{{ eos_token }}|{{ pad_token is defined }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ add_generation_prompt }}|{{ custom }}",
      "t.jinja", config);
  auto msgs = ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(ct.render(msgs, true), "<B><E>|False|True|True|True|");
  EXPECT_EQ(ct.render(msgs, false, {{"custom", 7}, {"eos_token", "<X>"}}), "<B><X>|False|True|True|False|7");
  nlohmann::json plain_msgs = nlohmann::json::parse(msgs.dump());
  EXPECT_EQ(ct.render(plain_msgs, false, nlohmann::json{{"custom", "j"}}), "<B><E>|False|True|True|False|j");
}

TEST(ChatTemplate, MessagesAreNormalisedLikeTransformers) {
  ChatTemplate ct = ChatTemplate::from_string(
      "{% for m in messages %}{{ m | tojson }};{% endfor %}", "t.jinja");
  auto msgs = ordered_json::parse(
      R"([{"role": "assistant", "content": null, "tool_calls": [1]},
          {"role": "assistant", "content": "a", "reasoning": "r"},
          {"role": "assistant", "reasoning_content": "rc", "content": "b", "thinking": "t"}])");
  EXPECT_EQ(ct.render(msgs, false),
            R"({"role": "assistant", "tool_calls": [1]};)"
            R"({"thinking": "r", "role": "assistant", "content": "a", "reasoning": "r", "reasoning_content": "r"};)"
            R"({"thinking": "t", "role": "assistant", "reasoning_content": "rc", "content": "b"};)");
}

TEST(ChatTemplate, NamedTemplatesPickToolUseWithTools) {
  test::TempDir dir("chat-template");
  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  ChatTemplate ct = ChatTemplate::load(dir.path());
  auto msgs = ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(ct.render(msgs, false), "D");
  EXPECT_EQ(ct.render(msgs, false, {{"tools", ordered_json::array()}}), "T");
  EXPECT_EQ(ct.names(), (std::vector<std::string>{"default", "tool_use"}));
  test::TempDir files("chat-template");
  files.write("additional_chat_templates/rag.jinja", "R");
  EXPECT_EQ(test::catch_error([&] { ChatTemplate::load(files.path()).render(msgs, false); }).kind(),
            ErrorKind::kUnsupported);
}

TEST(ChatTemplate, BadInputsAreTypedErrors) {
  ChatTemplate ct = ChatTemplate::from_string("{{ messages }}", "t.jinja");
  EXPECT_EQ(test::catch_error([&] { ct.render(ordered_json::array(), false); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(test::catch_error([&] { ct.render(ordered_json::parse("[1]"), false); }).kind(), ErrorKind::kUsage);
  auto msgs = ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(test::catch_error([&] { ct.render(msgs, false, {{"messages", 1}}); }).kind(), ErrorKind::kUsage);
  test::TempDir dir("chat-template");
  dir.write("tokenizer_config.json", "{not json");
  EXPECT_EQ(test::catch_error([&] { ChatTemplate::load(dir.path()); }).kind(), ErrorKind::kInvalidInput);
  dir.write("tokenizer_config.json", R"({"chat_template": 3})");
  EXPECT_EQ(test::catch_error([&] { ChatTemplate::load(dir.path()); }).kind(), ErrorKind::kInvalidInput);
  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": 1}]})");
  EXPECT_EQ(test::catch_error([&] { ChatTemplate::load(dir.path()); }).kind(), ErrorKind::kInvalidInput);
  dir.write("tokenizer_config.json", R"({"chat_template": "{% if x %}"})");
  Error e = test::catch_error([&] { ChatTemplate::load(dir.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.file().find("tokenizer_config.json"), std::string::npos);
}

// A template and its arguments may come from a request: the render's limits
// are the caller's to set, and an exceeded one is kInvalidInput (serve: 400)
// naming the template line; deep arguments are refused.
TEST(ChatTemplate, RenderLimitsAndHostileArguments) {
  ChatTemplate ct = ChatTemplate::from_string("{{ bos_token }}\n{% for m in messages %}{{ m.content }}{% endfor %}",
                                              "t.jinja", {{"bos_token", "<s>"}});
  const auto msgs = ordered_json::parse(R"([{"role": "user", "content": "hello"}])");
  EXPECT_EQ(ct.render(msgs, false), "<s>\nhello");
  jinja::RenderLimits limits;
  limits.max_output_bytes = 6;
  ct.set_limits(limits);
  const Error e = test::catch_error([&] { ct.render(msgs, false); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "t.jinja");
  EXPECT_EQ(e.item(), "2:24");
  EXPECT_NE(e.message().find("output over 6 bytes"), std::string::npos) << e.message();
  ct.set_limits({});
  EXPECT_EQ(ct.render(msgs, false, {{"bos_token", "[B]"}, {"k", 1}}), "[B]\nhello");  // extra overrides
  ordered_json deep = ordered_json::array();
  for (int i = 0; i < 200; ++i) deep = ordered_json::array({deep});
  EXPECT_EQ(test::catch_error([&] { ct.render(msgs, false, {{"deep", deep}}); }).kind(), ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace qloom::text
