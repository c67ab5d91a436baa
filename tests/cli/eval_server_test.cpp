// Tier-3 evaluation (eval/openai_client.h) against `qloom serve` on
// 127.0.0.1 with the demo model: scores over HTTP are exactly the in-process
// ones (multiple-choice log-likelihoods bit for bit, gsm8k generations byte
// for byte), and the client's failures are typed and name the server.
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/gsm8k.h"
#include "qloom/eval/openai_client.h"
#include "qloom/eval/run_eval.h"
#include "qloom/serve/server.h"
#include "support/running_server.h"

namespace qloom {
namespace {

class EvalServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve::ServerOptions so;
    so.api_key = "sekrit";
    server_ = new test::RunningServer(QLOOM_DEMO_MODEL_DIR, so);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static std::string url() { return server_->url(); }

  static eval::EvalOptions options(const std::string& task, int64_t limit, bool over_http) {
    eval::EvalOptions o;
    o.model_dir = QLOOM_DEMO_MODEL_DIR;
    o.task = task;
    o.limit = limit;
    o.threads = 1;
    if (over_http) {
      o.server = url();
      o.api_key = "sekrit";
      o.concurrency = 3;
    }
    return o;
  }

  static test::RunningServer* server_;
};
test::RunningServer* EvalServer::server_ = nullptr;

TEST_F(EvalServer, HellaswagOverHttpEqualsInProcessBitForBit) {
  const eval::EvalReport local = eval::run_eval(options("hellaswag", 12, false));
  const eval::EvalReport http = eval::run_eval(options("hellaswag", 12, true));
  ASSERT_EQ(local.samples.mc_items.size(), 12u);
  ASSERT_EQ(http.samples.mc_items.size(), 12u);
  for (size_t d = 0; d < 12; ++d)
    for (size_t i = 0; i < 4; ++i) {
      const auto& a = local.samples.mc_items[d].options[i];
      const auto& b = http.samples.mc_items[d].options[i];
      EXPECT_EQ(a.loglik, b.loglik) << "doc " << d << " option " << i;  // exact
      EXPECT_EQ(a.tokens, b.tokens);
    }
  EXPECT_EQ(local.acc, http.acc);
  EXPECT_EQ(local.acc_norm, http.acc_norm);
  EXPECT_EQ(local.backend, "qloom");
  EXPECT_EQ(http.backend, "qloom");
  EXPECT_EQ(http.server, url());
  EXPECT_EQ(http.served_model, "stories260K-hf-bf16");
}

TEST_F(EvalServer, Gsm8kGenerationsOverHttpEqualInProcess) {
  const std::vector<eval::Gsm8kDoc> test = eval::load_gsm8k_jsonl(eval::bundled_file("gsm8k/test.jsonl"));
  const std::vector<eval::Gsm8kDoc> train = eval::load_gsm8k_jsonl(eval::bundled_file("gsm8k/train.jsonl"));
  const text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  engine::LoadOptions lo;
  lo.threads = 1;
  eval::LoadedModel m = eval::load_for_eval(QLOOM_DEMO_MODEL_DIR, lo);
  eval::Gsm8kConfig cfg;
  cfg.max_gen_toks = 24;
  cfg.num_fewshot = 1;  // keeps the prompts inside the demo model's 512 positions
  const eval::Gsm8kResult local = eval::run_gsm8k(*m.model, &m.runtime.hooks, tok, test, train, 3, cfg);
  eval::ServerOptions so;
  so.url = url() + "/v1/";
  so.api_key = "sekrit";
  so.max_length = 512;
  eval::OpenAiClient client(so);
  client.probe();
  const eval::Generator gen = [&](const std::vector<int32_t>& ids, const eval::GenerateOptions& g) {
    return client.generate(ids, g.max_new, g.stops);
  };
  const eval::Gsm8kResult http = eval::run_gsm8k(gen, tok, test, train, 3, cfg, 512, {});
  ASSERT_EQ(local.items.size(), 3u);
  ASSERT_EQ(http.items.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(local.items[i].response, http.items[i].response) << i;
}

TEST_F(EvalServer, ClientFailuresAreTypedAndNameTheServer) {
  eval::ServerOptions so;
  so.url = url();
  so.api_key = "wrong";
  so.max_retries = 0;
  eval::OpenAiClient bad_key(so);
  try {
    bad_key.probe();
    FAIL() << "no error for a wrong key";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("HTTP 401"), std::string::npos) << e.what();
  }
  so.api_key = "sekrit";
  so.model = "no-such-model";
  eval::OpenAiClient wrong_model(so);
  EXPECT_THROW(wrong_model.probe(), Error);
  so.url = "http://127.0.0.1:1";  // nothing listens there
  so.model.clear();
  eval::OpenAiClient down(so);
  try {
    down.probe();
    FAIL() << "no error for a server that is down";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
  eval::EvalOptions ppl = options("ppl", 1, true);
  EXPECT_THROW(eval::run_eval(ppl), Error);  // needs full distributions: a usage error before any work
}

}  // namespace
}  // namespace qloom
