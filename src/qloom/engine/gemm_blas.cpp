// OpenBLAS path of linear() (contract: gemm_kernels.h). One cblas_sgemm per
// column range (F32: W rows [n0, n1) used in place as Bᵀ; BF16: W widened
// exactly into fp32 panels of `panel_rows(in)` rows, one sgemm per panel).
// OpenBLAS is pinned to one thread the first time this runs: linear()
// parallelises over columns with qloom's own ThreadPool, so OpenBLAS's
// pthreads never compete with the pool's workers (no oversubscription, no
// spinning BLAS threads between calls).
#include <cblas.h>

#include <mutex>

#include "qloom/core/convert.h"
#include "qloom/engine/gemm_kernels.h"

namespace qloom::engine::detail {
namespace {

constexpr int64_t kPanelFloats = int64_t{1} << 17;  // 512 KiB of widened W per panel

int64_t panel_rows(int64_t in) {
  const int64_t r = in > 0 ? kPanelFloats / in : kPanelFloats;
  return r < 16 ? 16 : r;
}

void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void add_bias(const float* bias, int64_t rows, int64_t out, int64_t n0, int64_t n1, float* y) {
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = n0; n < n1; ++n) y[r * out + n] += bias[n];
}

// y[:, n0:n0+nc) = x · Wpᵀ with Wp [nc, in] row-major.
void sgemm_cols(const float* x, int64_t rows, const float* wp, int64_t nc, int64_t in, int64_t out,
                float* y) {
  if (in == 0) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t n = 0; n < nc; ++n) y[r * out + n] = 0.0f;
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(nc),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), wp, static_cast<int>(in), 0.0f, y,
              static_cast<int>(out));
}

}  // namespace

size_t blas_pack_floats(int64_t in) { return static_cast<size_t>(panel_rows(in) * in); }

void gemm_blas(const float* x, int64_t rows, const LinearWeight& w, int64_t n0, int64_t n1, float* y,
               float* buf) {
  single_threaded_blas();
  if (w.type == WeightType::kF32) {
    sgemm_cols(x, rows, w.f32.data() + n0 * w.in, n1 - n0, w.in, w.out, y + n0);
  } else {
    const int64_t pr = panel_rows(w.in);
    for (int64_t n = n0; n < n1; n += pr) {
      const int64_t nc = n1 - n < pr ? n1 - n : pr;
      bf16_to_f32(w.bf16.data() + n * w.in, buf, static_cast<size_t>(nc * w.in));
      sgemm_cols(x, rows, buf, nc, w.in, w.out, y + n);
    }
  }
  add_bias(w.bias.empty() ? nullptr : w.bias.data(), rows, w.out, n0, n1, y);
}

}  // namespace qloom::engine::detail
