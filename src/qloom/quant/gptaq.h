// GPTAQ (Li et al., "GPTAQ: Efficient Finetuning-Free Quantization for
// Asymmetric Calibration", arXiv 2504.02692), as AMD Quark runs it
// (quark/torch/algorithm/gptaq/gptaq.py, amd-quark 0.13). GPTQ minimizes
// ||W X̃ - Q X̃||; GPTAQ minimizes ||W X - Q X̃||, X the float model's input
// of the linear and X̃ the partly quantized model's (same tokens):
//
//   H = 2/n Σ x̃ x̃ᵀ,  D = 2/n Σ (x - x̃) x̃ᵀ            (cross_gram.h)
//   dead columns (H_ii == 0): H_ii = 1, W[:, i] = 0, D[:, i] = 0
//   group parameters up front from W (static groups; gptq_variants.h)
//   act_order: columns by decreasing H_ii; H, D, W permuted alike
//   damp = damp_percent · mean(diag H); U = upper Cholesky factor of
//     (H + damp I)^-1 (GPTQ's), L = Uᵀ
//   P = alpha · triu(D L, 1) Lᵀ   (strictly upper)
//   GPTQ's blocked column loop with, for column j (w: its value before its
//     own update), W[:, k] -= err · U_jk - w · P_jk within the block, and
//     the lazy update Err · U - W1 · P for the columns after it.
// The numbers: H, D, their Cholesky factorization and inverse in double;
// U, P (two fixed-order float GEMMs) and W in float, as Quark's float32.
// All on qloom's own fixed-order kernels (gptq_linalg.h), so the output is
// byte-identical for any thread count or ISA. A Cholesky failure retries
// with 10x damping damp_retries times, then falls back to RTN (stats say so).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/core/thread_pool.h"
#include "qloom/quant/gptq.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

struct GptaqOptions {
  double damp_percent = 0.01;  // of mean(diag H)
  double alpha = 0.25;         // weight of the asymmetric term (Quark's default)
  int64_t block_size = 128;
  bool act_order = true;       // Quark desc_act
  bool static_groups = true;   // required with per-group specs
  int damp_retries = 4;
  unsigned threads = 0;        // 0: hardware concurrency (when no pool is given)
};

// Quantizes W [rows, cols] (out, in) from H and D [cols, cols] (row-major,
// consumed). spec / scale_dtype / model_dtype / tensor_name as
// quantize_weight_ref. Throws what make_plan throws, kInvalidInput for
// non-finite weights or matrices of the wrong size, kUsage for block_size
// < 1, kUnsupported for per-group specs without static groups.
GptqResult gptaq_quantize(const float* w, uint64_t rows, uint64_t cols, std::vector<double> H, std::vector<double> D,
                          const QuantSpec& spec, DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                          const GptaqOptions& options = {}, ThreadPool* pool = nullptr);

}  // namespace qloom::quant
