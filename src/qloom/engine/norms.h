// RMSNorm as transformers computes it in fp32:
//   y = x * rsqrt(mean(x^2) + eps) * w
// Gemma's (1 + w) form is folded into `w` at load time (gemma_norm_weight).
#pragma once

#include <cstdint>
#include <vector>

#include "qloom/core/thread_pool.h"

namespace qloom::engine {

// rows of `dim` values; y may equal x. pool may be null (runs inline).
void rms_norm(const float* x, float* y, int64_t rows, int64_t dim, const float* w, float eps,
              ThreadPool* pool);

// w -> 1 + w (in fp32, as Gemma*RMSNorm does).
void fold_gemma_norm_weight(std::vector<float>& w);

}  // namespace qloom::engine
