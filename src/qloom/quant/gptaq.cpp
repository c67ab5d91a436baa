#include "qloom/quant/gptaq.h"

#include <memory>

#include "qloom/quant/gptq_linalg.h"
#include "qloom/quant/gptq_variants.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::quant {
namespace {

// P = alpha · triu(D Uᵀ, 1) U in float (D: [n, n] double, U upper).
std::vector<float> asymmetric_term(const std::vector<double>& D, const std::vector<float>& U, int64_t n, double alpha,
                                   ThreadPool& pool) {
  std::vector<float> Df(D.begin(), D.end()), Ut(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) Ut[static_cast<size_t>(j * n + i)] = U[static_cast<size_t>(i * n + j)];
  std::vector<float> M(static_cast<size_t>(n * n), 0.0f);
  linalg::gemm_sub(n, n, n, Df.data(), n, Ut.data(), n, M.data(), n, &pool);  // M = -D Uᵀ
  std::vector<float>().swap(Df);
  std::vector<float>().swap(Ut);
  const float a = static_cast<float>(alpha);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float& m = M[static_cast<size_t>(i * n + j)];
      m = j > i ? m * a : 0.0f;  // -alpha · triu(D Uᵀ, 1)
    }
  std::vector<float> P(static_cast<size_t>(n * n), 0.0f);
  linalg::gemm_sub(n, n, n, M.data(), n, U.data(), n, P.data(), n, &pool);  // P = -M U
  return P;
}

}  // namespace

GptqResult gptaq_quantize(const float* w, uint64_t rows, uint64_t cols, std::vector<double> H, std::vector<double> D,
                          const QuantSpec& spec, DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                          const GptaqOptions& opt, ThreadPool* pool_arg) {
  detail::FpEnvGuard fpenv;
  variants::check_inputs(w, rows, cols, {&H, &D}, spec, opt.static_groups, opt.block_size, tensor_name, "gptaq");
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = pool_arg;
  if (!pool) {
    own_pool = std::make_unique<ThreadPool>(opt.threads);
    pool = own_pool.get();
  }
  const int64_t R = static_cast<int64_t>(rows), C = static_cast<int64_t>(cols);
  std::vector<float> W(w, w + rows * cols);
  GptqStats st;
  const std::vector<int64_t> dead = variants::fix_dead_columns(H, W, R, C);
  st.dead_columns = static_cast<int64_t>(dead.size());
  for (int64_t i : dead)
    for (int64_t r = 0; r < C; ++r) D[static_cast<size_t>(r * C + i)] = 0.0;
  variants::ColumnCodec codec(W, rows, cols, spec, scale_dtype, model_dtype, tensor_name, *pool);
  const std::vector<int64_t> perm = variants::column_order(H, C, opt.act_order);
  if (opt.act_order) {
    variants::permute_square(H, perm);
    variants::permute_square(D, perm);
    variants::permute_columns(W, R, perm);
  }
  double mean_diag = 0.0;
  for (int64_t i = 0; i < C; ++i) mean_diag += H[static_cast<size_t>(i * C + i)];
  mean_diag /= static_cast<double>(C);
  std::vector<float> U;
  const bool ok = variants::damped_inverse_factor(H, C, opt.damp_percent * mean_diag, opt.damp_retries, U, &st.damp,
                                                  &st.attempts, pool);
  std::vector<double>().swap(H);
  if (!ok) {
    GptqResult res;
    res.stats = st;
    res.stats.fell_back = true;
    res.stats.note = "Hessian not positive definite after " + std::to_string(st.attempts) +
                     " damping attempt(s) (last damp " + std::to_string(st.damp) + "); used round-to-nearest";
    res.qt = quantize_weight(w, rows, cols, spec, scale_dtype, tensor_name, model_dtype, pool->size());
    res.dequantized = dequantize(res.qt, pool->size());
    return res;
  }
  const std::vector<float> P = asymmetric_term(D, U, C, opt.alpha, *pool);
  std::vector<double>().swap(D);
  st.loss = variants::column_loop(
      W, R, C, U, &P, opt.block_size,
      [&](int64_t r, int64_t j, float x) { return codec.encode(r, perm[static_cast<size_t>(j)], x); }, *pool);
  GptqResult res = codec.finish(*pool);
  res.stats = st;
  return res;
}

}  // namespace qloom::quant
