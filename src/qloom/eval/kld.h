// KL divergence of a quantized model against its source on the same windows,
// mirroring llama-perplexity's --kl-divergence statistics
// (ggml-org/llama.cpp tools/perplexity/perplexity.cpp, kl_divergence()):
//   per scored token: KLD = sum_i p_i (log p_i - log q_i), p = source
//   ("base"), q = quantized; nll of both; same top token (argmax, first
//   index on ties) of both.
//   Mean KLD +/- sqrt((E[x^2]-E[x]^2)/(N-1)) (0 when N <= 10); median =
//   mean of the two middle values for even N; percentiles interpolate
//   linearly at fraction*(N-1); "Same top p" = n_same/N +/- sqrt(p(1-p)/(N-1));
//   PPL(Q)/PPL(base) = exp(mean nll_q - mean nll_base).
// Difference: llama.cpp stores the base log-probs quantized to 16 bits and
// skips base entries with log p < -16; qloom keeps both distributions exact
// (double), so identical models give exactly 0.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "qloom/engine/model.h"
#include "qloom/eval/perplexity.h"
#include "qloom/quant/distortion.h"

namespace qloom::eval {

// KL(p || q) of two logit rows and the top token: quant/distortion.h.
using quant::argmax;
using quant::kl_divergence;

// llama.cpp's percentile: values sorted ascending, fraction in [0,1].
double percentile_sorted(const std::vector<double>& sorted, double fraction);
// Median: mean of the two middle values for an even count.
double median_sorted(const std::vector<double>& sorted);

struct KldStats {
  NllStats nll_source, nll_quantized;
  double sum_nll_cross = 0;        // sum nll_q * nll_base (covariance of the ratio)
  std::vector<double> kld_values;  // one per scored token
  // Each scored token's NLL under either model, in order (pairs the runs).
  std::vector<double> nll_source_tokens, nll_quantized_tokens;
  int64_t same_top = 0;

  // Adds one scored position: source and quantized logits rows, target token.
  void add(const float* source_logits, const float* quantized_logits, int64_t vocab,
           int32_t target);
  int64_t count() const { return int64_t(kld_values.size()); }
};

struct KldSummary {
  int64_t count = 0;
  double kld_mean = 0, kld_mean_stderr = 0, kld_median = 0, kld_p99 = 0, kld_max = 0;
  double top1_agreement = 0, top1_stderr = 0;  // fractions (0..1)
  double ppl_source = 0, ppl_source_stderr = 0;
  double ppl_quantized = 0, ppl_quantized_stderr = 0;
  double ppl_ratio = 0, ppl_ratio_stderr = 0;
};
KldSummary summarize(const KldStats& s);

struct KldResult {
  int64_t windows = 0;
  KldStats stats;
};

// Runs each window through both models (fresh caches) and accumulates.
// on_window(done) as in run_perplexity.
KldResult run_kld(engine::Model& source, const engine::ForwardHooks* source_hooks,
                  engine::Model& quantized, const engine::ForwardHooks* quantized_hooks,
                  const std::vector<int32_t>& doc, const std::vector<Window>& windows,
                  const std::function<bool(int64_t done)>& on_window = {});

}  // namespace qloom::eval
