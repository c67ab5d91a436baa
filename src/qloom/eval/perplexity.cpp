#include "qloom/eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/eval/finite_logits.h"
#include "qloom/quant/distortion.h"

namespace qloom::eval {

const char* protocol_name(Protocol p) { return p == Protocol::kQuark ? "quark" : "llamacpp"; }

Protocol parse_protocol(const std::string& name) {
  if (name == "quark") return Protocol::kQuark;
  if (name == "llamacpp" || name == "llama.cpp") return Protocol::kLlamaCpp;
  throw Error(ErrorKind::kUsage, "", "--protocol", "unknown protocol '" + name + "'",
              "use quark or llamacpp");
}

int64_t default_seq_len(Protocol p, int64_t max_position_embeddings) {
  const int64_t base = p == Protocol::kQuark ? 2048 : 512;
  return max_position_embeddings > 0 ? std::min(base, max_position_embeddings) : base;
}

std::vector<Window> make_windows(Protocol p, int64_t n_tokens, int64_t seq_len,
                                 std::optional<int32_t> bos) {
  if (seq_len < 2)
    throw Error(ErrorKind::kUsage, "", "--seq_len", "sequence length must be at least 2");
  std::vector<Window> out;
  if (p == Protocol::kQuark) {
    const int64_t n = n_tokens / seq_len;
    if (n < 1)
      throw_invalid("", "--dataset",
                    "the data set tokenizes to " + std::to_string(n_tokens) +
                        " tokens, fewer than one window of " + std::to_string(seq_len),
                    "use a longer text or a smaller --seq_len");
    for (int64_t i = 0; i < n; ++i) out.push_back(Window{i * seq_len, seq_len, 1, std::nullopt});
    return out;
  }
  if (n_tokens < 2 * seq_len)
    throw_invalid("", "--dataset",
                  "the data set tokenizes to " + std::to_string(n_tokens) +
                      " tokens; the llamacpp protocol needs at least " +
                      std::to_string(2 * seq_len) + " (2 x context " + std::to_string(seq_len) + ")",
                  "use a longer text or a smaller --seq_len");
  const int64_t n = n_tokens / seq_len;
  const int64_t first = seq_len / 2;
  for (int64_t i = 0; i < n; ++i) out.push_back(Window{i * seq_len, seq_len, first + 1, bos});
  return out;
}

std::vector<int32_t> window_tokens(const std::vector<int32_t>& doc, const Window& w) {
  std::vector<int32_t> t(doc.begin() + w.begin, doc.begin() + w.begin + w.length);
  if (w.bos && !t.empty()) t[0] = *w.bos;
  return t;
}

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  return quant::log_sum_exp(logits, vocab) - double(logits[target]);
}

double NllStats::ppl() const { return std::exp(mean()); }

double NllStats::ppl_stderr() const {
  if (count < 2) return 0.0;
  const double m = mean();
  const double v = sum2 / double(count) - m * m;
  if (!(v > 0)) return 0.0;
  return std::sqrt(v / double(count - 1)) * ppl();
}

NllStats score_window(const std::vector<int32_t>& doc, const Window& w, const float* logits,
                      int64_t vocab, std::vector<double>* per_token) {
  NllStats s;
  // Position j's logits predict token j+1 of the window; the original
  // document token is the target (the BOS replacement only affects inputs, and
  // position 0 is never a target in either protocol).
  for (int64_t t = w.first_target; t < w.length; ++t) {
    const int32_t target = doc[size_t(w.begin + t)];
    if (target < 0 || target >= vocab)
      throw_invalid("", "", "token id " + std::to_string(target) + " outside the vocabulary");
    const double nll = token_nll(logits + size_t(t - 1) * size_t(vocab), vocab, target);
    s.add(nll);
    if (per_token != nullptr) per_token->push_back(nll);
  }
  return s;
}

PplResult run_perplexity(engine::Model& model, const engine::ForwardHooks* hooks,
                         const std::vector<int32_t>& doc, const std::vector<Window>& windows,
                         const std::function<bool(int64_t)>& on_window) {
  PplResult r;
  const int64_t vocab = model.config().vocab_size;
  int64_t max_len = 0, scored = 0;
  for (const Window& w : windows) {
    max_len = std::max(max_len, w.length);
    scored += std::max<int64_t>(w.scored(), 0);
  }
  r.token_nll.reserve(size_t(scored));
  std::unique_ptr<engine::KvCache> cache = model.new_cache(max_len);
  for (size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    const std::vector<int32_t> toks = window_tokens(doc, w);
    const std::vector<float> logits = finite_forward(model, toks, *cache, hooks, "ppl");
    r.nll.merge(score_window(doc, w, logits.data(), vocab, &r.token_nll));
    ++r.windows;
    if (on_window && !on_window(r.windows)) break;
  }
  r.tokens_scored = r.nll.count;
  return r;
}

}  // namespace qloom::eval
