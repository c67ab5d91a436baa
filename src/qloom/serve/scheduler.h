// serve::Scheduler — owns the model and runs every admitted request on one
// thread. A request (Job) holds one sequence per prompt, each with its own
// KvCache, which takes memory as the sequence grows (engine::KvCacheImpl).
//
// Admission and fairness. submit() admits up to max_concurrency requests
// (more: 429) and refuses (400 "kv_cache_budget_exceeded") one whose single
// sequence could need more KV cache than the whole budget (prompt +
// max_tokens positions). Admitted requests wait in a queue; each round the
// scheduler starts waiting sequences — one per request in turn, oldest
// request first, as many passes as fit — while (a) the prompt tokens started
// this round stay under prefill_tokens_per_round (at least one sequence
// starts), (b) the worst-case KV bytes of the running sequences stay within
// the budget (a sequence that does not fit waits for others to finish), and
// (c) at most max_active_sequences run, at most max_active_sequences /
// max_concurrency of them one request's (so every admitted request can start
// at once). Then it decodes one token for every
// running sequence. So a request of many prompts is prefilled in bounded
// chunks between decode steps, and another client's first token waits at
// most about one such round.
//
// Cancellation: Job::cancel() (a client gone) ends the job at once — wait()
// returns with a 499 "cancelled" error — and the scheduler generates no
// token for it after the round in progress.
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
  // From any thread: no token is generated for the job after the scheduler's
  // round in progress; wait() / take() return with a 499 "cancelled" error.
  void cancel();
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
  // Worst-case KV-cache bytes of the running sequences (0: default_kv_budget()).
  size_t kv_budget_bytes = 0;
  int64_t prefill_tokens_per_round = 1024;  // prompt tokens started per round (>= 1 sequence)
  size_t max_active_sequences = 256;         // running sequences at once (vLLM's max_num_seqs)
  std::vector<int32_t> eos_ids;        // tokenizer EOS + config eos_token_id
  // Decode all active sequences' next tokens in one Model::forward_batch
  // pass (each sequence gets the same logits it would alone: see there);
  // off for a runtime whose hooks mix rows (CheckpointRuntime::
  // rows_independent), which then decodes one sequence at a time.
  bool batch_decode = true;
};

// Half the memory available now (MemAvailable in /proc/meminfo, else the
// free physical pages): called after the model is loaded, it leaves the
// other half to the OS, the HTTP side and the activations.
size_t default_kv_budget();

// The KV cache's memory, for /health and tests (bytes).
struct KvStats {
  size_t budget = 0;         // resolved kv_budget_bytes
  size_t reserved = 0;       // worst case of the running sequences
  size_t allocated = 0;      // held by their caches now (after the last round)
  size_t peak_allocated = 0;
  size_t peak_reserved = 0;
};

class Scheduler {
 public:
  Scheduler(engine::Model& model, const engine::ForwardHooks* hooks, const text::Tokenizer& tok,
            SchedulerOptions opt);
  ~Scheduler();  // stops the thread; unfinished jobs fail with 503

  // Admits a request or throws ApiError 429 when max_concurrency are in
  // flight, 400 when one of its sequences alone exceeds the KV budget.
  std::shared_ptr<Job> submit(std::vector<SeqSpec> seqs);
  void stop();

  size_t in_flight() const { return in_flight_; }
  uint64_t tokens_generated() const { return tokens_generated_; }
  KvStats kv_stats() const;
  // Worst-case KV bytes of one sequence (prompt + max_tokens positions).
  size_t kv_bytes(const SeqSpec& s) const;

 private:
  struct Active;
  struct Waiting {
    std::shared_ptr<Job> job;
    size_t next = 0;  // its first sequence not started
  };
  void loop();
  void drop_abandoned();
  void start_sequences();
  bool try_start(Waiting& w, int64_t& prompt_tokens);
  size_t running_of(const Job* job) const;
  void start(const std::shared_ptr<Job>& job, size_t index);
  void decode_active();
  void sweep();
  void account_kv();
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
  std::deque<Waiting> waiting_;                  // scheduler thread only
  std::vector<std::unique_ptr<Active>> active_;
  std::unique_ptr<engine::KvCache> probe_;       // an empty cache: bytes_for() of a sequence
  std::atomic<size_t> kv_reserved_{0}, kv_allocated_{0}, kv_peak_allocated_{0}, kv_peak_reserved_{0};
  std::unordered_map<const Job*, size_t> live_;  // unreleased sequences per job (scheduler thread only)
  std::atomic<size_t> in_flight_{0};
  std::atomic<uint64_t> tokens_generated_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace qloom::serve
