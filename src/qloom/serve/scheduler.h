// serve::Scheduler — owns the model and runs every admitted request on one
// thread. A request (Job) holds one sequence per prompt, each with its own
// KvCache. Each round the scheduler prefills the sequences that arrived
// since the last round, then decodes one token for every active sequence.
// Batching is at the scheduler level: the engine's forward() is called once
// per sequence per round (no GEMM across sequences; that needs an engine
// batch API).
//
// Numerics: a sequence that asks for its prompt's log-probabilities runs the
// prompt minus its last token in one forward from an empty cache, exactly as
// eval::score_option does (so the numbers are bit-identical to the
// in-process scorer), then the last prompt token to start generating.
// Otherwise the whole prompt is prefilled in one forward (last row only), as
// eval::generate_greedy does, and greedy generation gives its tokens.
// Generation stops at an EOS id (finish "stop"; the token is reported in
// tokens/logprobs and usage but not in the text), when the decoded text
// (skip_special_tokens) holds a stop string (finish "stop", the text cut
// before it), or after max_tokens (finish "length"). vLLM's extensions:
// ignore_eos (EOS ids do not stop) and min_tokens (the EOS ids' logits are
// set to -inf before sampling, and stop strings are not checked, until
// min_tokens tokens exist).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qloom/engine/model.h"
#include "qloom/text/tokenizer.h"
#include "qloom/serve/api_error.h"
#include "qloom/serve/sampler.h"

namespace qloom::serve {

struct SeqSpec {
  std::vector<int32_t> prompt;  // non-empty, ids < vocab, prompt + max_tokens <= context
  int64_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool prompt_logprobs = false;  // log-probabilities of prompt tokens 1..n-1
  int top_logprobs = -1;         // -1: no log-probabilities; k: the chosen token's and the top k
  bool ignore_eos = false;       // an EOS token does not end the sequence (it stays in tokens / usage)
  int64_t min_tokens = 0;        // before this many tokens: EOS logits masked, stop strings not checked
};

struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0;                            // log softmax in double (eval::token_nll)
  std::vector<std::pair<int32_t, double>> top;   // most likely first
};

struct SeqResult {
  std::vector<TokenLogprob> prompt_logprobs;  // prompt tokens 1..n-1, when asked
  std::vector<int32_t> tokens;                // generated, EOS included
  std::vector<TokenLogprob> token_logprobs;   // per generated token, when asked
  std::string text;                           // decoded, cut at the first stop string
  std::string finish_reason;                  // "stop" or "length"
};

// One streamed piece of a sequence: text appended to what was sent before,
// and the finish reason on its last event.
struct SeqEvent {
  size_t index = 0;
  std::string delta;
  bool finished = false;
  std::string finish_reason;
};

// A request's hand-over between the scheduler thread and its HTTP handler.
class Job {
 public:
  explicit Job(std::vector<SeqSpec> seqs);

  const std::vector<SeqSpec>& specs() const { return specs_; }
  // Handler side. take(): waits up to `timeout` for events (returns them,
  // possibly none). wait(): until every sequence finished or the job failed.
  std::vector<SeqEvent> take(std::chrono::milliseconds timeout);
  void wait();
  bool done() const;
  std::optional<ApiError> error() const;
  const std::vector<SeqResult>& results() const { return results_; }  // after done() without error
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  // Scheduler side.
  void push(SeqEvent e);
  void finish(size_t index, SeqResult r, std::string last_delta);
  void fail(const ApiError& e);

 private:
  std::vector<SeqSpec> specs_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<SeqEvent> events_;
  std::vector<SeqResult> results_;
  size_t finished_ = 0;
  std::optional<ApiError> error_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  size_t max_concurrency = 8;          // admitted requests at once; more: 429
  std::vector<int32_t> eos_ids;        // tokenizer EOS + config eos_token_id
  // Decode all active sequences' next tokens in one Model::forward_batch
  // pass (each sequence gets the same logits it would alone: see there);
  // off for a runtime whose hooks mix rows (CheckpointRuntime::
  // rows_independent), which then decodes one sequence at a time.
  bool batch_decode = true;
};

class Scheduler {
 public:
  Scheduler(engine::Model& model, const engine::ForwardHooks* hooks, const text::Tokenizer& tok,
            SchedulerOptions opt);
  ~Scheduler();  // stops the thread; unfinished jobs fail with 503

  // Admits a request or throws ApiError 429 when max_concurrency are in flight.
  std::shared_ptr<Job> submit(std::vector<SeqSpec> seqs);
  void stop();

  size_t in_flight() const { return in_flight_; }
  uint64_t tokens_generated() const { return tokens_generated_; }

 private:
  struct Active;
  void loop();
  void admit(std::vector<std::shared_ptr<Job>>& incoming);
  bool prefill(Active& a);
  bool step(Active& a);
  void decode_round(const std::vector<Active*>& ready);
  void emit(Active& a, bool final);
  TokenLogprob logprob_of(const float* row, int32_t id, int k) const;
  void release(Active& a);  // once per sequence: its job's slot frees with the last one

  engine::Model& model_;
  const engine::ForwardHooks* hooks_;
  const text::Tokenizer& tok_;
  SchedulerOptions opt_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> incoming_;
  std::vector<std::unique_ptr<Active>> active_;
  std::unordered_map<const Job*, size_t> live_;  // unreleased sequences per job (scheduler thread only)
  std::atomic<size_t> in_flight_{0};
  std::atomic<uint64_t> tokens_generated_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace qloom::serve
