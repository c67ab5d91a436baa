// Perplexity: windowing of a tokenized document for the two protocols, the
// per-token NLL maths, and the run over a model.
//
// Protocol kQuark (amd/Quark examples/torch/language_modeling/llm_eval/
// evaluation.py, ppl_eval): the document is tokenized once (BOS as the
// tokenizer adds it), cut into nsamples = n_tokens / seq_len non-overlapping
// windows (the last partial window is dropped); each window is run as is (no
// BOS inserted) and every position but the first is predicted: logits[0..L-2]
// against tokens[1..L-1]. Quark averages the per-window CrossEntropy means,
// which with equal windows is the mean NLL over all predicted tokens.
//
// Protocol kLlamaCpp (ggml-org/llama.cpp tools/perplexity/perplexity.cpp,
// perplexity()): n_ctx = 512 by default; n_chunk = n_tokens / n_ctx windows
// tokens[i*n_ctx, (i+1)*n_ctx); needs n_tokens >= 2*n_ctx; the window's first
// token is replaced by BOS when the tokenizer adds BOS; only the second half
// is scored: first = n_ctx/2, logits[first..n_ctx-2] against
// tokens[first+1..n_ctx-1] (n_ctx - first - 1 tokens per window).
//
// Standard error (llama.cpp, same file): with mean m = sum(nll)/N and
// v = sum(nll^2)/N - m^2, stderr(ppl) = ppl * sqrt(v / (N - 1)).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qloom/engine/model.h"

namespace qloom::eval {

enum class Protocol { kQuark, kLlamaCpp };
const char* protocol_name(Protocol p);           // "quark", "llamacpp"
Protocol parse_protocol(const std::string& name);  // throws kUsage

// Default window length: kQuark min(2048, max_position_embeddings) (2048 when
// that is unknown, i.e. <= 0); kLlamaCpp min(512, max_position_embeddings).
int64_t default_seq_len(Protocol p, int64_t max_position_embeddings);

struct Window {
  int64_t begin = 0;               // first token index in the document
  int64_t length = 0;              // tokens run through the model
  int64_t first_target = 1;        // index (within the window) of the first scored token
  std::optional<int32_t> bos;      // replaces the window's first token when set
  int64_t scored() const { return length - first_target; }
};

// Throws kInvalidInput when the document is too short for one window
// (kLlamaCpp: shorter than 2*seq_len, as llama.cpp refuses), naming the counts.
// `bos`: the BOS id when the tokenizer adds one (used by kLlamaCpp only).
std::vector<Window> make_windows(Protocol p, int64_t n_tokens, int64_t seq_len,
                                 std::optional<int32_t> bos);

// The tokens a window runs (with the BOS replacement applied).
std::vector<int32_t> window_tokens(const std::vector<int32_t>& doc, const Window& w);

// -log softmax(logits)[target], computed in double with max subtraction.
double token_nll(const float* logits, int64_t vocab, int32_t target);

// Running sums of per-token NLLs.
struct NllStats {
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  void add(double nll) {
    sum += nll;
    sum2 += nll * nll;
    ++count;
  }
  void merge(const NllStats& o) {
    sum += o.sum;
    sum2 += o.sum2;
    count += o.count;
  }
  double mean() const { return count ? sum / double(count) : 0.0; }
  double ppl() const;         // exp(mean)
  double ppl_stderr() const;  // llama.cpp formula above; 0 when count < 2 or variance <= 0
};

// Scores one window's logits [w.length, vocab] against the document. When
// `per_token` is given, each scored token's NLL is appended to it, in order.
NllStats score_window(const std::vector<int32_t>& doc, const Window& w, const float* logits,
                      int64_t vocab, std::vector<double>* per_token = nullptr);

struct PplResult {
  int64_t windows = 0;
  int64_t tokens_scored = 0;
  NllStats nll;
  // Every scored token's NLL, windows in order and each window's targets in
  // order (tokens_scored values): what pairs two models' runs token by token.
  std::vector<double> token_nll;
};

// Runs `windows` through `model` one at a time (fresh cache per window) and
// scores them. `on_window(done)` is called after each window (progress,
// budgeting); returning false stops early.
PplResult run_perplexity(engine::Model& model, const engine::ForwardHooks* hooks,
                         const std::vector<int32_t>& doc, const std::vector<Window>& windows,
                         const std::function<bool(int64_t done)>& on_window = {});

}  // namespace qloom::eval
