// Folding primitives for AWQ / SmoothQuant: move a per-channel scale s
// (length n, every s_j finite and > 0) from the readers of a channel into
// the operation producing it, leaving the function unchanged:
//   reader linears:  W[:, j] *= s_j                       (scale_linear_inputs)
//   producer linear: W[r0 + j, :] /= s_j, bias[r0 + j] /= s_j (divide_linear_outputs)
//   producer norm:   w_j /= s_j                            (divide_norm_weight, kPlain)
//                    gemma (1 + w): w_j' = (1 + w_j) / s_j - 1 (kGemmaOffset)
//
// Precision. F32 weights: every element is one fp32 multiply or divide,
// correctly rounded (relative error <= 2^-24 per element), so a folded
// model computes the original function up to fp32 rounding of the weights
// (tests/quant/smoothquant_test.cpp and awq_test.cpp measure the logits).
// kGemmaOffset: the value the engine uses is 1 + w' = 1 + ((1 + w)/s - 1),
// two more fp32 roundings at magnitude max(1, |w'|): absolute error up to
// ~2^-24 * max(1, |w'|) * 2, i.e. a relative error of up to ~1.2e-7 / |1 + w'|,
// larger than the plain form's when (1 + w)/s is much smaller than 1 (a
// channel scaled up strongly). Engine-form norms (the (1 + w) already folded
// in, as LayerWeights holds them) use kPlain.
// BF16 weights: the product / quotient is computed in fp32 and rounded to
// nearest even bf16 (relative error <= 2^-9 per element), as a bf16 torch
// model doing the same fold in place would: the folded model is then close
// to, not equal to, the original. Convert with linear_to_f32() first for an exact
// fold.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qloom/engine/gemm.h"

namespace qloom::quant {

// W[:, j] *= s[j] for every row; s.size() must equal w.in.
void scale_linear_inputs(engine::LinearWeight& w, std::span<const float> s);

// Rows [row_offset, row_offset + s.size()) of W (and of the bias, if any)
// divided by s; they must lie within w.out.
void divide_linear_outputs(engine::LinearWeight& w, std::span<const float> s, int64_t row_offset = 0);

enum class NormForm {
  kPlain,        // y = x_hat * w            (llama-style RMSNorm; engine-held norms)
  kGemmaOffset,  // y = x_hat * (1 + w)      (gemma checkpoints store w)
};
// w.size() must equal s.size().
void divide_norm_weight(std::vector<float>& w, std::span<const float> s, NormForm form);

// Widens a BF16 linear to F32 in place (exact); F32 stays as it is.
void linear_to_f32(engine::LinearWeight& w);

// Everything one scaling group's fold touches (quant/layer_groups.h): the
// producer (a norm or rows of a linear) and every reader (the group's
// linears and fold-only readers). Exactly one of norm / prev is set.
struct FoldTargets {
  std::vector<float>* norm = nullptr;
  NormForm norm_form = NormForm::kPlain;
  engine::LinearWeight* prev = nullptr;
  int64_t prev_row_offset = 0;
  std::vector<engine::LinearWeight*> readers;
};

// Checks every s_j is finite and > 0 and every shape, then folds.
// Throws Error(kInvalidInput) for a bad scale (naming its index),
// Error(kUsage) for mismatched shapes or targets; nothing is modified then.
void fold_scales(const FoldTargets& t, std::span<const float> s);

}  // namespace qloom::quant
