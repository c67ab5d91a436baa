// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers"), as AMD Quark runs it
// (quark/torch/algorithm/gptq/gptq.py + algorithm/common.py, amd-quark 0.13):
//
//   H = 2/n Σ x xᵀ over the n calibration tokens of the linear's input
//   dead columns (H_ii == 0): H_ii = 1, W[:, i] = 0
//   scales / zero points: per tensor / per channel from W up front; per group
//     either up front on W (static_groups, required with act_order) or when
//     the group's first column is reached, on the partly updated W
//   act_order (desc_act): columns in order of decreasing H_ii (stable)
//   damp = damp_percent * mean(diag H); U = upper Cholesky factor of
//     (H + damp I)^-1
//   columns in blocks of block_size: quantize column j, err = (w - q) / U_jj,
//     update the rest of the block at once, the columns after it lazily
//     (one GEMM per block)
//
// Codes, scales and zero points use exactly the scalar rules of the RTN
// reference (quantize_ref.h, namespace detail): a column is encoded as RTN
// would encode that value with that group's parameters, so the output is a
// QuantizedTensor in the very layout qloom exports, and `dequantized` is
// dequantize(qt).
// Numerics: H, its Cholesky factorization and inverse in double; W and U in
// float for the column updates, as Quark (float32). All of it runs on
// qloom's own kernels with a fixed reduction order (gptq_linalg.h: one FMA
// chain per element, never BLAS or LAPACK), so the output is byte-identical
// for any thread count, ISA cap (QLOOM_MAX_ISA) or OpenBLAS build / kernel
// (OPENBLAS_CORETYPE).
// When the Cholesky factorization fails (H + damp I not positive definite)
// damping is multiplied by 10 up to damp_retries times; when it still
// fails, the tensor falls back to RTN (quantize_weight) and stats say so.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/core/thread_pool.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

// Accumulates Σ x xᵀ over the rows of a linear's inputs: the row stream
// (however add() splits it) is cut into blocks of kBlockRows rows; each
// block's Σ is one float FMA chain per element over its rows in order
// (linalg::syrk_upper_add), added in block order to a double total. So the
// bits depend on the rows alone, not on thread count, ISA or batching, and
// the float chains (twice the double FMA rate) never run longer than a block.
class HessianAccumulator {
 public:
  static constexpr int64_t kBlockRows = 512;
  explicit HessianAccumulator(int64_t cols);
  // x [rows, cols] row-major (NaN / inf rows make H non-finite, which the
  // algorithms refuse: detail::check_finite_statistic). The last add()'s pool also
  // sums the open block in hessian() / take_hessian(): it must outlive them.
  void add(const float* x, int64_t rows, ThreadPool* pool = nullptr);
  int64_t cols() const { return cols_; }
  uint64_t tokens() const { return n_; }
  // 2/n Σ x xᵀ, [cols, cols] row-major symmetric; all zero when n == 0.
  std::vector<double> hessian() const;
  // The same without a copy; the accumulator is empty afterwards.
  std::vector<double> take_hessian();

 private:
  void add_block(const float* x, int64_t rows, ThreadPool* pool);  // one block's Σ into sum_
  void flush(ThreadPool* pool);                                     // the open block, if any

  int64_t cols_;
  uint64_t n_ = 0;
  std::vector<double> sum_;   // upper triangle (row <= col) holds Σ x xᵀ
  std::vector<float> open_;   // rows of the block not yet summed [open_rows_, cols]
  int64_t open_rows_ = 0;
  std::vector<float> block_;  // scratch: one block's Σ (upper triangle)
  ThreadPool* last_pool_ = nullptr;
};

struct GptqOptions {
  double damp_percent = 0.01;  // of mean(diag H)
  int64_t block_size = 128;
  bool act_order = true;       // Quark desc_act (default True)
  bool static_groups = true;   // Quark static_groups (default True); act_order requires it
  int damp_retries = 4;        // x10 each before the RTN fallback
  unsigned threads = 0;        // 0: hardware concurrency (when no pool is given)
};

struct GptqStats {
  double loss = 0;          // Σ (w - q)^2 / U_jj^2 / 2 (Quark's Losses, summed)
  double damp = 0;          // absolute damping that succeeded (or the last tried)
  int attempts = 0;         // Cholesky attempts made
  int64_t dead_columns = 0;
  bool fell_back = false;   // Cholesky failed every time: RTN was used
  std::string note;         // why it fell back
};

struct GptqResult {
  QuantizedTensor qt;
  std::vector<float> dequantized;  // dequantize(qt), row-major [rows, cols]
  GptqStats stats;
};

// Quantizes W [rows, cols] (out, in) with the Hessian H [cols, cols]
// (row-major, consumed). spec / scale_dtype / model_dtype / tensor_name as
// quantize_weight_ref. Throws what make_plan throws, kInvalidInput for
// non-finite weights or an H of the wrong size, kUsage for act_order with
// per-group specs and static_groups off (Quark refuses it too) or
// block_size < 1.
GptqResult gptq_quantize(const float* w, uint64_t rows, uint64_t cols, std::vector<double> H, const QuantSpec& spec,
                         DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                         const GptqOptions& options = {}, ThreadPool* pool = nullptr);

namespace detail {
// Throws kInvalidInput naming `tensor_name` when the calibration statistic
// m (`what`: "Hessian", ...) holds NaN or inf: its layer's inputs were not
// finite. The one check of GPTQ / GPTAQ / Qronos statistics (issue 30 item 5;
// such an H used to make GPTQ fall back to RTN silently).
void check_finite_statistic(const std::vector<double>& m, std::string_view tensor_name, std::string_view what);
// U with (H + damp I)^-1 = Uᵀ U (upper, row-major, float; computed in double
// in H's own storage, so peak memory is H plus U). Returns false when
// H + damp I is not positive definite or the result is not finite; then
// *retry says whether H is still intact (a positive-definiteness failure:
// retry with more damping) or was consumed. On success H is consumed.
bool cholesky_inverse_upper(std::vector<double>& H, int64_t n, double damp, std::vector<float>& U,
                            bool* retry = nullptr, ThreadPool* pool = nullptr);
// GPTQ's encoding of one weight x with group parameters g: the code RTN
// would give x, and *q = what it dequantizes to (dequantize_ref's
// arithmetic). For the GPTQ variants (gptaq.h, qronos.h).
uint8_t gptq_quantize_one(const Plan& p, const GroupParams& g, float x, float* q);
}  // namespace detail

// A module name relative to its decoder layer, experts collapsed, as Quark's GPTQ
// templates write inside_layer_modules: "model.layers.3.mlp.experts.12.up_proj"
// -> "mlp.experts.*.up_proj".
std::string layer_relative_pattern(const std::string& module);

}  // namespace qloom::quant
