// serve/ request parsing, error bodies and sampling, without a server.
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/serve/api_error.h"
#include "qloom/serve/request.h"
#include "qloom/serve/sampler.h"

namespace qloom::serve {
namespace {

// The status, param and code a body is refused with (status 0: accepted).
struct Refusal {
  int status = 0;
  std::string param, code;
};

template <class F>
Refusal refusal(F parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    return {e.status(), e.param(), e.code()};
  }
  return {};
}

Refusal completion_refusal(const std::string& body) {
  return refusal([&] { parse_completion_request(body); });
}
Refusal chat_refusal(const std::string& body) {
  return refusal([&] { parse_chat_request(body); });
}

TEST(ServeRequest, CompletionPromptForms) {
  auto r = parse_completion_request(R"({"model":"m","prompt":"hello","max_tokens":5})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].text, "hello");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(*r.gen.max_tokens, 5);
  EXPECT_EQ(r.logprobs, -1);
  EXPECT_FALSE(r.echo);

  r = parse_completion_request(R"({"prompt":[1,2,3]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_FALSE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.gen.max_tokens.has_value());

  // lm-eval's loglikelihood payload: token-id lists, echo, logprobs 1, max_tokens 1.
  r = parse_completion_request(
      R"({"model":"m","prompt":[[1,5,9],[1,7]],"temperature":0,"max_tokens":1,"logprobs":1,"seed":1234,"echo":true})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].ids, (std::vector<int32_t>{1, 7}));
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 1);
  EXPECT_EQ(r.gen.sampling.temperature, 0);
  EXPECT_EQ(r.gen.sampling.seed, 1234u);

  r = parse_completion_request(R"({"prompt":["a","b"],"stop":"\n","stream":true,"stream_options":{"include_usage":true}})");
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.gen.stop, (std::vector<std::string>{"\n"}));
  EXPECT_TRUE(r.gen.stream);
  EXPECT_TRUE(r.gen.include_usage);
}

TEST(ServeRequest, DefaultsAreDocumented) {
  const auto r = parse_completion_request(R"({"prompt":"x","max_tokens":null,"seed":null})");
  EXPECT_EQ(r.gen.sampling.temperature, 1.0);
  EXPECT_EQ(r.gen.sampling.top_p, 1.0);
  EXPECT_LE(r.gen.sampling.seed, uint64_t(std::numeric_limits<int64_t>::max()));
  EXPECT_FALSE(r.gen.stream);
  EXPECT_FALSE(r.gen.ignore_eos);
  EXPECT_EQ(r.gen.min_tokens, 0);
}

// vLLM's extensions that the throughput benchmark sends (qloom perf --server).
// Without a seed every request samples afresh (OpenAI, vLLM): the seed comes
// from the OS's entropy, fits an int64 (so it can be echoed and resent), and
// 16 requests do not all draw the same one. A given seed is kept as sent.
TEST(ServeRequest, UnseededRequestsGetFreshSeeds) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 16; ++i) {
    const uint64_t s = parse_completion_request(R"({"prompt":"x"})").gen.sampling.seed;
    EXPECT_LE(s, uint64_t(std::numeric_limits<int64_t>::max()));
    seeds.insert(s);
  }
  EXPECT_GT(seeds.size(), 1u);
  EXPECT_EQ(parse_completion_request(R"({"prompt":"x","seed":77})").gen.sampling.seed, 77u);
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"seed":-3})").gen.sampling.seed,
            uint64_t(int64_t(-3)));
}

// Bodies nested deeper than kMaxJsonDepth are refused before any tree is
// built (100,000 levels used to overflow the stack in the parser, the copies
// and the destructor), whether the nesting is in the prompt, in a message's
// content or in chat_template_kwargs; brackets inside strings do not count.
TEST(ServeRequest, DeepJsonIsRefusedBeforeParsing) {
  auto nested = [](size_t levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); };
  for (const size_t levels : {kMaxJsonDepth - 4, size_t(100000)}) {
    const bool deep = levels > kMaxJsonDepth;
    const Refusal c = completion_refusal(R"({"prompt":)" + nested(levels) + "}");
    EXPECT_EQ(c.code, deep ? "json_too_deep" : "") << levels;
    EXPECT_EQ(c.status, 400) << levels;  // the shallow one: a prompt of nested lists is a bad prompt
    const Refusal m = chat_refusal(R"({"messages":[{"role":"user","content":)" + nested(levels) + "}]}");
    EXPECT_EQ(m.code, deep ? "json_too_deep" : "") << levels;
    const Refusal k =
        chat_refusal(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"a":)" + nested(levels) + "}}");
    EXPECT_EQ(k.code, deep ? "json_too_deep" : "") << levels;
  }
  EXPECT_EQ(json_shape(R"({"a":"[[[[{{{{\"[[[["})").deepest, 1u);  // an escaped quote does not end the string
  EXPECT_EQ(json_shape(R"({"a":"\\",[[{}]]})").deepest, 4u);         // an escaped backslash does not escape the quote
  EXPECT_EQ(json_shape(R"([[],[[]],{}])").deepest, 3u);
  EXPECT_EQ(json_shape(R"({"a":1,"b":{"c":":","d":2,"e":3},"f":[{"g":4}]})").most_members, 3u);
  const std::string in_string = R"({"prompt":")" + std::string(100000, '[') + R"("})";
  EXPECT_EQ(parse_completion_request(in_string).prompts[0].text.size(), 100000u);
}

// An object with more members than kMaxJsonObjectMembers (the ordered parse
// would be quadratic in them) is refused before parsing, wherever it is.
TEST(ServeRequest, ObjectsWithTooManyMembersAreRefusedBeforeParsing) {
  auto object = [](size_t members) {
    std::string o = "{";
    for (size_t i = 0; i < members; ++i) o += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    return o + "}";
  };
  for (const size_t members : {size_t(100), kMaxJsonObjectMembers + 1, size_t(200000)}) {
    const bool many = members > kMaxJsonObjectMembers;
    const Refusal k = chat_refusal(R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":)" +
                                   object(members) + "}");
    EXPECT_EQ(k.code, many ? "json_too_large" : "") << members;
  }
}

// A list of prompts is bounded (kDefaultMaxPrompts unless the server says
// otherwise); token-id prompts of any length are one prompt.
TEST(ServeRequest, PromptCountIsBounded) {
  auto prompts = [](size_t n) {
    std::string body = R"({"prompt":[)";
    for (size_t i = 0; i < n; ++i) body += std::string(i ? "," : "") + R"("Hi")";
    return body + "]}";
  };
  EXPECT_EQ(parse_completion_request(prompts(kDefaultMaxPrompts)).prompts.size(), kDefaultMaxPrompts);
  const Refusal f = completion_refusal(prompts(kDefaultMaxPrompts + 1));
  EXPECT_EQ(f.status, 400);
  EXPECT_EQ(f.param, "prompt");
  EXPECT_EQ(f.code, "too_many_prompts");
  EXPECT_EQ(refusal([&] { parse_completion_request(prompts(9), 8); }).code, "too_many_prompts");
  EXPECT_EQ(parse_completion_request(prompts(8), 8).prompts.size(), 8u);
  std::string ids = R"({"prompt":[)";
  for (size_t i = 0; i < 2 * kDefaultMaxPrompts; ++i) ids += std::string(i ? "," : "") + "5";
  EXPECT_EQ(parse_completion_request(ids + "]}").prompts.size(), 1u);
}

// content null (user) and no content (assistant with tool_calls) reach the
// template as "" (vLLM's string content format), other keys kept.
TEST(ServeRequest, NullOrMissingContentIsEmptyText) {
  const auto r = parse_chat_request(
      R"({"messages":[{"role":"user","content":null},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":null,"tool_call_id":"c1"}]})");
  ASSERT_EQ(r.messages.size(), 3u);
  for (const auto& m : r.messages) EXPECT_EQ(m["content"], "") << m.dump();
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "c1");
  EXPECT_EQ(chat_refusal(R"({"messages":[{"role":"user"}]})").param, "messages");
}

TEST(ServeRequest, IgnoreEosAndMinTokens) {
  const auto r = parse_completion_request(R"({"prompt":[5,6],"max_tokens":8,"min_tokens":8,"ignore_eos":true})");
  EXPECT_TRUE(r.gen.ignore_eos);
  EXPECT_EQ(r.gen.min_tokens, 8);
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"min_tokens":2})").gen.min_tokens, 2);
  EXPECT_EQ(completion_refusal(R"({"prompt":"x","ignore_eos":1})").param, "ignore_eos");
  EXPECT_EQ(completion_refusal(R"({"prompt":"x","min_tokens":-1})").param, "min_tokens");
  EXPECT_EQ(completion_refusal(R"({"prompt":"x","min_tokens":1.5})").param, "min_tokens");
  EXPECT_EQ(completion_refusal(R"({"prompt":"x","max_tokens":3,"min_tokens":4})").param, "min_tokens");
  EXPECT_EQ(completion_refusal(R"({"prompt":"x","max_tokens":3,"min_tokens":4})").status, 400);
}

TEST(ServeRequest, MalformedBodiesAre400) {
  for (const char* body : {"", "{", "{bad json}", "[1,2]", "\"text\"", "null"}) {
    const Refusal f = completion_refusal(body);
    EXPECT_EQ(f.status, 400) << body;
    EXPECT_EQ(f.code, "invalid_json") << body;
  }
}

TEST(ServeRequest, BadParametersName400) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "prompt"},
      {R"({"prompt":5})", "prompt"},
      {R"({"prompt":[]})", "prompt"},
      {R"({"prompt":[[]]})", "prompt"},
      {R"({"prompt":[1,-2]})", "prompt"},
      {R"({"prompt":[1,"a"]})", "prompt"},
      {R"({"prompt":"x","max_tokens":-1})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":"3"})", "max_tokens"},
      {R"({"prompt":"x","temperature":2.5})", "temperature"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.1})", "top_p"},
      {R"({"prompt":"x","seed":"s"})", "seed"},
      {R"({"prompt":"x","stop":3})", "stop"},
      {R"({"prompt":"x","stop":["a",1]})", "stop"},
      {R"({"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})", "stop"},
      {R"({"prompt":"x","n":2})", "n"},
      {R"({"prompt":"x","n":1,"best_of":3})", "best_of"},
      {R"({"prompt":"x","stop":")" + std::string(kMaxStopBytes + 1, 'a') + R"("})", "stop"},
      {R"({"prompt":"x","stop":["a",")" + std::string(kMaxStopBytes + 1, 'a') + R"("]})", "stop"},
      {R"({"prompt":"x","logprobs":21})", "logprobs"},
      {R"({"prompt":"x","logprobs":-1})", "logprobs"},
      {R"({"prompt":"x","echo":"yes"})", "echo"},
      {R"({"prompt":"x","stream":1})", "stream"},
      {R"({"prompt":"x","model":3})", "model"},
  };
  for (const auto& [body, param] : cases) {
    const Refusal f = completion_refusal(body);
    EXPECT_EQ(f.status, 400) << body;
    EXPECT_EQ(f.param, param) << body;
  }
}

TEST(ServeRequest, ChatMessages) {
  const auto r = parse_chat_request(
      R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],"max_completion_tokens":7,"logprobs":true,"top_logprobs":3,"chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"], "hi \nthere");  // vLLM joins text parts with "\n"
  EXPECT_EQ(*r.gen.max_tokens, 7);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  for (const char* body : {R"({})", R"({"messages":[]})", R"({"messages":"hi"})", R"({"messages":[{"content":"x"}]})",
                           R"({"messages":[{"role":"wizard","content":"x"}]})", R"({"messages":[{"role":"user"}]})",
                           R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"}) {
    const Refusal f = chat_refusal(body);
    EXPECT_EQ(f.status, 400) << body;
    EXPECT_EQ(f.param, "messages") << body;
  }
  EXPECT_EQ(chat_refusal(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})").param, "max_tokens");
  EXPECT_EQ(chat_refusal(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3,"logprobs":true})").status, 0);
}

TEST(ServeRequest, ErrorBodyIsOpenAiShaped) {
  const ApiError e(400, "too long", "invalid_request_error", "messages", "context_length_exceeded");
  EXPECT_EQ(e.body().dump(),
            R"({"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})");
  EXPECT_EQ(overloaded_error("busy").status(), 429);
  EXPECT_EQ(unauthorized_error("no").status(), 401);
  EXPECT_EQ(not_found_error("gone").body()["error"]["param"], nullptr);
}

TEST(ServeSampler, GreedyIsFirstArgmax) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Sampler s(SamplingParams{0.0, 1.0, 7});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(top_k_ids(logits, 3), (std::vector<int32_t>{1, 3, 0}));
}

TEST(ServeSampler, SeededSamplingIsReproducible) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.3f;
  auto draw = [&](uint64_t seed, double top_p) {
    Sampler s(SamplingParams{1.0, top_p, seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(draw(42, 1.0), draw(42, 1.0));
  EXPECT_NE(draw(42, 1.0), draw(43, 1.0));
  const std::vector<int32_t> spread = draw(1, 1.0);
  EXPECT_GT(std::set<int32_t>(spread.begin(), spread.end()).size(), 5u);
  // A tiny top_p keeps only the most likely token (ties: lowest id).
  for (int32_t id : draw(5, 1e-6)) EXPECT_EQ(id, 6);
  Rng a(9), b(9);
  for (int i = 0; i < 10; ++i) {
    const double u = a.uniform();
    EXPECT_EQ(u, b.uniform());
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace qloom::serve
