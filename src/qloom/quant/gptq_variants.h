// Plumbing shared by the GPTQ variants GPTAQ (gptaq.h) and Qronos
// (qronos.h), which Quark builds on the same BaseHessianAlgorithm as GPTQ
// (quark/torch/algorithm/common.py, amd-quark 0.13): checks, dead columns,
// the up-front quantization parameters, act-order permutation and GPTQ's
// blocked column loop (with GPTAQ's asymmetric term as an option).
// Quark's variants export only static groups: a per-group spec needs
// static_groups (with it off Quark 0.13's gptaq ends with an empty scale
// list and its qronos records one scale per column of the first group).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/core/thread_pool.h"
#include "qloom/quant/gptq.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant::variants {

// Throws kInvalidInput for non-finite weights or a square matrix of the
// wrong size, kUsage for block_size < 1, kUnsupported for a per-group spec
// without static groups (naming `algo`).
void check_inputs(const float* w, uint64_t rows, uint64_t cols, const std::vector<const std::vector<double>*>& squares,
                  const QuantSpec& spec, bool static_groups, int64_t block_size, std::string_view tensor_name,
                  std::string_view algo);

// Dead columns (H_ii == 0): H_ii = 1 and W[:, i] = 0; returns them.
std::vector<int64_t> fix_dead_columns(std::vector<double>& H, std::vector<float>& W, int64_t rows, int64_t cols);

// Codes and parameters: every group's parameters taken up front from W
// (after the dead columns are zeroed, before any update), as Quark's
// _setup_quantizers with static groups (per channel / per tensor: the same).
class ColumnCodec {
 public:
  ColumnCodec(const std::vector<float>& W, uint64_t rows, uint64_t cols, const QuantSpec& spec, DType scale_dtype,
              DType model_dtype, std::string_view tensor_name, ThreadPool& pool);
  // Encodes x as element (r, col) of the original column order: the code is
  // stored, *q = its dequantized value.
  float encode(int64_t r, int64_t col, float x);
  // The QuantizedTensor of the stored codes (and its dequantized form).
  GptqResult finish(ThreadPool& pool);

 private:
  detail::Plan p_;
  uint64_t rows_, cols_, groups_;
  std::vector<detail::GroupParams> gp_;
  QuantizedTensor qt_;
};

// Act order: columns by decreasing H_ii (stable); identity without it.
std::vector<int64_t> column_order(const std::vector<double>& H, int64_t cols, bool act_order);
// M <- M[perm][:, perm] in place ([n, n] row-major).
void permute_square(std::vector<double>& M, const std::vector<int64_t>& perm);
// W <- W[:, perm] ([rows, n] row-major).
void permute_columns(std::vector<float>& W, int64_t rows, const std::vector<int64_t>& perm);

// U with (H + damp I)^-1 = Uᵀ U, damp = base · 10^k for the first k in
// 0..retries that factorizes (H is consumed on success). False when none
// does; *damp = the last tried, *attempts = how many.
bool damped_inverse_factor(std::vector<double>& H, int64_t n, double base, int retries, std::vector<float>& U,
                           double* damp, int* attempts, ThreadPool* pool);

// GPTQ's blocked column loop on W [rows, n] (row stride n, permuted order)
// with U [n, n] upper: for column j, q = quant(r, j, w) (the caller maps j
// to the original column), err = (w - q) / U_jj, W[r, k] -= err · U_jk for
// the rest of the block at once; the columns after the block lazily (one
// fixed-order GEMM per block). With P [n, n] (strictly upper: GPTAQ) the
// update is err · U_jk - w · P_jk (w: the column before its own update), and
// the lazy one Err · U - W1 · P with W1 the block as updated (Quark's gptaq
// and the GPTAQ paper's code). Returns Σ err² / 2.
double column_loop(std::vector<float>& W, int64_t rows, int64_t n, const std::vector<float>& U,
                   const std::vector<float>* P, int64_t block_size,
                   const std::function<float(int64_t r, int64_t j, float w)>& quant, ThreadPool& pool);

}  // namespace qloom::quant::variants
