// Tier-3 evaluation: scoring through any OpenAI-compatible server (qloom
// serve, vLLM, SGLang) the way lm-eval's `local-completions` model does
// (lm_eval/models/openai_completions.py, 0.4.13):
//   log-likelihood: POST /v1/completions {"model", "prompt": [token ids of
//   context + continuation, one list per option], "echo": true,
//   "max_tokens": 1, "logprobs": 1, "temperature": 0, "seed"}; the option's
//   score is the sum of choices[k].logprobs.token_logprobs over the
//   continuation's positions, greedy when each position's top_logprobs
//   maximum is the prompt's own token.
//   generation (gsm8k): the prompt's token ids, temperature 0, max_tokens,
//   stop; the answer is choices[0].text.
// The tokenizer stays on the client (the model directory given to `qloom
// eval`), so the server scores exactly the tokens the in-process path does.
// Failures: transport errors, 429 and 5xx are retried (max_retries, with
// backoff 0.5 s, 1 s, 2 s ...); any other status, or a body that is not the
// expected JSON, is a kInvalidInput error quoting the server's message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qloom/eval/multiple_choice.h"

namespace qloom::eval {

struct ServerOptions {
  std::string url;      // base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted)
  std::string api_key;  // sent as "Authorization: Bearer ..." when set
  std::string model;    // served model name; empty: the first of GET /v1/models
  unsigned concurrency = 4;
  int max_retries = 3;
  long timeout_s = 600;
  uint64_t seed = 1234;  // lm-eval's default request seed
  int64_t max_length = 2048;  // lm-eval TemplateAPI's default max_length
};

struct ServerInfo {
  std::string model;     // the model id requests name
  std::string owned_by;  // /v1/models' owned_by ("vllm", "sglang", "qloom", ...)
  // "vllm", "sglang", "qloom" when owned_by says so, else "openai-compatible".
  std::string backend;
};

class OpenAiClient {
 public:
  explicit OpenAiClient(ServerOptions options);

  // GET /v1/models. Throws kNotFound when the server is unreachable or lists
  // no model, kInvalidInput when --model is not among the ones it lists.
  ServerInfo probe();

  // One request for all `pairs` (see above); the model is probe()'s.
  std::vector<OptionScore> loglikelihood(const std::vector<TokenPair>& pairs);

  // Greedy generation of up to max_tokens after `prompt`, cut at `stop`.
  std::string generate(const std::vector<int32_t>& prompt, int64_t max_tokens,
                       const std::vector<std::string>& stop);

  const ServerOptions& options() const { return o_; }

 private:
  std::string post(const std::string& path, const std::string& body);
  std::string base() const;
  ServerOptions o_;
  ServerInfo info_;
};

// The scorer run_multiple_choice takes (`client` must outlive it).
OptionScorer server_scorer(OpenAiClient& client);

}  // namespace qloom::eval
