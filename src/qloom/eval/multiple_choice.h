// Multiple-choice scoring by log-likelihood, as lm-eval (0.4.13) scores
// output_type multiple_choice with a causal HF model:
//   - encode_pair (lm_eval/api/model.py _encode_pair): trailing whitespace of
//     the context moves to the continuation; whole = encode(context +
//     continuation), ctx = encode(context) (both with the tokenizer's own
//     special tokens, as lm-eval's default add_bos_token=None leaves them);
//     the continuation's tokens are whole[len(ctx):].
//   - the model runs (ctx + cont)[-(max_length+1):][:-1] in one forward pass
//     (lm_eval/models/huggingface.py _loglikelihood_tokens); the option's
//     log-likelihood is the sum of log_softmax at the last len(cont)
//     positions, and it is "greedy" when every one of them is the argmax.
//   - metrics (lm_eval/api/task.py process_results): acc = argmax(ll) is
//     gold; acc_norm = argmax(ll / len(choice)) with len in characters
//     (Unicode code points, Python len) of the option without the delimiter;
//     acc_bytes the same over UTF-8 bytes. The first maximum wins (numpy
//     argmax). stderr = sample standard deviation / sqrt(n).
// Each option is one forward pass of its whole sequence from an empty cache,
// so a score does not depend on what else was scored (and equals what an
// OpenAI-compatible server returns for the same tokens with echo+logprobs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "qloom/engine/model.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/mc_tasks.h"

namespace qloom::eval {

struct TokenPair {
  std::vector<int32_t> context, continuation;
};

// Throws kInvalidInput for an empty context (lm-eval asserts it is not) or a
// continuation that encodes to no tokens.
TokenPair encode_pair(const text::Tokenizer& tok, const std::string& context,
                      const std::string& continuation);

struct OptionScore {
  double loglik = 0;
  bool greedy = false;
  int64_t tokens = 0;  // continuation tokens scored
};

// The log-likelihood of pair.continuation after pair.context, truncated on the
// left to max_length + 1 tokens as lm-eval does. `cache` is reused, and
// replaced by a larger one when the sequence does not fit.
OptionScore score_option(engine::Model& model, const engine::ForwardHooks* hooks,
                         const TokenPair& pair, int64_t max_length,
                         std::unique_ptr<engine::KvCache>& cache);

struct McItem {
  int gold = 0;
  std::vector<OptionScore> options;
  std::vector<int64_t> chars, bytes;  // per option: length of the choice text
  int pred = 0, pred_norm = 0, pred_bytes = 0;
  bool acc() const { return pred == gold; }
  bool acc_norm() const { return pred_norm == gold; }
  bool acc_bytes() const { return pred_bytes == gold; }
};

// argmax(ll), argmax(ll / chars), argmax(ll / bytes) for the item.
void decide(McItem& item);

struct MetricValue {
  double value = 0, stderr_ = 0;
};
// Mean and lm-eval's mean_stderr of 0/1 scores (stderr 0 when n < 2).
MetricValue mean_and_stderr(const std::vector<uint8_t>& correct);

struct McResult {
  std::vector<McItem> items;
  int64_t n() const { return int64_t(items.size()); }
  std::vector<uint8_t> correct(bool normalized) const;
};

// Scores one document's options (its token pairs, in option order): the
// engine in-process, or an OpenAI-compatible server (openai_client.h).
using OptionScorer = std::function<std::vector<OptionScore>(const std::vector<TokenPair>& options)>;

// score_option over `model` for each pair (one cache reused).
OptionScorer engine_scorer(engine::Model& model, const engine::ForwardHooks* hooks, int64_t max_length);

// Scores docs[0..n) with their few-shot lists (choose_fewshot), `parallel`
// documents at a time (each batch finished before the next; results in
// document order, so the same whatever `parallel` is). `on_doc(done)` after
// each document; returning false stops early.
McResult run_multiple_choice(const OptionScorer& scorer, const text::Tokenizer& tok, const McTaskInfo& task,
                             const std::vector<McExample>& docs,
                             const std::vector<std::vector<const McExample*>>& fewshot, size_t n,
                             const std::function<bool(int64_t done)>& on_doc = {}, unsigned parallel = 1);

// The in-process form: engine_scorer(model, hooks, max_length), one at a time.
McResult run_multiple_choice(engine::Model& model, const engine::ForwardHooks* hooks,
                             const text::Tokenizer& tok, const McTaskInfo& task,
                             const std::vector<McExample>& docs,
                             const std::vector<std::vector<const McExample*>>& fewshot, size_t n,
                             int64_t max_length,
                             const std::function<bool(int64_t done)>& on_doc = {});

}  // namespace qloom::eval
