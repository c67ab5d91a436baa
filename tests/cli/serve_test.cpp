// `qloom serve` (serve/server.h) on the demo model over loopback: every
// endpoint, echo + logprobs equal to eval::score_option bit for bit, greedy
// text equal to eval::generate_greedy, streaming, concurrent clients, every
// error status, and the CLI's listening line and clean SIGTERM stop.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/serve_http_client.h"
#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/eval/gsm8k.h"
#include "qloom/eval/multiple_choice.h"
#include "qloom/serve/request.h"
#include "qloom/serve/server.h"
#include "support/running_server.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::http_request;
using test::HttpReply;

constexpr const char* kTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

// The demo model plus a chat template, in a temporary directory.
fs::path chat_model_dir(const test::TempDir& tmp) {
  const fs::path dir = tmp / "stories-chat";
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(QLOOM_DEMO_MODEL_DIR)) fs::copy_file(e.path(), dir / e.path().filename());
  tmp.write("stories-chat/chat_template.jinja", kTemplate);
  return dir;
}

using test::RunningServer;

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir("serve");
    dir_ = new fs::path(chat_model_dir(*tmp_));
    serve::ServerOptions o;
    o.max_body_bytes = 256 * 1024;
    server_ = new RunningServer(*dir_, o);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
    delete tmp_;
  }
  static HttpReply post(const std::string& path, const json& body) {
    return http_request(server_->port(), "POST", path, body.dump());
  }
  static void expect_error(const HttpReply& r, int status, const std::string& type, const char* code = nullptr) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["type"], type) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty());
    EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code"));
    if (code) {
      EXPECT_EQ(j["error"]["code"], code) << r.body;
    }
    EXPECT_EQ(http_request(server_->port(), "GET", "/health").status, 200) << "server down after " << status;
  }
  static test::TempDir* tmp_;
  static fs::path* dir_;
  static RunningServer* server_;
};
test::TempDir* ServeTest::tmp_ = nullptr;
fs::path* ServeTest::dir_ = nullptr;
RunningServer* ServeTest::server_ = nullptr;

TEST_F(ServeTest, HealthAndModels) {
  const HttpReply h = http_request(server_->port(), "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(json::parse(h.body)["status"], "ok");
  const HttpReply m = http_request(server_->port(), "GET", "/v1/models");
  ASSERT_EQ(m.status, 200);
  const json j = json::parse(m.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "stories-chat");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(json::parse(http_request(server_->port(), "GET", "/v1/models/stories-chat").body)["id"], "stories-chat");
  expect_error(http_request(server_->port(), "GET", "/v1/models/other"), 404, "not_found_error", "model_not_found");
}

TEST_F(ServeTest, EchoLogprobsEqualInProcessScorer) {
  eval::LoadedModel lm = eval::load_for_eval(QLOOM_DEMO_MODEL_DIR);
  const text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  const std::vector<std::pair<std::string, std::string>> samples = {
      {"Once upon a time, there was a", " little girl"}, {"The cat sat on the", " mat and purred"}, {"Tom", " ran"}};
  std::unique_ptr<engine::KvCache> cache;
  json prompts = json::array();
  std::vector<eval::OptionScore> expected;
  std::vector<size_t> ctxlens;
  for (const auto& [ctx, cont] : samples) {
    const eval::TokenPair pair = eval::encode_pair(tok, ctx, cont);
    expected.push_back(eval::score_option(*lm.model, &lm.runtime.hooks, pair, 511, cache));
    std::vector<int32_t> whole = pair.context;
    whole.insert(whole.end(), pair.continuation.begin(), pair.continuation.end());
    prompts.push_back(whole);
    ctxlens.push_back(pair.context.size());
  }
  // lm-eval local-completions' loglikelihood payload, batched.
  const HttpReply r = post("/v1/completions", {{"model", "stories-chat"}, {"prompt", prompts}, {"temperature", 0},
                                               {"max_tokens", 1}, {"logprobs", 1}, {"seed", 1234}, {"echo", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const json& c = j["choices"][i];
    EXPECT_EQ(c["index"], i);
    const json& lp = c["logprobs"];
    ASSERT_EQ(lp["token_logprobs"].size(), prompts[i].size() + 1);  // prompt + the generated token
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
    EXPECT_EQ(lp["text_offset"].size(), lp["token_logprobs"].size());
    // As lm-eval's parse_logprobs: sum(token_logprobs[ctxlen:-1]), greedy from top_logprobs.
    double sum = 0;
    bool greedy = true;
    for (size_t t = ctxlens[i]; t + 1 < lp["token_logprobs"].size(); ++t) {
      const double v = lp["token_logprobs"][t].get<double>();
      sum += v;
      double top = -1e300;
      for (const auto& [k, x] : lp["top_logprobs"][t].items()) top = std::max(top, x.get<double>());
      greedy = greedy && v == top;
    }
    EXPECT_EQ(sum, expected[i].loglik) << "sample " << i;  // bit-identical, not near
    EXPECT_EQ(greedy, expected[i].greedy) << "sample " << i;
    EXPECT_EQ(j["usage"]["completion_tokens"], samples.size());
  }
  // max_tokens 0 with echo: the prompt's log-probabilities only.
  const HttpReply z = post("/v1/completions", {{"prompt", prompts[0]}, {"max_tokens", 0}, {"logprobs", 0}, {"echo", true}});
  ASSERT_EQ(z.status, 200) << z.body;
  EXPECT_EQ(json::parse(z.body)["choices"][0]["logprobs"]["token_logprobs"].size(), prompts[0].size());
}

TEST_F(ServeTest, GreedyCompletionEqualsGenerateGreedy) {
  eval::LoadedModel lm = eval::load_for_eval(QLOOM_DEMO_MODEL_DIR);
  const text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  eval::GenerateOptions g;
  g.max_new = 40;
  g.stops = {"."};
  g.eos_ids = {2};
  const std::string want = eval::generate_greedy(*lm.model, &lm.runtime.hooks, tok, tok.encode("Once upon a time", true), g);
  const HttpReply r =
      post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"stop", {"."}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], want.size() < 200 ? "stop" : "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], tok.encode("Once upon a time", true).size());
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  // max_tokens ends it with "length".
  const json l = json::parse(post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 3}, {"temperature", 0}}).body);
  EXPECT_EQ(l["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(l["usage"]["completion_tokens"], 3);
}

TEST_F(ServeTest, SeededSamplingRepeats) {
  const json body = {{"prompt", "Lily"}, {"max_tokens", 24}, {"temperature", 1.0}, {"top_p", 0.9}, {"seed", 7}};
  const json a = json::parse(post("/v1/completions", body).body);
  const std::string b = json::parse(post("/v1/completions", body).body)["choices"][0]["text"];
  EXPECT_EQ(a["choices"][0]["text"], b);
  EXPECT_EQ(a["seed"], 7);
  EXPECT_FALSE(a.contains("system_fingerprint"));
  json greedy = body;
  greedy["temperature"] = 0;
  EXPECT_FALSE(json::parse(post("/v1/completions", greedy).body).contains("seed")) << "greedy uses no seed";
}

// Without a seed, temperature 1 samples afresh each time (OpenAI, vLLM); the
// response says which seed was drawn, and sending it back repeats the text.
TEST_F(ServeTest, UnseededSamplingDiffersAndEchoesItsSeed) {
  const json body = {{"prompt", "Lily"}, {"max_tokens", 32}, {"temperature", 1.0}};
  std::set<std::string> texts;
  json first;
  for (int i = 0; i < 4; ++i) {
    const json r = json::parse(post("/v1/completions", body).body);
    ASSERT_TRUE(r.contains("seed") && r["seed"].is_number_integer()) << r.dump();
    if (i == 0) first = r;
    texts.insert(r["choices"][0]["text"].get<std::string>());
  }
  EXPECT_GT(texts.size(), 1u) << "four unseeded samples gave the same text";
  json again = body;
  again["seed"] = first["seed"];
  EXPECT_EQ(json::parse(post("/v1/completions", again).body)["choices"][0]["text"], first["choices"][0]["text"]);
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json chat = json::parse(post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 2}, {"seed", 5}}).body);
  EXPECT_EQ(chat["seed"], 5);
}

// Hostile bodies get a 400 naming the limit, and the server stays up: JSON
// nested 100,000 levels (in the prompt, a message's content, the template
// kwargs) and more prompts than --max-prompts-per-request.
TEST_F(ServeTest, DeepJsonAndTooManyPromptsAre400) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error(http_request(server_->port(), "POST", "/v1/completions", R"({"prompt":)" + deep + "}"), 400,
               "invalid_request_error", "json_too_deep");
  expect_error(http_request(server_->port(), "POST", "/v1/chat/completions",
                            R"({"messages":[{"role":"user","content":)" + deep + "}]}"),
               400, "invalid_request_error", "json_too_deep");
  expect_error(http_request(server_->port(), "POST", "/v1/chat/completions",
                            R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"a":)" + deep + "}}"),
               400, "invalid_request_error", "json_too_deep");
  expect_error(post("/v1/completions", {{"prompt", std::vector<std::string>(serve::kDefaultMaxPrompts + 1, "Hi")},
                                        {"max_tokens", 1}}),
               400, "invalid_request_error", "too_many_prompts");
  const HttpReply ok = post("/v1/completions", {{"prompt", std::vector<std::string>(8, "Hi")}, {"max_tokens", 2}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["choices"].size(), 8u);
}

// content null (user) and no content (assistant with tool_calls), both
// allowed by the API, render: the template sees "" as vLLM gives it.
TEST_F(ServeTest, NullAndMissingContentRender) {
  const json msgs = json::array({{{"role", "user"}, {"content", nullptr}},
                                 {{"role", "assistant"},
                                  {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                                               {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}},
                                 {{"role", "user"}, {"content", "go on"}}});
  const HttpReply r = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 3}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const text::Tokenizer tok = text::Tokenizer::load(*dir_);
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"],
            tok.encode("user: \nassistant: \nuser: go on\nassistant:", false).size());
}

TEST_F(ServeTest, StreamingCompletionMatchesPlain) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}};
  const std::string plain = json::parse(post("/v1/completions", body).body)["choices"][0]["text"];
  json sbody = body;
  sbody["stream"] = true;
  sbody["stream_options"] = {{"include_usage", true}};
  const HttpReply r = post("/v1/completions", sbody);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers.find("text/event-stream"), std::string::npos);
  const std::vector<std::string> ev = test::sse_events(r.body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text, finish;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    const json c = json::parse(ev[i]);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, plain);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(json::parse(ev[ev.size() - 2])["usage"]["completion_tokens"], 30);
}

TEST_F(ServeTest, ChatCompletionAndStream) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
  const HttpReply r = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 20}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string content = j["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());
  // The prompt is the template's rendering, encoded without special tokens.
  const text::Tokenizer tok = text::Tokenizer::load(*dir_);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tok.encode("user: Tell me a story\nassistant:", false).size());

  const HttpReply s = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 20}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(s.status, 200);
  const std::vector<std::string> ev = test::sse_events(s.body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_EQ(json::parse(ev[0])["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const json c = json::parse(ev[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (c["choices"][0]["delta"].contains("content")) streamed += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(json::parse(ev[ev.size() - 2])["choices"][0]["finish_reason"], "length");

  const HttpReply lp = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 4}, {"logprobs", true}, {"top_logprobs", 2}});
  ASSERT_EQ(lp.status, 200) << lp.body;
  const json lpj = json::parse(lp.body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lpj.size(), 4u);
  EXPECT_EQ(lpj[0]["top_logprobs"].size(), 2u);
}

TEST_F(ServeTest, ConcurrentStreamingClientsAllAnswered) {
  constexpr int kClients = 6;
  std::vector<HttpReply> replies(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      const json msgs = json::array({{{"role", "user"}, {"content", "Story number " + std::to_string(i)}}});
      replies[size_t(i)] = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 40}, {"stream", true}, {"seed", i}});
    });
  for (auto& t : threads) t.join();
  for (const HttpReply& r : replies) {
    EXPECT_EQ(r.status, 200) << r.body;
    const auto ev = test::sse_events(r.body);
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ(ev.back(), "[DONE]");
  }
}

// Concurrent requests decode together (Model::forward_batch): each still gets
// exactly the text it gets alone, which is generate_greedy's.
TEST_F(ServeTest, ConcurrentGreedyCompletionsEqualGenerateGreedy) {
  eval::LoadedModel lm = eval::load_for_eval(QLOOM_DEMO_MODEL_DIR);
  const text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Ben went to the park and",
                                            "One day", "The sun was"};
  std::vector<std::string> want;
  for (const std::string& p : prompts) {
    eval::GenerateOptions g;
    g.max_new = 48;
    g.eos_ids = {2};
    want.push_back(eval::generate_greedy(*lm.model, &lm.runtime.hooks, tok, tok.encode(p, true), g));
  }
  std::vector<HttpReply> replies(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      replies[i] = post("/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", 48}, {"temperature", 0}});
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(replies[i].status, 200) << replies[i].body;
    EXPECT_EQ(json::parse(replies[i].body)["choices"][0]["text"], want[i]) << prompts[i];
  }
}

TEST_F(ServeTest, ErrorStatuses) {
  const int port = server_->port();
  expect_error(http_request(port, "POST", "/v1/completions", "{not json"), 400, "invalid_request_error", "invalid_json");
  expect_error(http_request(port, "POST", "/v1/chat/completions", "[]"), 400, "invalid_request_error", "invalid_json");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"temperature", 9}}), 400, "invalid_request_error");
  expect_error(post("/v1/completions", {{"prompt", {1, 99999}}}), 400, "invalid_request_error");  // outside the vocabulary
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"stream", true}, {"logprobs", 1}}), 400, "invalid_request_error");
  expect_error(post("/v1/chat/completions", {{"messages", json::array({{{"role", "user"}}})}}), 400, "invalid_request_error");
  // Longer than the 512-token context: OpenAI's 400 context_length_exceeded.
  expect_error(post("/v1/completions", {{"prompt", std::vector<int>(600, 5)}, {"max_tokens", 1}}), 400,
               "invalid_request_error", "context_length_exceeded");
  expect_error(post("/v1/completions", {{"prompt", std::vector<int>(500, 5)}, {"max_tokens", 20}}), 400,
               "invalid_request_error", "context_length_exceeded");
  std::string long_chat(3000, 'a');
  for (size_t i = 1; i < long_chat.size(); i += 2) long_chat[i] = ' ';
  expect_error(post("/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", long_chat}}})}}), 400,
               "invalid_request_error", "context_length_exceeded");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 100000}}), 400, "invalid_request_error");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"model", "gpt-4"}}), 404, "not_found_error", "model_not_found");
  expect_error(http_request(port, "GET", "/v1/nothing"), 404, "not_found_error");
  expect_error(http_request(port, "GET", "/v1/completions"), 405, "invalid_request_error");
  expect_error(http_request(port, "POST", "/v1/completions", std::string(300 * 1024, ' ')), 413, "invalid_request_error");
}

TEST(ServeAuth, ApiKeyRequiredOnV1) {
  test::TempDir tmp("serve-auth");
  serve::ServerOptions o;
  o.api_key = "sekrit";
  RunningServer s(QLOOM_DEMO_MODEL_DIR, o);
  const std::string body = R"({"prompt":"Once","max_tokens":2})";
  const HttpReply missing = http_request(s.port(), "POST", "/v1/completions", body);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(json::parse(missing.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(http_request(s.port(), "GET", "/v1/models", "", {"Authorization: Bearer wrong"}).status, 401);
  EXPECT_EQ(http_request(s.port(), "POST", "/v1/completions", body, {"Authorization: Bearer sekrit"}).status, 200);
  EXPECT_EQ(http_request(s.port(), "GET", "/health").status, 200);
  // No chat template in the demo model: chat is a 400 naming it.
  const HttpReply chat = http_request(s.port(), "POST", "/v1/chat/completions",
                                      R"({"messages":[{"role":"user","content":"hi"}]})", {"Authorization: Bearer sekrit"});
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(json::parse(chat.body)["error"]["code"], "no_chat_template");
}

TEST(ServeLimits, OverMaxConcurrencyIs429) {
  serve::ServerOptions o;
  o.max_concurrency = 1;
  RunningServer s(QLOOM_DEMO_MODEL_DIR, o);
  const std::string body = R"({"prompt":"Once","max_tokens":480,"temperature":0,"stream":true})";
  int ok = 0, busy = 0;
  for (int attempt = 0; attempt < 5 && busy == 0; ++attempt) {
    constexpr int kClients = 8;
    std::vector<HttpReply> replies(kClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i)
      threads.emplace_back([&, i] { replies[size_t(i)] = http_request(s.port(), "POST", "/v1/completions", body); });
    for (auto& t : threads) t.join();
    for (const HttpReply& r : replies) {
      if (r.status == 200) ++ok;
      if (r.status == 429) {
        ++busy;
        EXPECT_EQ(json::parse(r.body)["error"]["type"], "rate_limit_error");
      }
      EXPECT_TRUE(r.status == 200 || r.status == 429) << r.status << " " << r.body;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(busy, 0);
  EXPECT_EQ(http_request(s.port(), "GET", "/health").status, 200);
}

// A Quark checkpoint (fp8 weights + activations, fp8 KV cache) served on
// the native runtime (serve's default) gives the same numbers as the
// in-process scorer on the native runtime; served with --runtime simulate,
// the same as the in-process simulate scorer; both differ from the source's.
double served_loglik(const fs::path& q, const eval::TokenPair& pair, serve::ServerOptions o) {
  std::vector<int32_t> whole = pair.context;
  whole.insert(whole.end(), pair.continuation.begin(), pair.continuation.end());
  RunningServer s(q, std::move(o));
  const HttpReply r = http_request(s.port(), "POST", "/v1/completions",
                                   json{{"prompt", json::array({whole})}, {"max_tokens", 1}, {"logprobs", 1}, {"echo", true},
                                        {"temperature", 0}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json lp = json::parse(r.body)["choices"][0]["logprobs"]["token_logprobs"];
  double sum = 0;
  for (size_t t = pair.context.size(); t + 1 < lp.size(); ++t) sum += lp[t].get<double>();
  return sum;
}

TEST(ServeQuark, CheckpointLogprobsEqualInProcess) {
  test::TempDir tmp("serve-quark");
  const fs::path q = tmp / "fp8";
  const test::CommandResult qr = test::run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", q.string(),
                                                  "--quant_scheme", "fp8", "--kv_cache_dtype", "fp8", "--num_calib_data", "4",
                                                  "--threads", "1", "--progress", "off"});
  ASSERT_EQ(qr.exit_code, 0) << qr.err;
  const text::Tokenizer tok = text::Tokenizer::load(q);
  const eval::TokenPair pair = eval::encode_pair(tok, "Once upon a time, there was a big", " dog named Max");
  auto in_process = [&](const fs::path& dir, exporter::Runtime rt) {
    eval::LoadedModel lm = eval::load_for_eval(dir, {}, rt);
    std::unique_ptr<engine::KvCache> cache;
    return eval::score_option(*lm.model, &lm.runtime.hooks, pair, 511, cache).loglik;
  };
  const double native = in_process(q, exporter::Runtime::kNative);
  const double simulate = in_process(q, exporter::Runtime::kSimulate);
  const double source = in_process(QLOOM_DEMO_MODEL_DIR, exporter::Runtime::kSimulate);
  EXPECT_NE(native, source);
  EXPECT_NE(simulate, source);
  EXPECT_EQ(served_loglik(q, pair, {}), native);
  serve::ServerOptions sim;
  sim.runtime = exporter::Runtime::kSimulate;
  EXPECT_EQ(served_loglik(q, pair, sim), simulate);
}

// The CLI: listening line on stderr, answers, and SIGTERM stops it with exit 0.
TEST(ServeCli, ListensAndStopsOnSigterm) {
  int err_pipe[2];
  ASSERT_EQ(::pipe(err_pipe), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(err_pipe[0]);
    ::execl(QLOOM_CLI_PATH, QLOOM_CLI_PATH, "serve", QLOOM_DEMO_MODEL_DIR, "--port", "0", "--threads", "1",
            "--served-model-name", "tiny", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  std::string err;
  int port = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (port == 0 && std::chrono::steady_clock::now() < deadline) {
    char buf[512];
    const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n > 0) err.append(buf, size_t(n));
    const size_t at = err.find("listening on http://127.0.0.1:");
    if (at != std::string::npos && err.find('\n', at) != std::string::npos)
      port = std::atoi(err.c_str() + at + std::string("listening on http://127.0.0.1:").size());
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(port, 0) << err;
  EXPECT_NE(err.find("(model tiny"), std::string::npos) << err;
  EXPECT_EQ(json::parse(http_request(port, "GET", "/v1/models").body)["data"][0]["id"], "tiny");
  EXPECT_EQ(http_request(port, "POST", "/v1/completions", R"({"prompt":"Once","max_tokens":4})").status, 200);
  ::kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 200 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (::waitpid(pid, &status, WNOHANG) == 0 && !WIFEXITED(status)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "qloom serve did not stop on SIGTERM";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::close(err_pipe[0]);
}

}  // namespace
}  // namespace qloom
