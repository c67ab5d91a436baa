// How far an approximation (a dequantized weight) is from the reference (the
// original weight): the numbers the quality-band tests pin and the
// validator's numeric step checks. Accumulates in double, sequentially, so
// the result is deterministic for given inputs.
#pragma once

#include <cstdint>

namespace qloom::quant {

struct DistortionStats {
  uint64_t n = 0;              // elements compared
  double mse = 0;              // mean of (ref - approx)^2
  double sqnr_db = 0;          // 10 log10(sum ref^2 / sum (ref - approx)^2); +inf when exact
                               // (also for n = 0), -inf when ref is all zero but approx is not
  double max_abs_err = 0;      // max |ref - approx|
  uint64_t sign_flips = 0;     // ref > 0 and approx < 0, or ref < 0 and approx > 0
  uint64_t rounded_to_zero = 0;  // ref != 0 and approx == 0
  double rel_l2 = 0;           // ||ref - approx|| / ||ref||; 0 when exact, +inf when ref is zero and
                               // approx is not
};

// NaN in either input makes mse, sqnr_db, rel_l2 and max_abs_err NaN.
DistortionStats measure_distortion(const float* ref, const float* approx, uint64_t n);

// The same question for a model's output: how far a quantized model's next-
// token distribution is from the source's, one row of logits at a time
// (eval's kld task, validate's engine window).
// log(sum_i exp(x_i)) of a row, in double (n >= 1).
double log_sum_exp(const float* x, int64_t n);
// KL(p || q) of softmax(p_logits) and softmax(q_logits), in nats (double);
// terms with p_i == 0 contribute 0.
double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab);
// Index of the largest logit (first on ties).
int64_t argmax(const float* logits, int64_t vocab);

}  // namespace qloom::quant
