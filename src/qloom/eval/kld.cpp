#include "qloom/eval/kld.h"

#include <algorithm>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/eval/finite_logits.h"

namespace qloom::eval {
namespace {

// llama.cpp's mean_and_uncertainty.
std::pair<double, double> mean_and_unc(double sum, double sum2, int64_t count) {
  if (count < 1) return {0.0, 0.0};
  const double f = sum / double(count);
  double df = sum2 / double(count) - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / double(count - 1)) : 0.0;
  return {f, df};
}

}  // namespace

double percentile_sorted(const std::vector<double>& v, double fraction) {
  if (v.empty()) return 0.0;
  if (fraction <= 0) return v.front();
  if (fraction >= 1) return v.back();
  double p = fraction * double(v.size() - 1);
  const size_t ip = size_t(p);
  p -= double(ip);
  return (1 - p) * v[ip] + p * v[std::min(ip + 1, v.size() - 1)];
}

double median_sorted(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const size_t n = v.size();
  return n % 2 == 0 ? 0.5 * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

void KldStats::add(const float* source_logits, const float* quantized_logits, int64_t vocab,
                   int32_t target) {
  const double nq = token_nll(quantized_logits, vocab, target);
  const double nb = token_nll(source_logits, vocab, target);
  nll_quantized.add(nq);
  nll_source.add(nb);
  nll_quantized_tokens.push_back(nq);
  nll_source_tokens.push_back(nb);
  sum_nll_cross += nq * nb;
  kld_values.push_back(kl_divergence(source_logits, quantized_logits, vocab));
  if (argmax(source_logits, vocab) == argmax(quantized_logits, vocab)) ++same_top;
}

KldSummary summarize(const KldStats& s) {
  KldSummary r;
  r.count = s.count();
  if (r.count == 0) return r;
  std::vector<double> sorted = s.kld_values;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0, sum2 = 0;
  for (double v : s.kld_values) {
    sum += v;
    sum2 += v * v;
  }
  const auto kl = mean_and_unc(sum, sum2, r.count);
  r.kld_mean = kl.first;
  r.kld_mean_stderr = kl.second;
  r.kld_median = median_sorted(sorted);
  r.kld_p99 = percentile_sorted(sorted, 0.99);
  r.kld_max = sorted.back();

  const auto lq = mean_and_unc(s.nll_quantized.sum, s.nll_quantized.sum2, r.count);
  const auto lb = mean_and_unc(s.nll_source.sum, s.nll_source.sum2, r.count);
  r.ppl_quantized = std::exp(lq.first);
  r.ppl_quantized_stderr = r.ppl_quantized * lq.second;
  r.ppl_source = std::exp(lb.first);
  r.ppl_source_stderr = r.ppl_source * lb.second;
  // covariance of the two log-ppl means (llama.cpp: 0 below 10 tokens)
  double cov = 0;
  if (r.count >= 10)
    cov = (s.sum_nll_cross / double(r.count) - lq.first * lb.first) / double(r.count - 1);
  const double ratio_var = lq.second * lq.second + lb.second * lb.second - 2.0 * cov;
  r.ppl_ratio = std::exp(lq.first - lb.first);
  r.ppl_ratio_stderr = r.ppl_ratio * (ratio_var > 0 ? std::sqrt(ratio_var) : 0.0);

  r.top1_agreement = double(s.same_top) / double(r.count);
  r.top1_stderr = r.count > 1 ? std::sqrt(r.top1_agreement * (1 - r.top1_agreement) /
                                          double(r.count - 1))
                              : 0.0;
  return r;
}

KldResult run_kld(engine::Model& source, const engine::ForwardHooks* source_hooks,
                  engine::Model& quantized, const engine::ForwardHooks* quantized_hooks,
                  const std::vector<int32_t>& doc, const std::vector<Window>& windows,
                  const std::function<bool(int64_t)>& on_window) {
  const int64_t vocab = quantized.config().vocab_size;
  if (source.config().vocab_size != vocab)
    throw_invalid("", "--source",
                  "vocabulary sizes differ: source " +
                      std::to_string(source.config().vocab_size) + ", quantized " +
                      std::to_string(vocab),
                  "compare a quantized model with the model it was made from");
  int64_t max_len = 0;
  for (const Window& w : windows) max_len = std::max(max_len, w.length);
  auto cache_s = source.new_cache(max_len);
  auto cache_q = quantized.new_cache(max_len);
  KldResult r;
  for (const Window& w : windows) {
    const std::vector<int32_t> toks = window_tokens(doc, w);
    const std::vector<float> ls = finite_forward(source, toks, *cache_s, source_hooks, "kld (the source model)");
    const std::vector<float> lq = finite_forward(quantized, toks, *cache_q, quantized_hooks, "kld");
    for (int64_t t = w.first_target; t < w.length; ++t) {
      const size_t row = size_t(t - 1) * size_t(vocab);
      r.stats.add(ls.data() + row, lq.data() + row, vocab, doc[size_t(w.begin + t)]);
    }
    ++r.windows;
    if (on_window && !on_window(r.windows)) break;
  }
  return r;
}

}  // namespace qloom::eval
