#include "qloom/quant/qronos.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "qloom/quant/gptq_linalg.h"
#include "qloom/quant/gptq_variants.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::quant {

double power_iteration_max_eigenvalue(const std::vector<double>& H, int64_t n, int iterations, ThreadPool* pool) {
  double c = H[0];
  for (double v : H) c = std::max(c, v);
  c = std::fabs(c);
  if (!(c > 0) || !std::isfinite(c)) return 0.0;
  std::vector<double> Hk(H.size());
  for (size_t i = 0; i < H.size(); ++i) Hk[i] = H[i] / c;
  std::vector<double> b(static_cast<size_t>(n), 1.0), hb(static_cast<size_t>(n));
  auto matvec = [&] {  // hb = Hk b, one chain per row
    auto rows = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += Hk[static_cast<size_t>(i * n + j)] * b[static_cast<size_t>(j)];
        hb[static_cast<size_t>(i)] = acc;
      }
    };
    if (pool) pool->parallel_for(n, rows);
    else rows(0, n);
  };
  for (int it = 0; it < iterations; ++it) {
    matvec();
    double norm = 0;
    for (double v : hb) norm += v * v;
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < n; ++i) b[static_cast<size_t>(i)] = hb[static_cast<size_t>(i)] / (norm + 1e-12);
  }
  matvec();
  double lambda = 0;
  for (int64_t i = 0; i < n; ++i) lambda += b[static_cast<size_t>(i)] * hb[static_cast<size_t>(i)];
  return lambda * c;
}

namespace {

GptqResult rtn_fallback(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& spec, DType scale_dtype,
                        std::string_view name, DType model_dtype, GptqStats st, ThreadPool& pool) {
  GptqResult res;
  res.stats = std::move(st);
  res.stats.fell_back = true;
  res.stats.note = "H[1:, 1:] + damp I not positive definite after " + std::to_string(res.stats.attempts) +
                   " damping attempt(s) (last damp " + std::to_string(res.stats.damp) + "); used round-to-nearest";
  res.qt = quantize_weight(w, rows, cols, spec, scale_dtype, name, model_dtype, pool.size());
  res.dequantized = dequantize(res.qt, pool.size());
  return res;
}

// Y = W (G + damp I)[:, 1:] - q0 h0ᵀ, then W' = Y Uᵀ U: [R, C-1] float.
std::vector<float> refit_rest(const std::vector<float>& W, int64_t R, int64_t C, const std::vector<double>& G,
                              double damp, const std::vector<float>& q0, const std::vector<double>& h0,
                              const std::vector<float>& U, ThreadPool& pool) {
  const int64_t m = C - 1;
  std::vector<float> negW(W.size()), Gd(static_cast<size_t>(C * m));
  for (size_t i = 0; i < W.size(); ++i) negW[i] = -W[i];
  for (int64_t k = 0; k < C; ++k)
    for (int64_t j = 0; j < m; ++j)
      Gd[static_cast<size_t>(k * m + j)] =
          static_cast<float>(G[static_cast<size_t>(k * C + j + 1)] + (k == j + 1 ? damp : 0.0));
  std::vector<float> Y(static_cast<size_t>(R * m), 0.0f);
  linalg::gemm_sub(R, m, C, negW.data(), C, Gd.data(), m, Y.data(), m, &pool);  // Y = W Gd
  std::vector<float>().swap(Gd);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < m; ++j)
      Y[static_cast<size_t>(r * m + j)] -= q0[static_cast<size_t>(r)] * static_cast<float>(h0[static_cast<size_t>(j)]);
  std::vector<float> Ut(static_cast<size_t>(m * m), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i; j < m; ++j) Ut[static_cast<size_t>(j * m + i)] = U[static_cast<size_t>(i * m + j)];
  for (float& v : Y) v = -v;
  std::vector<float> Z(static_cast<size_t>(R * m), 0.0f);
  linalg::gemm_sub(R, m, m, Y.data(), m, Ut.data(), m, Z.data(), m, &pool);  // Z = Y Uᵀ
  for (float& v : Z) v = -v;
  std::vector<float> out(static_cast<size_t>(R * m), 0.0f);
  linalg::gemm_sub(R, m, m, Z.data(), m, U.data(), m, out.data(), m, &pool);  // Z U
  return out;
}

}  // namespace

GptqResult qronos_quantize(const float* w, uint64_t rows, uint64_t cols, std::vector<double> H, std::vector<double> G,
                           const QuantSpec& spec, DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                           const QronosOptions& opt, ThreadPool* pool_arg) {
  detail::FpEnvGuard fpenv;
  variants::check_inputs(w, rows, cols, {&H, &G}, spec, opt.static_groups, opt.block_size, tensor_name, "qronos");
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = pool_arg;
  if (!pool) {
    own_pool = std::make_unique<ThreadPool>(opt.threads);
    pool = own_pool.get();
  }
  const int64_t R = static_cast<int64_t>(rows), C = static_cast<int64_t>(cols);
  std::vector<float> W(w, w + rows * cols);
  GptqStats st;
  st.dead_columns = static_cast<int64_t>(variants::fix_dead_columns(H, W, R, C).size());
  variants::ColumnCodec codec(W, rows, cols, spec, scale_dtype, model_dtype, tensor_name, *pool);
  const std::vector<int64_t> perm = variants::column_order(H, C, opt.act_order);
  if (opt.act_order) {
    variants::permute_square(H, perm);
    variants::permute_square(G, perm);
    variants::permute_columns(W, R, perm);
  }
  const double damp = opt.alpha * power_iteration_max_eigenvalue(H, C, 30, pool);

  // Column 0.
  std::vector<float> q0(static_cast<size_t>(R));
  const double h00 = H[0];
  pool->parallel_for(R, [&](int64_t b, int64_t e) {
    detail::FpEnvGuard env;
    for (int64_t r = b; r < e; ++r) {
      const float* wr = W.data() + r * C;
      double gw = 0, hv = 0;
      for (int64_t k = 0; k < C; ++k) gw += static_cast<double>(wr[k]) * G[static_cast<size_t>(k * C)];
      for (int64_t k = 1; k < C; ++k) hv += static_cast<double>(wr[k]) * H[static_cast<size_t>(k)];
      q0[static_cast<size_t>(r)] = codec.encode(r, perm[0], static_cast<float>((gw - hv) / h00));
    }
  });
  if (C == 1) {
    GptqResult res = codec.finish(*pool);
    res.stats = st;
    return res;
  }

  // The rest: H_d[1:, 1:], its inverse's factor, the re-fit, GPTQ's loop.
  const int64_t m = C - 1;
  const std::vector<double> h0(H.begin() + 1, H.begin() + C);
  std::vector<double> Hs(static_cast<size_t>(m * m));
  for (int64_t i = 0; i < m; ++i)
    std::copy(H.begin() + (i + 1) * C + 1, H.begin() + (i + 2) * C, Hs.begin() + i * m);
  std::vector<double>().swap(H);
  std::vector<float> U;
  if (!variants::damped_inverse_factor(Hs, m, damp, opt.damp_retries, U, &st.damp, &st.attempts, pool))
    return rtn_fallback(w, rows, cols, spec, scale_dtype, tensor_name, model_dtype, st, *pool);
  std::vector<float> Wr = refit_rest(W, R, C, G, st.damp, q0, h0, U, *pool);
  std::vector<double>().swap(G);
  std::vector<float>().swap(W);
  st.loss = variants::column_loop(
      Wr, R, m, U, nullptr, opt.block_size,
      [&](int64_t r, int64_t j, float x) { return codec.encode(r, perm[static_cast<size_t>(j + 1)], x); }, *pool);
  GptqResult res = codec.finish(*pool);
  res.stats = st;
  return res;
}

}  // namespace qloom::quant
