#include "qloom/quant/distortion.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace qloom::quant {

DistortionStats measure_distortion(const float* ref, const float* approx, uint64_t n) {
  DistortionStats s;
  s.n = n;
  double sig = 0, err = 0, max_err = 0;
  bool nan = false;
  for (uint64_t i = 0; i < n; ++i) {
    const double r = ref[i], a = approx[i];
    const double d = r - a;
    if (std::isnan(d)) nan = true;
    sig += r * r;
    err += d * d;
    max_err = std::fmax(max_err, std::fabs(d));
    if ((r > 0 && a < 0) || (r < 0 && a > 0)) ++s.sign_flips;
    if (r != 0 && a == 0) ++s.rounded_to_zero;
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  if (nan) {
    s.mse = s.sqnr_db = s.rel_l2 = s.max_abs_err = kNan;
    return s;
  }
  s.max_abs_err = max_err;
  s.mse = n ? err / static_cast<double>(n) : 0.0;
  if (err == 0) {
    s.sqnr_db = kInf;
    s.rel_l2 = 0;
  } else if (sig == 0) {
    s.sqnr_db = -kInf;
    s.rel_l2 = kInf;
  } else {
    s.sqnr_db = 10.0 * std::log10(sig / err);
    s.rel_l2 = std::sqrt(err / sig);
  }
  return s;
}

double log_sum_exp(const float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - double(mx));
  return double(mx) + std::log(s);
}

double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab) {
  const double lp = log_sum_exp(p_logits, vocab);
  const double lq = log_sum_exp(q_logits, vocab);
  double kl = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double log_p = double(p_logits[i]) - lp;
    const double log_q = double(q_logits[i]) - lq;
    const double p = std::exp(log_p);
    if (p > 0) kl += p * (log_p - log_q);
  }
  return kl;
}

int64_t argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace qloom::quant
