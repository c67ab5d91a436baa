#include "qloom/quant/gptq_variants.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "qloom/core/error.h"
#include "qloom/quant/gptq_linalg.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::quant::variants {

void check_inputs(const float* w, uint64_t rows, uint64_t cols, const std::vector<const std::vector<double>*>& squares,
                  const QuantSpec& spec, bool static_groups, int64_t block_size, std::string_view tensor_name,
                  std::string_view algo) {
  const std::string name(tensor_name);
  for (const std::vector<double>* m : squares)
    if (m->size() != cols * cols)
      throw Error(ErrorKind::kInvalidInput, "", name,
                  std::string(algo) + ": a statistics matrix does not match in_features " + std::to_string(cols));
  if (block_size < 1) throw Error(ErrorKind::kUsage, "", "block_size", std::string(algo) + " block_size must be >= 1");
  if (spec.qscheme == QScheme::kPerGroup && !static_groups)
    throw Error(ErrorKind::kUnsupported, "", "static_groups",
                std::string(algo) + " with per-group weights needs static_groups: Quark 0.13 cannot export dynamic "
                "groups from it (its scale list comes out empty or one entry per column)",
                "set static_groups true (Quark's default)");
  for (uint64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(w[i])) detail::throw_nonfinite(tensor_name, i / cols, i % cols, w[i]);
  for (const std::vector<double>* m : squares)
    detail::check_finite_statistic(*m, tensor_name, std::string(algo) + " statistics matrix");
}

std::vector<int64_t> fix_dead_columns(std::vector<double>& H, std::vector<float>& W, int64_t rows, int64_t cols) {
  std::vector<int64_t> dead;
  for (int64_t i = 0; i < cols; ++i) {
    double& d = H[static_cast<size_t>(i * cols + i)];
    if (d != 0.0) continue;
    d = 1.0;
    for (int64_t r = 0; r < rows; ++r) W[static_cast<size_t>(r * cols + i)] = 0.0f;
    dead.push_back(i);
  }
  return dead;
}

ColumnCodec::ColumnCodec(const std::vector<float>& W, uint64_t rows, uint64_t cols, const QuantSpec& spec,
                         DType scale_dtype, DType model_dtype, std::string_view tensor_name, ThreadPool& pool)
    : p_(detail::make_plan(rows, cols, spec, scale_dtype, model_dtype, tensor_name)), rows_(rows), cols_(cols) {
  groups_ = p_.per_tensor ? 1 : p_.groups_per_row;
  gp_.resize(p_.per_tensor ? 1 : rows * groups_);
  if (p_.per_tensor) {
    gp_[0] = detail::group_params(p_, W.data(), rows * cols, tensor_name);
  } else {
    const uint64_t g = p_.group;
    pool.parallel_for(static_cast<int64_t>(rows), [&](int64_t b, int64_t e) {
      detail::FpEnvGuard env;
      for (int64_t r = b; r < e; ++r)
        for (uint64_t k = 0; k < groups_; ++k)
          gp_[static_cast<size_t>(r) * groups_ + k] =
              detail::group_params(p_, W.data() + static_cast<uint64_t>(r) * cols + k * g, g, tensor_name);
    });
  }
  qt_.spec = spec;
  qt_.shape = {rows, cols};
  qt_.codes.assign(rows * cols, 0);
  qt_.scale_dtype = p_.kind == detail::Kind::kMx ? DType::kE8M0 : scale_dtype;
}

float ColumnCodec::encode(int64_t r, int64_t col, float x) {
  const detail::GroupParams& g =
      p_.per_tensor ? gp_[0] : gp_[static_cast<size_t>(r) * groups_ + static_cast<uint64_t>(col) / p_.group];
  float q = 0.0f;
  qt_.codes[static_cast<size_t>(r) * cols_ + static_cast<uint64_t>(col)] = detail::gptq_quantize_one(p_, g, x, &q);
  return q;
}

GptqResult ColumnCodec::finish(ThreadPool& pool) {
  GptqResult res;
  res.qt = std::move(qt_);
  res.qt.scales.resize(gp_.size());
  for (size_t i = 0; i < gp_.size(); ++i) res.qt.scales[i] = gp_[i].scale;
  if (!p_.symmetric && p_.kind == detail::Kind::kInt) {
    res.qt.zero_points.resize(gp_.size());
    for (size_t i = 0; i < gp_.size(); ++i) res.qt.zero_points[i] = gp_[i].zp;
  }
  res.dequantized = dequantize(res.qt, pool.size());
  return res;
}

std::vector<int64_t> column_order(const std::vector<double>& H, int64_t cols, bool act_order) {
  std::vector<int64_t> perm(static_cast<size_t>(cols));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return H[static_cast<size_t>(a * cols + a)] > H[static_cast<size_t>(b * cols + b)];
    });
  return perm;
}

void permute_square(std::vector<double>& M, const std::vector<int64_t>& perm) {
  const int64_t n = static_cast<int64_t>(perm.size());
  std::vector<double> tmp(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {  // columns, row by row
    double* row = M.data() + i * n;
    for (int64_t j = 0; j < n; ++j) tmp[static_cast<size_t>(j)] = row[perm[static_cast<size_t>(j)]];
    std::copy(tmp.begin(), tmp.end(), row);
  }
  std::vector<char> done(static_cast<size_t>(n), 0);
  for (int64_t start = 0; start < n; ++start) {  // rows, by cycles: row i takes old row perm[i]
    if (done[static_cast<size_t>(start)]) continue;
    std::copy(M.data() + start * n, M.data() + (start + 1) * n, tmp.begin());
    for (int64_t i = start;;) {
      done[static_cast<size_t>(i)] = 1;
      const int64_t src = perm[static_cast<size_t>(i)];
      if (src == start) {
        std::copy(tmp.begin(), tmp.end(), M.data() + i * n);
        break;
      }
      std::copy(M.data() + src * n, M.data() + (src + 1) * n, M.data() + i * n);
      i = src;
    }
  }
}

void permute_columns(std::vector<float>& W, int64_t rows, const std::vector<int64_t>& perm) {
  const int64_t n = static_cast<int64_t>(perm.size());
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    float* w = W.data() + r * n;
    for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] = w[perm[static_cast<size_t>(j)]];
    std::copy(row.begin(), row.end(), w);
  }
}

bool damped_inverse_factor(std::vector<double>& H, int64_t n, double base, int retries, std::vector<float>& U,
                           double* damp, int* attempts, ThreadPool* pool) {
  double d = base;
  bool retry = true, ok = false;
  *attempts = 0;
  for (int k = 0; k <= std::max(0, retries) && !ok && retry; ++k, d *= 10.0) {
    ++*attempts;
    *damp = d;
    ok = std::isfinite(d) && detail::cholesky_inverse_upper(H, n, d, U, &retry, pool);
  }
  return ok;
}

double column_loop(std::vector<float>& W, int64_t rows, int64_t n, const std::vector<float>& U,
                   const std::vector<float>* P, int64_t block_size,
                   const std::function<float(int64_t r, int64_t j, float w)>& quant, ThreadPool& pool) {
  const int64_t B = block_size;
  std::vector<double> row_loss(static_cast<size_t>(rows), 0.0);
  std::vector<float> err(static_cast<size_t>(rows * B)), w1;
  for (int64_t i1 = 0; i1 < n; i1 += B) {
    const int64_t i2 = std::min(n, i1 + B), cnt = i2 - i1;
    pool.parallel_for(rows, [&](int64_t rb, int64_t re) {
      detail::FpEnvGuard env;
      for (int64_t r = rb; r < re; ++r) {
        float* wr = W.data() + r * n;
        float* er = err.data() + r * B;
        for (int64_t j = i1; j < i2; ++j) {
          const float w = wr[j];
          const float q = quant(r, j, w);
          const float* uj = U.data() + j * n;
          const float e = (w - q) / uj[j];
          row_loss[static_cast<size_t>(r)] += static_cast<double>(e) * e / 2.0;
          er[j - i1] = e;
          if (P == nullptr) {
            for (int64_t k = j + 1; k < i2; ++k) wr[k] -= e * uj[k];
          } else {
            const float* pj = P->data() + j * n;
            for (int64_t k = j; k < i2; ++k) wr[k] -= e * uj[k] - w * pj[k];
          }
        }
      }
    });
    if (i2 >= n) continue;
    // W[:, i2:] -= Err · U[i1:i2, i2:] (fixed order per element) ...
    linalg::gemm_sub(rows, n - i2, cnt, err.data(), B, U.data() + i1 * n + i2, n, W.data() + i2, n, &pool);
    if (P == nullptr) continue;
    // ... and += W1 · P[i1:i2, i2:] (gemm_sub of -W1).
    w1.resize(static_cast<size_t>(rows * cnt));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cnt; ++k) w1[static_cast<size_t>(r * cnt + k)] = -W[static_cast<size_t>(r * n + i1 + k)];
    linalg::gemm_sub(rows, n - i2, cnt, w1.data(), cnt, P->data() + i1 * n + i2, n, W.data() + i2, n, &pool);
  }
  double loss = 0;
  for (double l : row_loss) loss += l;
  return loss;
}

}  // namespace qloom::quant::variants
