#include "qloom/eval/multiple_choice.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <memory>

#include "qloom/core/error.h"
#include "qloom/eval/finite_logits.h"
#include "qloom/text/unicode.h"
#include "qloom/eval/perplexity.h"
#include "qloom/eval/py_str.h"

namespace qloom::eval {
namespace {

// numpy.argmax: the first index of the maximum (NaN counts as the maximum).
int first_argmax(const std::vector<double>& v) {
  int best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return int(i);
    if (v[i] > v[size_t(best)]) best = int(i);
  }
  return best;
}

bool is_argmax(const float* logits, int64_t vocab, int32_t target) {
  // torch.argmax: the first maximum.
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (logits[v] > logits[best]) best = v;
  return best == target;
}

}  // namespace

TokenPair encode_pair(const text::Tokenizer& tok, const std::string& context_in,
                      const std::string& continuation_in) {
  if (context_in.empty())
    throw_invalid("", "context", "a multiple-choice request has an empty context",
                  "every task formats a non-empty prompt; check the data set's text fields");
  std::string context = py_rstrip(context_in);
  const std::string continuation = context_in.substr(context.size()) + continuation_in;
  TokenPair p;
  const std::vector<int32_t> whole = tok.encode(context + continuation, true);
  p.context = tok.encode(context, true);
  if (whole.size() > p.context.size())
    p.continuation.assign(whole.begin() + std::ptrdiff_t(p.context.size()), whole.end());
  if (p.continuation.empty())
    throw_invalid("", "continuation", "the option '" + continuation_in + "' encodes to no tokens after its context",
                  "check the data set: every option must be non-empty text");
  return p;
}

OptionScore score_option(engine::Model& model, const engine::ForwardHooks* hooks, const TokenPair& pair,
                         int64_t max_length, std::unique_ptr<engine::KvCache>& cache) {
  std::vector<int32_t> seq = pair.context;
  seq.insert(seq.end(), pair.continuation.begin(), pair.continuation.end());
  const auto keep = size_t(max_length + 1);
  if (seq.size() > keep) seq.erase(seq.begin(), seq.end() - std::ptrdiff_t(keep));
  seq.pop_back();
  const auto n_cont = int64_t(std::min(pair.continuation.size(), seq.size()));
  if (!cache || cache->capacity() < int64_t(seq.size())) cache = model.new_cache(int64_t(seq.size()));
  const std::vector<float> logits = finite_forward(model, seq, *cache, hooks, "accuracy (option log-likelihoods)");
  const int64_t vocab = model.config().vocab_size;
  OptionScore s;
  s.tokens = n_cont;
  s.greedy = true;
  const auto first = int64_t(seq.size()) - n_cont;
  const size_t cont0 = pair.continuation.size() - size_t(n_cont);
  for (int64_t t = 0; t < n_cont; ++t) {
    const float* row = logits.data() + size_t(first + t) * size_t(vocab);
    const int32_t target = pair.continuation[cont0 + size_t(t)];
    s.loglik -= token_nll(row, vocab, target);
    s.greedy = s.greedy && is_argmax(row, vocab, target);
  }
  return s;
}

void decide(McItem& item) {
  std::vector<double> ll, by_chars, by_bytes;
  for (size_t i = 0; i < item.options.size(); ++i) {
    const double v = item.options[i].loglik;
    ll.push_back(v);
    by_chars.push_back(v / double(item.chars[i]));
    by_bytes.push_back(v / double(item.bytes[i]));
  }
  item.pred = first_argmax(ll);
  item.pred_norm = first_argmax(by_chars);
  item.pred_bytes = first_argmax(by_bytes);
}

MetricValue mean_and_stderr(const std::vector<uint8_t>& correct) {
  MetricValue m;
  const auto n = double(correct.size());
  if (correct.empty()) return m;
  double sum = 0;
  for (uint8_t c : correct) sum += c;
  m.value = sum / n;
  if (correct.size() < 2) return m;
  double ss = 0;
  for (uint8_t c : correct) ss += (c - m.value) * (c - m.value);
  m.stderr_ = std::sqrt(ss / (n - 1)) / std::sqrt(n);
  return m;
}

std::vector<uint8_t> McResult::correct(bool normalized) const {
  std::vector<uint8_t> out;
  out.reserve(items.size());
  for (const McItem& it : items) out.push_back((normalized ? it.acc_norm() : it.acc()) ? 1 : 0);
  return out;
}

OptionScorer engine_scorer(engine::Model& model, const engine::ForwardHooks* hooks, int64_t max_length) {
  auto cache = std::make_shared<std::unique_ptr<engine::KvCache>>();
  return [&model, hooks, max_length, cache](const std::vector<TokenPair>& pairs) {
    std::vector<OptionScore> out;
    for (const TokenPair& p : pairs) out.push_back(score_option(model, hooks, p, max_length, *cache));
    return out;
  };
}

namespace {

// The document's item before scoring: gold and option lengths (lm-eval
// measures the option as doc_to_choice gives it: for several inputs, as in
// winogrande, that is the option's context), and its token pairs.
McItem prepare_item(const text::Tokenizer& tok, const McTaskInfo& task, const McExample& doc,
                    const std::vector<const McExample*>& fewshot, std::vector<TokenPair>& pairs) {
  McItem item;
  item.gold = doc.gold;
  const std::vector<McRequestText> reqs = mc_requests(task, doc, fewshot);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string& text = doc.queries.size() > 1 ? doc.queries[i] : doc.choices[i];
    item.chars.push_back(int64_t(text::count_codepoints(text)));
    item.bytes.push_back(int64_t(text.size()));
    pairs.push_back(encode_pair(tok, reqs[i].context, reqs[i].continuation));
  }
  return item;
}

void score_item(const OptionScorer& scorer, const std::vector<TokenPair>& pairs, McItem& item) {
  item.options = scorer(pairs);
  if (item.options.size() != pairs.size())
    throw Error(ErrorKind::kInternal, "", "scorer",
                "scored " + std::to_string(item.options.size()) + " of " + std::to_string(pairs.size()) + " options");
  decide(item);
}

}  // namespace

McResult run_multiple_choice(const OptionScorer& scorer, const text::Tokenizer& tok, const McTaskInfo& task,
                             const std::vector<McExample>& docs,
                             const std::vector<std::vector<const McExample*>>& fewshot, size_t n,
                             const std::function<bool(int64_t done)>& on_doc, unsigned parallel) {
  n = std::min({n, docs.size(), fewshot.size()});
  parallel = std::max(1u, parallel);
  McResult r;
  for (size_t start = 0; start < n; start += parallel) {
    const size_t end = std::min(n, start + parallel);
    std::vector<std::vector<TokenPair>> pairs(end - start);
    std::vector<McItem> items;
    for (size_t d = start; d < end; ++d) items.push_back(prepare_item(tok, task, docs[d], fewshot[d], pairs[d - start]));
    if (parallel == 1) {
      score_item(scorer, pairs[0], items[0]);
    } else {
      std::vector<std::future<void>> jobs;
      for (size_t k = 0; k < items.size(); ++k)
        jobs.push_back(std::async(std::launch::async, [&, k] { score_item(scorer, pairs[k], items[k]); }));
      for (auto& j : jobs) j.wait();
      for (auto& j : jobs) j.get();  // the first failure, after all have stopped
    }
    for (McItem& it : items) {
      r.items.push_back(std::move(it));
      if (on_doc && !on_doc(r.n())) return r;
    }
  }
  return r;
}

McResult run_multiple_choice(engine::Model& model, const engine::ForwardHooks* hooks,
                             const text::Tokenizer& tok, const McTaskInfo& task,
                             const std::vector<McExample>& docs,
                             const std::vector<std::vector<const McExample*>>& fewshot, size_t n,
                             int64_t max_length, const std::function<bool(int64_t done)>& on_doc) {
  return run_multiple_choice(engine_scorer(model, hooks, max_length), tok, task, docs, fewshot, n, on_doc, 1);
}

}  // namespace qloom::eval
