// Placeholder dispatch: the scalar reference until the optimized kernels land.
#include "qloom/engine/gemm.h"

namespace qloom::engine {

void linear(const float* x, int64_t rows, const LinearWeight& w, float* y, ThreadPool& pool) {
  pool.parallel_for(rows, [&](int64_t b, int64_t e) { linear_ref(x + b * w.in, e - b, w, y + b * w.out); });
}

}  // namespace qloom::engine
