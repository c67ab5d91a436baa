#include "qloom/quant/gptq.h"

#include "qloom/quant/mx_fp6.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <regex>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/gptq_linalg.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

using detail::GroupParams;
using detail::Kind;
using detail::Plan;

GroupParams params_of(const Plan& p, const float* x, uint64_t len, std::string_view name) {
  return detail::group_params(p, x, len, name);
}

// Encodes x and returns the code; *q = what the code dequantizes to
// (exactly dequantize_ref's arithmetic).
uint8_t quantize_one(const Plan& p, const GroupParams& g, float x, float* q) {
  switch (p.kind) {
    case Kind::kInt: {
      const uint8_t c = detail::encode_int(p, g, x);
      const int v = p.is_signed ? static_cast<int>(static_cast<int8_t>(c)) : static_cast<int>(c);
      *q = static_cast<float>(v - (p.symmetric ? 0 : g.zp)) * g.scale;
      return c;
    }
    case Kind::kFp8: {
      const uint8_t c = detail::encode_fp8(p, g, x);
      *q = fp8_e4m3_to_float(c) * g.scale;
      return c;
    }
    case Kind::kMx: break;
  }
  const uint8_t c = detail::encode_mx(g, x, p.mx_dtype);
  *q = mx_decode(mx_element(p.mx_dtype), c) * g.scale;
  return c;
}

}  // namespace

// ---------------------------------------------------------------- Hessian

void detail::check_finite_statistic(const std::vector<double>& m, std::string_view tensor_name, std::string_view what) {
  for (const double v : m)
    if (!std::isfinite(v))
      throw Error(ErrorKind::kInvalidInput, "", std::string(tensor_name),
                  "calibration: the " + std::string(what) + " of " + std::string(tensor_name) +
                      " holds NaN or inf (the layer's inputs were not finite)",
                  "check the model's weights for NaN / inf (e.g. its norms) or the calibration data");
}

HessianAccumulator::HessianAccumulator(int64_t cols) : cols_(cols), sum_(static_cast<size_t>(cols * cols), 0.0) {}

void HessianAccumulator::add(const float* x, int64_t rows, ThreadPool* pool) {
  if (rows <= 0) return;
  const int64_t n = cols_;
  if (sum_.empty()) sum_.assign(static_cast<size_t>(n * n), 0.0);  // after take_hessian()
  last_pool_ = pool;
  n_ += static_cast<uint64_t>(rows);
  while (rows > 0) {
    const int64_t take = std::min(rows, kBlockRows - open_rows_);
    if (take == kBlockRows) {  // a whole block straight from x
      add_block(x, take, pool);
    } else {
      open_.resize(static_cast<size_t>(kBlockRows * n));
      std::copy(x, x + take * n, open_.begin() + open_rows_ * n);
      open_rows_ += take;
      if (open_rows_ == kBlockRows) flush(pool);
    }
    x += take * n;
    rows -= take;
  }
}

void HessianAccumulator::add_block(const float* x, int64_t rows, ThreadPool* pool) {
  const int64_t n = cols_;
  block_.assign(static_cast<size_t>(n * n), 0.0f);
  linalg::syrk_upper_add(x, rows, n, block_.data(), pool);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) sum_[static_cast<size_t>(i * n + j)] += block_[static_cast<size_t>(i * n + j)];
}

void HessianAccumulator::flush(ThreadPool* pool) {
  if (open_rows_ == 0) return;
  add_block(open_.data(), open_rows_, pool);
  open_rows_ = 0;
}

std::vector<double> HessianAccumulator::take_hessian() {
  const int64_t n = cols_;
  flush(last_pool_);
  std::vector<float>().swap(block_);
  std::vector<float>().swap(open_);
  std::vector<double> h;
  h.swap(sum_);
  h.resize(static_cast<size_t>(n * n), 0.0);
  const double f = n_ ? 2.0 / static_cast<double>(n_) : 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {
      const double v = f * h[static_cast<size_t>(i * n + j)];
      h[static_cast<size_t>(i * n + j)] = v;
      h[static_cast<size_t>(j * n + i)] = v;
    }
  // The accumulator holds nothing until the next add(): no second n x n
  // buffer beside the one handed out (537 MB for in_features 8192).
  n_ = 0;
  sum_.clear();
  sum_.shrink_to_fit();
  return h;
}

std::vector<double> HessianAccumulator::hessian() const {
  const int64_t n = cols_;
  std::vector<double> h(static_cast<size_t>(n * n), 0.0);
  if (n_ == 0 || sum_.empty()) return h;
  std::vector<float> open_sum;  // the open block's Σ, added as flush() would
  if (open_rows_ > 0) {
    open_sum.assign(static_cast<size_t>(n * n), 0.0f);
    linalg::syrk_upper_add(open_.data(), open_rows_, n, open_sum.data(), last_pool_);
  }
  const double f = 2.0 / static_cast<double>(n_);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {
      const size_t k = static_cast<size_t>(i * n + j);
      const double v = f * (open_sum.empty() ? sum_[k] : sum_[k] + open_sum[k]);
      h[static_cast<size_t>(i * n + j)] = v;
      h[static_cast<size_t>(j * n + i)] = v;
    }
  return h;
}

// ---------------------------------------------------------- Cholesky inverse

bool detail::cholesky_inverse_upper(std::vector<double>& A, int64_t n, double damp, std::vector<float>& U,
                                    bool* retry, ThreadPool* pool) {
  if (retry) *retry = true;
  // With P the reversal permutation, P (H) P = L Lᵀ gives H = R Rᵀ with
  // R = P L P upper, so H^-1 = (R^-1)ᵀ R^-1: U = R^-1 = P L^-1 P (upper,
  // positive diagonal: the unique Cholesky factor
  // torch.linalg.cholesky(upper=True) returns). Reversing the flat row-major
  // array applies P on both sides. qloom's own kernels (gptq_linalg.h):
  // fixed reduction order, no BLAS.
  std::vector<double> diag(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    diag[static_cast<size_t>(i)] = A[static_cast<size_t>(i * n + i)];
    A[static_cast<size_t>(i * n + i)] += damp;
  }
  std::reverse(A.begin(), A.end());
  if (!linalg::cholesky_lower(A.data(), n, pool)) {
    // Only the lower triangle was written: restore it from the upper one.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < i; ++j) A[static_cast<size_t>(i * n + j)] = A[static_cast<size_t>(j * n + i)];
    std::reverse(A.begin(), A.end());
    for (int64_t i = 0; i < n; ++i) A[static_cast<size_t>(i * n + i)] = diag[static_cast<size_t>(i)];
    return false;
  }
  if (retry) *retry = false;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j)
      if (!std::isfinite(A[static_cast<size_t>(i * n + j)])) return false;
  linalg::invert_lower(A.data(), n, pool);
  U.assign(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {  // U[i, j] = M[n-1-i, n-1-j]
      const double v = A[static_cast<size_t>((n - 1 - i) * n + (n - 1 - j))];
      if (!std::isfinite(v)) return false;
      U[static_cast<size_t>(i * n + j)] = static_cast<float>(v);
    }
  std::vector<double>().swap(A);
  return true;
}

// ------------------------------------------------------------------- GPTQ

GptqResult gptq_quantize(const float* w, uint64_t rows, uint64_t cols, std::vector<double> H, const QuantSpec& spec,
                         DType scale_dtype, std::string_view tensor_name, DType model_dtype,
                         const GptqOptions& opt, ThreadPool* pool_arg) {
  detail::FpEnvGuard fpenv;
  const Plan p = detail::make_plan(rows, cols, spec, scale_dtype, model_dtype, tensor_name);
  const std::string name(tensor_name);
  if (H.size() != cols * cols)
    throw Error(ErrorKind::kInvalidInput, "", name, "Hessian size does not match in_features " + std::to_string(cols));
  if (opt.block_size < 1) throw Error(ErrorKind::kUsage, "", "block_size", "GPTQ block_size must be >= 1");
  const bool per_group = spec.qscheme == QScheme::kPerGroup;
  if (per_group && opt.act_order && !opt.static_groups)
    throw Error(ErrorKind::kUsage, "", "desc_act",
                "GPTQ with desc_act and static_groups off cannot be exported (Quark refuses it too)",
                "set static_groups true, or desc_act false");
  for (uint64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(w[i])) detail::throw_nonfinite(tensor_name, i / cols, i % cols, w[i]);
  detail::check_finite_statistic(H, tensor_name, "GPTQ Hessian");

  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = pool_arg;
  if (!pool) {
    own_pool = std::make_unique<ThreadPool>(opt.threads);
    pool = own_pool.get();
  }
  const int64_t R = static_cast<int64_t>(rows), C = static_cast<int64_t>(cols);
  GptqResult res;
  GptqStats& st = res.stats;

  // Dead columns.
  std::vector<float> W(w, w + rows * cols);
  for (int64_t i = 0; i < C; ++i) {
    double& d = H[static_cast<size_t>(i * C + i)];
    if (d == 0.0) {
      d = 1.0;
      for (int64_t r = 0; r < R; ++r) W[static_cast<size_t>(r * C + i)] = 0.0f;
      ++st.dead_columns;
    }
  }

  // Group parameters (per row and group; per tensor: one).
  const uint64_t G = p.per_tensor ? 1 : p.groups_per_row;
  const uint64_t gsize = p.group;  // columns per group
  std::vector<GroupParams> gp(p.per_tensor ? 1 : rows * G);
  const bool upfront = !per_group || opt.static_groups || opt.act_order;
  if (p.per_tensor) {
    gp[0] = params_of(p, W.data(), rows * cols, tensor_name);
  } else if (upfront) {
    pool->parallel_for(R, [&](int64_t b, int64_t e) {
      detail::FpEnvGuard env;  // workers too
      for (int64_t r = b; r < e; ++r)
        for (uint64_t g = 0; g < G; ++g)
          gp[static_cast<size_t>(r) * G + g] = params_of(p, W.data() + r * C + g * gsize, gsize, tensor_name);
    });
  }
  auto params = [&](int64_t r, int64_t col) -> const GroupParams& {
    return p.per_tensor ? gp[0] : gp[static_cast<size_t>(r) * G + static_cast<uint64_t>(col) / gsize];
  };

  // Column order.
  std::vector<int64_t> perm(static_cast<size_t>(C));
  std::iota(perm.begin(), perm.end(), 0);
  if (opt.act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return H[static_cast<size_t>(a * C + a)] > H[static_cast<size_t>(b * C + b)];
    });
    // H <- H[perm][:, perm] in place: columns row by row, then rows by cycles.
    std::vector<double> tmp(static_cast<size_t>(C));
    for (int64_t i = 0; i < C; ++i) {
      double* row = H.data() + i * C;
      for (int64_t j = 0; j < C; ++j) tmp[static_cast<size_t>(j)] = row[perm[static_cast<size_t>(j)]];
      std::copy(tmp.begin(), tmp.end(), row);
    }
    std::vector<char> done(static_cast<size_t>(C), 0);
    for (int64_t start = 0; start < C; ++start) {
      if (done[static_cast<size_t>(start)]) continue;
      // Row i takes old row perm[i]: follow i -> perm[i] until back at start.
      std::copy(H.data() + start * C, H.data() + (start + 1) * C, tmp.begin());
      int64_t i = start;
      while (true) {
        done[static_cast<size_t>(i)] = 1;
        const int64_t src = perm[static_cast<size_t>(i)];
        if (src == start) {
          std::copy(tmp.begin(), tmp.end(), H.data() + i * C);
          break;
        }
        std::copy(H.data() + src * C, H.data() + (src + 1) * C, H.data() + i * C);
        i = src;
      }
    }
    std::vector<float> Wp(W.size());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < C; ++j) Wp[static_cast<size_t>(r * C + j)] = W[static_cast<size_t>(r * C + perm[j])];
    W.swap(Wp);
  }

  // Damping, Cholesky of the inverse; retries, then the RTN fallback.
  double mean_diag = 0.0;
  for (int64_t i = 0; i < C; ++i) mean_diag += H[static_cast<size_t>(i * C + i)];
  mean_diag /= static_cast<double>(C);
  std::vector<float> U;
  bool ok = false;
  {
    double damp = opt.damp_percent * mean_diag;
    bool retry = true;
    for (int k = 0; k <= std::max(0, opt.damp_retries) && !ok && retry; ++k, damp *= 10.0) {
      ++st.attempts;
      st.damp = damp;
      ok = std::isfinite(damp) && detail::cholesky_inverse_upper(H, C, damp, U, &retry, pool);
    }
  }
  std::vector<double>().swap(H);
  if (!ok) {
    st.fell_back = true;
    st.note = "Hessian not positive definite after " + std::to_string(st.attempts) +
              " damping attempt(s) (last damp " + std::to_string(st.damp) + "); used round-to-nearest";
    res.qt = quantize_weight(w, rows, cols, spec, scale_dtype, tensor_name, model_dtype, pool->size());
    res.dequantized = dequantize(res.qt, pool->size());
    return res;
  }

  // The blocked column loop. Rows are independent inside a block.
  QuantizedTensor& qt = res.qt;
  qt.spec = spec;
  qt.shape = {rows, cols};
  qt.codes.assign(rows * cols, 0);
  qt.scale_dtype = p.kind == Kind::kMx ? DType::kE8M0 : scale_dtype;
  std::vector<double> row_loss(rows, 0.0);
  const int64_t B = opt.block_size;
  std::vector<float> err(static_cast<size_t>(R * B));
  for (int64_t i1 = 0; i1 < C; i1 += B) {
    const int64_t i2 = std::min(C, i1 + B), cnt = i2 - i1;
    pool->parallel_for(R, [&](int64_t rb, int64_t re) {
      detail::FpEnvGuard env;
      for (int64_t r = rb; r < re; ++r) {
        float* wr = W.data() + r * C;
        float* er = err.data() + r * B;
        for (int64_t j = i1; j < i2; ++j) {
          const int64_t col = perm[static_cast<size_t>(j)];
          if (!upfront && static_cast<uint64_t>(col) % gsize == 0) {
            // Dynamic groups (no act_order: col == j): from the current W.
            const uint64_t len = std::min<uint64_t>(gsize, cols - static_cast<uint64_t>(col));
            gp[static_cast<size_t>(r) * G + static_cast<uint64_t>(col) / gsize] = params_of(p, wr + j, len, tensor_name);
          }
          float q = 0.0f;
          qt.codes[static_cast<size_t>(r * C + col)] = quantize_one(p, params(r, col), wr[j], &q);
          const float* uj = U.data() + j * C;
          const float e = (wr[j] - q) / uj[j];
          row_loss[static_cast<size_t>(r)] += static_cast<double>(e) * e / 2.0;
          er[j - i1] = e;
          for (int64_t k = j + 1; k < i2; ++k) wr[k] -= e * uj[k];
        }
      }
    });
    if (i2 < C)  // W[:, i2:] -= Err · U[i1:i2, i2:] (fixed order per element)
      linalg::gemm_sub(R, C - i2, cnt, err.data(), B, U.data() + i1 * C + i2, C, W.data() + i2, C, pool);
  }
  for (double l : row_loss) st.loss += l;

  if (p.per_tensor) {
    qt.scales = {gp[0].scale};
    if (!p.symmetric && p.kind == Kind::kInt) qt.zero_points = {gp[0].zp};
  } else {
    qt.scales.resize(rows * G);
    for (size_t i = 0; i < gp.size(); ++i) qt.scales[i] = gp[i].scale;
    if (!p.symmetric && p.kind == Kind::kInt) {
      qt.zero_points.resize(rows * G);
      for (size_t i = 0; i < gp.size(); ++i) qt.zero_points[i] = gp[i].zp;
    }
  }
  res.dequantized = dequantize(qt, pool->size());
  return res;
}

uint8_t detail::gptq_quantize_one(const Plan& p, const GroupParams& g, float x, float* q) {
  return quantize_one(p, g, x, q);
}

std::string layer_relative_pattern(const std::string& module) {
  static const std::regex layer_prefix(R"(^.*?\.layers\.\d+\.)");
  static const std::regex expert(R"(experts\.\d+\.)");
  return std::regex_replace(std::regex_replace(module, layer_prefix, ""), expert, "experts.*.");
}

}  // namespace qloom::quant
