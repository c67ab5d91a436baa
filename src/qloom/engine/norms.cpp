#include "qloom/engine/norms.h"

#include <algorithm>
#include <cmath>

namespace qloom::engine {
namespace {

void norm_rows(const float* x, float* y, int64_t begin, int64_t end, int64_t dim, const float* w,
               float eps) {
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * w[i];
  }
}

}  // namespace

void rms_norm(const float* x, float* y, int64_t rows, int64_t dim, const float* w, float eps,
              ThreadPool* pool) {
  if (pool && rows * dim >= 16384) {
    pool->parallel_for(rows, [&](int64_t b, int64_t e) { norm_rows(x, y, b, e, dim, w, eps); },
                       std::max<int64_t>(1, 4096 / dim));
  } else {
    norm_rows(x, y, 0, rows, dim, w, eps);
  }
}

void fold_gemma_norm_weight(std::vector<float>& w) {
  for (float& v : w) v = 1.0f + v;
}

}  // namespace qloom::engine
