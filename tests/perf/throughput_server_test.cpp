// perf/throughput.h --server: against `qloom serve` (serve::Server on a
// loopback port, demo model) — and the serve extensions the protocol needs
// (ignore_eos, min_tokens) — and against a scripted fake server that stops
// early or omits usage, which must be refused with typed errors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/serve_http_client.h"
#include "qloom/core/error.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/perf/throughput.h"
#include "qloom/serve/server.h"
#include "support/expect_error.h"
#include "support/running_server.h"
#include "support/temp_dir.h"

namespace qloom::perf {
namespace {

using nlohmann::json;

class ThroughputServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve::ServerOptions so;
    so.api_key = "sekrit";
    so.served_model_name = "demo";
    server_ = new test::RunningServer(QLOOM_DEMO_MODEL_DIR, so);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static ThroughputSpec spec() {
    ThroughputSpec s;
    s.isl = 8;
    s.osl = 4;
    s.concurrency = 2;
    s.server = server_->url() + "/v1";
    s.api_key = "sekrit";
    return s;
  }
  static test::RunningServer* server_;
};
test::RunningServer* ThroughputServer::server_ = nullptr;

TEST_F(ThroughputServer, MeasuresQloomServe) {
  const ThroughputSpec s = spec();
  const ThroughputMeasurement m = measure_throughput(QLOOM_DEMO_MODEL_DIR, "baseline", s);
  EXPECT_EQ(m.backend, "qloom");
  EXPECT_EQ(m.runtime, "server");  // the client cannot see the server's runtime
  EXPECT_NE(m.note.find("--runtime native by default"), std::string::npos) << m.note;
  ASSERT_GE(m.timed_samples, 3);
  for (const RunSample& r : m.runs) {
    EXPECT_EQ(r.output_tokens, 20 * s.osl);  // usage.completion_tokens, EOS ignored
    EXPECT_EQ(r.prompt_tokens, 20 * s.isl);
    ASSERT_TRUE(r.latency_ms_median.has_value());
    EXPECT_FALSE(r.ttft_ms_median.has_value());
  }
  // The same prompts as the in-process runner draws.
  ThroughputSpec local = s;
  local.server.clear();
  EXPECT_EQ(m.prompts_hash, prompts_hash(open_workload(QLOOM_DEMO_MODEL_DIR, local)->prompts()));
  EXPECT_EQ(m.to_json()["spec"]["api_key"], "***");
}

// The demo model never picks its EOS (</s>, id 2) greedily, so this copy of
// it declares a token it does pick as an extra eos_token_id: the greedy
// token at the first step whose token is new to the output.
struct EosCopy {
  test::TempDir dir{"tput-eos"};
  int32_t eos = -1;
  int64_t step = -1;  // tokens before it
};

EosCopy demo_with_early_eos(const std::vector<int32_t>& prompt) {
  EosCopy c;
  exporter::LoadedModel lm = exporter::load_for_eval(QLOOM_DEMO_MODEL_DIR);
  auto cache = lm.model->new_cache(64);
  std::vector<float> logits = lm.model->forward(prompt, *cache, true, &lm.runtime.hooks);
  std::vector<int32_t> seen;
  for (int64_t k = 0; k < 32 && c.eos < 0; ++k) {
    const auto next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (k >= 3 && std::find(seen.begin(), seen.end(), next) == seen.end()) {
      c.eos = next;
      c.step = k;
    }
    seen.push_back(next);
    const int32_t one[1] = {next};
    logits = lm.model->forward(one, *cache, true, &lm.runtime.hooks);
  }
  for (const auto& e : std::filesystem::directory_iterator(QLOOM_DEMO_MODEL_DIR))
    std::filesystem::copy(e.path(), c.dir / e.path().filename());
  json cfg = json::parse(test::read_file(c.dir / "config.json"));
  cfg["eos_token_id"] = {2, c.eos};
  c.dir.write("config.json", cfg.dump());
  return c;
}

TEST(ThroughputServe, ServeHonoursIgnoreEosAndMinTokens) {
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const EosCopy copy = demo_with_early_eos(prompt);
  ASSERT_GE(copy.eos, 0);
  serve::ServerOptions so;
  so.port = 0;
  so.threads = 1;
  serve::Server server(copy.dir.path(), so);
  const int port = server.bind();
  std::thread t([&] { server.run(); });
  auto complete = [&](json body) {
    body["prompt"] = prompt;
    body["temperature"] = 0;
    const test::HttpReply r = test::http_request(port, "POST", "/v1/completions", body.dump());
    return std::make_pair(r.status, json::parse(r.body, nullptr, false));
  };
  // Without the extensions the declared EOS ends the output (and is counted).
  auto [s0, plain] = complete({{"max_tokens", 40}});
  EXPECT_EQ(s0, 200);
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(plain["usage"]["completion_tokens"], copy.step + 1);
  // ignore_eos: generation goes on to max_tokens, the same greedy tokens.
  auto [s1, ignored] = complete({{"max_tokens", 40}, {"ignore_eos", true}});
  EXPECT_EQ(s1, 200);
  EXPECT_EQ(ignored["usage"]["completion_tokens"], 40);
  EXPECT_EQ(ignored["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ignored["choices"][0]["text"].get<std::string>().rfind(plain["choices"][0]["text"].get<std::string>(), 0),
            0u);
  // min_tokens: the EOS is masked until then, so the output runs to max_tokens = min_tokens.
  auto [s2, least] = complete({{"max_tokens", 12}, {"min_tokens", 12}});
  EXPECT_EQ(s2, 200);
  EXPECT_EQ(least["usage"]["completion_tokens"], 12);
  EXPECT_EQ(least["choices"][0]["finish_reason"], "length");
  // min_tokens over max_tokens (given or the default 16) or negative: 400 naming it.
  for (const json& bad : {json{{"max_tokens", 3}, {"min_tokens", 4}}, json{{"min_tokens", 17}},
                          json{{"min_tokens", -1}}}) {
    auto [status, body] = complete(bad);
    EXPECT_EQ(status, 400) << bad.dump();
    EXPECT_EQ(body["error"]["param"], "min_tokens") << bad.dump();
  }
  server.stop();
  t.join();
}

TEST_F(ThroughputServer, ServerRefusalsAreTyped) {
  ThroughputSpec s = spec();
  s.osl = 600;  // past the demo's context: the server answers 400, quoted
  s.isl = 8;
  Error e = test::catch_error([&] { measure_throughput(QLOOM_DEMO_MODEL_DIR, "x", s); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(std::string(e.what()).find("400"), std::string::npos) << e.what();
  s = spec();
  s.api_key = "wrong";
  EXPECT_EQ(test::catch_error([&] { open_workload(QLOOM_DEMO_MODEL_DIR, s); }).kind(), ErrorKind::kInvalidInput);
  s = spec();
  s.served_model = "other";
  EXPECT_EQ(test::catch_error([&] { open_workload(QLOOM_DEMO_MODEL_DIR, s); }).item(), "--model");
}

// A one-connection-at-a-time HTTP server that answers GET /v1/models with
// one model and POST /v1/completions with `completion_body`.
class FakeServer {
 public:
  explicit FakeServer(std::string completion_body) : body_(std::move(completion_body)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void loop() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      for (;;) {
        const size_t head = req.find("\r\n\r\n");
        if (head != std::string::npos) {
          const size_t cl = req.find("Content-Length: ");
          const size_t want = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
          if (req.size() >= head + 4 + want) break;
        }
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, size_t(n));
      }
      const std::string body = req.rfind("GET /v1/models", 0) == 0
                                    ? R"({"object":"list","data":[{"id":"fake","owned_by":"vllm"}]})"
                                    : body_;
      const std::string res = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)::send(c, res.data(), res.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  std::string body_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ThroughputSpec fake_spec(const FakeServer& f) {
  ThroughputSpec s;
  s.isl = 8;
  s.osl = 4;
  s.concurrency = 2;
  s.server = f.url();
  return s;
}

TEST(ThroughputFakeServer, WholeAnswersAreCountedFromUsage) {
  FakeServer f(R"({"choices":[{"text":"abcd"}],"usage":{"prompt_tokens":8,"completion_tokens":4}})");
  const auto w = open_workload(QLOOM_DEMO_MODEL_DIR, fake_spec(f));
  EXPECT_EQ(w->backend(), "vllm");
  EXPECT_EQ(w->runtime(), "server");
  const RunSample r = w->run();
  EXPECT_EQ(r.output_tokens, 80);
  EXPECT_EQ(r.prompt_tokens, 160);
}

TEST(ThroughputFakeServer, AServerThatStopsEarlyIsRefused) {
  FakeServer f(R"({"choices":[{"text":"abc"}],"usage":{"prompt_tokens":8,"completion_tokens":3}})");
  const Error e = test::catch_error([&] { measure_throughput(QLOOM_DEMO_MODEL_DIR, "x", fake_spec(f)); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "usage.completion_tokens");
  EXPECT_NE(std::string(e.what()).find("3 of the 4"), std::string::npos) << e.what();
}

TEST(ThroughputFakeServer, AnAnswerWithoutUsageIsRefused) {
  FakeServer f(R"({"choices":[{"text":"abcd"}]})");
  const Error e = test::catch_error([&] { open_workload(QLOOM_DEMO_MODEL_DIR, fake_spec(f))->run(); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "usage.completion_tokens");
}

TEST(ThroughputFakeServer, NoServerIsNotFound) {
  ThroughputSpec s;
  s.isl = 8;
  s.osl = 4;
  s.concurrency = 1;
  {
    FakeServer gone("{}");
    s.server = gone.url();
  }  // closed: nothing listens there now
  EXPECT_EQ(test::catch_error([&] { open_workload(QLOOM_DEMO_MODEL_DIR, s); }).kind(), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace qloom::perf
