// Qronos (Zhang et al., "Qronos: Correcting the Past by Shaping the Future
// in Post-Training Quantization", arXiv 2505.11695), as AMD Quark runs it
// (quark/torch/algorithm/qronos/qronos.py, amd-quark 0.13). It minimizes
// ||W X - Q X̃|| (X the float model's input of the linear, X̃ the partly
// quantized model's, same tokens) column by column:
//
//   H = 2/n Σ x̃ x̃ᵀ,  G = 2/n Σ x x̃ᵀ                     (cross_gram.h;
//     Quark scales both by 1/n: a common factor changes nothing below)
//   dead columns (H_ii == 0): H_ii = 1, W[:, i] = 0
//   group parameters up front from W (static groups; gptq_variants.h)
//   act_order: columns by decreasing H_ii; H, G, W permuted alike
//   damp = alpha · λmax(H), λmax by 30 steps of power iteration on
//     H / max(H) from the all-ones vector (Quark's power_iteration)
//   column 0: q_0 = Q((W G[:, 0] - W_{:,1:} H[0, 1:]ᵀ) / H_00)
//   the rest, re-fitted to the float output given q_0:
//     W_{:,1:} = (W (G + damp I)[:, 1:] - q_0 H[0, 1:]) (H_d[1:, 1:])^-1,
//     H_d = H + damp I
//   then GPTQ's blocked column loop on W_{:,1:} with U upper, U ᵀU =
//     (H_d[1:, 1:])^-1 (blocks counted from column 1, as Quark's).
// Quark takes that inverse as a Sherman-Morrison update of the full one and
// its factor as cholesky(Hinv · beta) / sqrt(beta) in float32 (beta only
// steadies float32; the factor is the same): qloom factorizes H_d[1:, 1:]
// in double (GPTQ's cholesky_inverse_upper) and forms the products with U
// in float on its fixed-order kernels (byte-identical for any thread count
// or ISA). A failed factorization retries with 10x damping damp_retries
// times, then falls back to RTN (stats say so).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/core/thread_pool.h"
#include "qloom/quant/gptq.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

struct QronosOptions {
  double alpha = 1e-3;        // damping, relative to λmax(H) (Quark's default)
  int64_t block_size = 128;
  bool act_order = true;      // Quark desc_act
  bool static_groups = true;  // required with per-group specs
  int damp_retries = 4;
  unsigned threads = 0;       // 0: hardware concurrency (when no pool is given)
};

// Quantizes W [rows, cols] from H and G [cols, cols] (row-major, consumed).
// Errors as gptaq_quantize.
GptqResult qronos_quantize(const float* w, uint64_t rows, uint64_t cols, std::vector<double> H, std::vector<double> G,
                           const QuantSpec& spec, DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                           const QronosOptions& options = {}, ThreadPool* pool = nullptr);

// Quark's power_iteration: the largest eigenvalue of the symmetric H
// [n, n] (double, fixed order: the same bits for any pool).
double power_iteration_max_eigenvalue(const std::vector<double>& H, int64_t n, int iterations,
                                      ThreadPool* pool = nullptr);

}  // namespace qloom::quant
