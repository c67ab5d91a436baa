// Plain double-precision implementations of GPTAQ and Qronos straight from
// Quark's formulas (quark/torch/algorithm/gptaq/gptaq.py,
// qronos/qronos.py, amd-quark 0.13; quant/gptaq.h, quant/qronos.h), for the
// tests of the optimized ones: explicit inverses, no lazy batching for
// Qronos (Quark's own Sherman-Morrison route to the trailing inverse),
// Quark's blocked loop for GPTAQ (its in-block and lazy updates differ in
// which w the asymmetric term uses, so the blocks are part of the maths).
// Also the test problems: float inputs X and "quantized model" inputs X̃ of
// the same tokens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "qloom/quant/cross_gram.h"
#include "qloom/quant/gptq.h"
#include "qloom/quant/quantize_ref.h"
#include "quant/weight_gen.h"

namespace qloom::quant::vref {

using Mat = std::vector<double>;  // row-major

inline QuantSpec int_spec(QDtype dt, QScheme qs, int group, bool sym) {
  QuantSpec s;
  s.dtype = dt;
  s.qscheme = qs;
  s.symmetric = sym;
  s.group_size = group;
  s.ch_axis = qs == QScheme::kPerChannel ? 0 : -1;
  return s;
}

// The specs the GPTAQ and Qronos tests run each check on.
struct Case {
  const char* name;
  QuantSpec spec;
  bool act_order;
};

inline std::vector<Case> cases() {
  return {
      {"int4_g64", int_spec(QDtype::kInt4, QScheme::kPerGroup, 64, true), false},
      {"int4_g64_act_order", int_spec(QDtype::kInt4, QScheme::kPerGroup, 64, true), true},
      {"uint4_g32_act_order", int_spec(QDtype::kUInt4, QScheme::kPerGroup, 32, false), true},
      {"int4_per_channel", int_spec(QDtype::kInt4, QScheme::kPerChannel, 0, true), true},
      {"int8_per_tensor", int_spec(QDtype::kInt8, QScheme::kPerTensor, 0, true), false},
  };
}

// X [n, cols] correlated, per-feature scales over two orders of magnitude;
// Xq = X plus an error correlated with X (as an upstream quantized layer
// gives): Xq = X + eps · (X · E) with a random E.
struct Streams {
  int64_t n = 0, cols = 0;
  std::vector<float> X, Xq;
};

inline Streams make_streams(int64_t n, int64_t cols, uint64_t seed, double eps = 0.08) {
  testgen::Rng r(seed);
  Streams s{n, cols, std::vector<float>(static_cast<size_t>(n * cols)), {}};
  std::vector<double> M(static_cast<size_t>(cols * cols)), E(static_cast<size_t>(cols * cols)), scale(cols);
  for (auto& m : M) m = r.normal() / std::sqrt(static_cast<double>(cols));
  for (auto& e : E) e = r.normal() / std::sqrt(static_cast<double>(cols));
  for (int64_t i = 0; i < cols; ++i) M[static_cast<size_t>(i * cols + i)] += 1.0;
  for (auto& v : scale) v = std::exp(2.0 * r.uniform() - 1.0) * (r.uniform() < 0.05 ? 10 : 1);
  std::vector<double> z(static_cast<size_t>(cols)), x(static_cast<size_t>(cols));
  s.Xq.resize(s.X.size());
  for (int64_t t = 0; t < n; ++t) {
    for (auto& v : z) v = r.normal();
    for (int64_t j = 0; j < cols; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += z[static_cast<size_t>(k)] * M[static_cast<size_t>(k * cols + j)];
      x[static_cast<size_t>(j)] = acc * scale[static_cast<size_t>(j)];
      s.X[static_cast<size_t>(t * cols + j)] = static_cast<float>(x[static_cast<size_t>(j)]);
    }
    for (int64_t j = 0; j < cols; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += x[static_cast<size_t>(k)] * E[static_cast<size_t>(k * cols + j)];
      s.Xq[static_cast<size_t>(t * cols + j)] = static_cast<float>(x[static_cast<size_t>(j)] + eps * acc);
    }
  }
  return s;
}

inline Mat hessian(const Streams& s) {  // 2/n Σ x̃ x̃ᵀ
  HessianAccumulator a(s.cols);
  a.add(s.Xq.data(), s.n);
  return a.take_hessian();
}

inline Mat cross(const Streams& s, bool delta) {  // 2/n Σ a x̃ᵀ
  CrossGramAccumulator c(s.cols);
  std::vector<float> a(s.X);
  if (delta)
    for (size_t i = 0; i < a.size(); ++i) a[i] = s.X[i] - s.Xq[i];
  c.add(a.data(), s.Xq.data(), s.n);
  return c.take();
}

// ||X Wᵀ - X̃ Qᵀ||² / n: what both methods minimize.
inline double asym_error(const Streams& s, const std::vector<float>& W, const std::vector<float>& Q, int64_t rows) {
  double total = 0;
  for (int64_t t = 0; t < s.n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double a = 0, b = 0;
      for (int64_t j = 0; j < s.cols; ++j) {
        a += static_cast<double>(s.X[static_cast<size_t>(t * s.cols + j)]) * W[static_cast<size_t>(r * s.cols + j)];
        b += static_cast<double>(s.Xq[static_cast<size_t>(t * s.cols + j)]) * Q[static_cast<size_t>(r * s.cols + j)];
      }
      total += (a - b) * (a - b);
    }
  return total / static_cast<double>(s.n);
}

// Plain Cholesky A = L Lᵀ (lower); false when not positive definite.
inline bool cholesky(const Mat& A, int64_t n, Mat& L) {
  L.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    double s = A[static_cast<size_t>(j * n + j)];
    for (int64_t k = 0; k < j; ++k) s -= L[static_cast<size_t>(j * n + k)] * L[static_cast<size_t>(j * n + k)];
    if (!(s > 0)) return false;
    const double d = std::sqrt(s);
    L[static_cast<size_t>(j * n + j)] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double t = A[static_cast<size_t>(i * n + j)];
      for (int64_t k = 0; k < j; ++k) t -= L[static_cast<size_t>(i * n + k)] * L[static_cast<size_t>(j * n + k)];
      L[static_cast<size_t>(i * n + j)] = t / d;
    }
  }
  return true;
}

// A^-1 of a symmetric positive definite A (Cholesky, then L^-ᵀ L^-1).
inline Mat inverse(const Mat& A, int64_t n) {
  Mat L;
  EXPECT_TRUE(cholesky(A, n, L));
  Mat Li(static_cast<size_t>(n * n), 0.0);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = c; i < n; ++i) {
      double s = i == c ? 1.0 : 0.0;
      for (int64_t k = c; k < i; ++k) s -= L[static_cast<size_t>(i * n + k)] * Li[static_cast<size_t>(k * n + c)];
      Li[static_cast<size_t>(i * n + c)] = s / L[static_cast<size_t>(i * n + i)];
    }
  Mat inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = std::max(i, j); k < n; ++k) s += Li[static_cast<size_t>(k * n + i)] * Li[static_cast<size_t>(k * n + j)];
      inv[static_cast<size_t>(i * n + j)] = s;
    }
  return inv;
}

// U upper with A = Uᵀ U (torch.linalg.cholesky(A, upper=True)).
inline Mat upper_factor(const Mat& A, int64_t n) {
  Mat L;
  EXPECT_TRUE(cholesky(A, n, L));
  Mat U(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) U[static_cast<size_t>(i * n + j)] = L[static_cast<size_t>(j * n + i)];
  return U;
}

inline Mat matmul(const Mat& A, const Mat& B, int64_t m, int64_t k, int64_t n) {
  Mat C(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const double a = A[static_cast<size_t>(i * k + p)];
      if (a == 0.0) continue;
      for (int64_t j = 0; j < n; ++j) C[static_cast<size_t>(i * n + j)] += a * B[static_cast<size_t>(p * n + j)];
    }
  return C;
}

struct RefOut {
  std::vector<uint8_t> codes;
  std::vector<float> deq;
};

// Quark's quantizer set-up (static groups from W after the dead columns),
// act order, and a per-element encoder in the original column order.
struct RefSetup {
  detail::Plan p;
  int64_t rows, cols;
  Mat W;                       // permuted
  std::vector<int64_t> perm, dead;
  std::vector<detail::GroupParams> gp;
  RefOut out;

  RefSetup(const std::vector<float>& w, int64_t r, int64_t c, Mat& H, const QuantSpec& spec, bool act_order)
      : p(detail::make_plan(r, c, spec, DType::kF32, DType::kF32, "ref")), rows(r), cols(c), W(w.begin(), w.end()) {
    for (int64_t i = 0; i < c; ++i)
      if (H[static_cast<size_t>(i * c + i)] == 0.0) {
        H[static_cast<size_t>(i * c + i)] = 1.0;
        for (int64_t k = 0; k < r; ++k) W[static_cast<size_t>(k * c + i)] = 0.0;
        dead.push_back(i);
      }
    std::vector<float> wf(W.begin(), W.end());
    const uint64_t G = p.per_tensor ? 1 : p.groups_per_row;
    gp.resize(p.per_tensor ? 1 : static_cast<size_t>(r) * G);
    if (p.per_tensor) gp[0] = detail::group_params(p, wf.data(), wf.size(), "ref");
    else
      for (int64_t k = 0; k < r; ++k)
        for (uint64_t g = 0; g < G; ++g)
          gp[static_cast<size_t>(k) * G + g] = detail::group_params(p, wf.data() + k * c + g * p.group, p.group, "ref");
    perm.resize(static_cast<size_t>(c));
    std::iota(perm.begin(), perm.end(), 0);
    if (act_order)
      std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
        return H[static_cast<size_t>(a * c + a)] > H[static_cast<size_t>(b * c + b)];
      });
    Mat Wp(W.size());
    for (int64_t k = 0; k < r; ++k)
      for (int64_t j = 0; j < c; ++j) Wp[static_cast<size_t>(k * c + j)] = W[static_cast<size_t>(k * c + perm[static_cast<size_t>(j)])];
    W.swap(Wp);
    out.codes.assign(static_cast<size_t>(r * c), 0);
    out.deq.assign(static_cast<size_t>(r * c), 0.0f);
  }
  Mat permuted(const Mat& M) const {
    Mat o(M.size());
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j)
        o[static_cast<size_t>(i * cols + j)] = M[static_cast<size_t>(perm[static_cast<size_t>(i)] * cols + perm[static_cast<size_t>(j)])];
    return o;
  }
  // Encodes x as (row r, permuted column j); returns the dequantized value.
  double encode(int64_t r, int64_t j, double x) {
    const int64_t col = perm[static_cast<size_t>(j)];
    const detail::GroupParams& g = p.per_tensor ? gp[0] : gp[static_cast<size_t>(r) * p.groups_per_row + static_cast<uint64_t>(col) / p.group];
    float q = 0;
    out.codes[static_cast<size_t>(r * cols + col)] = detail::gptq_quantize_one(p, g, static_cast<float>(x), &q);
    out.deq[static_cast<size_t>(r * cols + col)] = q;
    return q;
  }
};

inline RefOut gptaq_ref(const std::vector<float>& w, int64_t rows, int64_t cols, Mat H, Mat D, const QuantSpec& spec,
                        bool act_order, double damp_percent, double alpha, int64_t B) {
  RefSetup st(w, rows, cols, H, spec, act_order);
  for (int64_t i : st.dead)
    for (int64_t r = 0; r < cols; ++r) D[static_cast<size_t>(r * cols + i)] = 0.0;
  const int64_t n = cols;
  Mat Hp = st.permuted(H), Dp = st.permuted(D);
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += Hp[static_cast<size_t>(i * n + i)];
  for (int64_t i = 0; i < n; ++i) Hp[static_cast<size_t>(i * n + i)] += damp_percent * mean / static_cast<double>(n);
  const Mat U = upper_factor(inverse(Hp, n), n);  // Hinv = Uᵀ U
  Mat Lm(U.size());                               // L = Uᵀ
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) Lm[static_cast<size_t>(i * n + j)] = U[static_cast<size_t>(j * n + i)];
  Mat M = matmul(Dp, Lm, n, n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) M[static_cast<size_t>(i * n + j)] = 0.0;
  Mat P = matmul(M, U, n, n, n);  // triu(D L, 1) Lᵀ
  for (double& v : P) v *= alpha;
  Mat& W = st.W;
  for (int64_t i1 = 0; i1 < n; i1 += B) {
    const int64_t i2 = std::min(n, i1 + B), cnt = i2 - i1;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> W1(W.begin() + r * n + i1, W.begin() + r * n + i2), Err(static_cast<size_t>(cnt));
      for (int64_t i = 0; i < cnt; ++i) {
        const int64_t j = i1 + i;
        const double wv = W1[static_cast<size_t>(i)];
        const double q = st.encode(r, j, wv);
        const double e = (wv - q) / U[static_cast<size_t>(j * n + j)];
        for (int64_t k = i; k < cnt; ++k)
          W1[static_cast<size_t>(k)] -= e * U[static_cast<size_t>(j * n + i1 + k)] - wv * P[static_cast<size_t>(j * n + i1 + k)];
        Err[static_cast<size_t>(i)] = e;
      }
      for (int64_t c = i2; c < n; ++c) {
        double s = 0;
        for (int64_t i = 0; i < cnt; ++i)
          s += Err[static_cast<size_t>(i)] * U[static_cast<size_t>((i1 + i) * n + c)] -
               W1[static_cast<size_t>(i)] * P[static_cast<size_t>((i1 + i) * n + c)];
        W[static_cast<size_t>(r * n + c)] -= s;
      }
    }
  }
  return st.out;
}

inline double power_iteration_ref(const Mat& H, int64_t n) {
  double c = *std::max_element(H.begin(), H.end());
  c = std::fabs(c);
  std::vector<double> b(static_cast<size_t>(n), 1.0), hb(static_cast<size_t>(n));
  auto mv = [&] {
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += H[static_cast<size_t>(i * n + j)] / c * b[static_cast<size_t>(j)];
      hb[static_cast<size_t>(i)] = s;
    }
  };
  for (int it = 0; it < 30; ++it) {
    mv();
    double nn = 0;
    for (double v : hb) nn += v * v;
    for (int64_t i = 0; i < n; ++i) b[static_cast<size_t>(i)] = hb[static_cast<size_t>(i)] / (std::sqrt(nn) + 1e-12);
  }
  mv();
  double l = 0;
  for (int64_t i = 0; i < n; ++i) l += b[static_cast<size_t>(i)] * hb[static_cast<size_t>(i)];
  return l * c;
}

inline RefOut qronos_ref(const std::vector<float>& w, int64_t rows, int64_t cols, Mat H, Mat G, const QuantSpec& spec,
                         bool act_order, double alpha) {
  RefSetup st(w, rows, cols, H, spec, act_order);
  const int64_t n = cols, m = n - 1;
  const Mat Hp = st.permuted(H), Gp = st.permuted(G);
  const double damp = alpha * power_iteration_ref(Hp, n);
  Mat& W = st.W;
  std::vector<double> q0(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += W[static_cast<size_t>(r * n + k)] * Gp[static_cast<size_t>(k * n)];
    for (int64_t k = 1; k < n; ++k) s -= W[static_cast<size_t>(r * n + k)] * Hp[static_cast<size_t>(k)];
    q0[static_cast<size_t>(r)] = st.encode(r, 0, s / Hp[0]);
  }
  Mat Hd = Hp;
  for (int64_t i = 0; i < n; ++i) Hd[static_cast<size_t>(i * n + i)] += damp;
  const Mat Hinv = inverse(Hd, n);
  Mat A(static_cast<size_t>(m * m));  // Sherman-Morrison: Hinv[1:,1:] - b bᵀ / c
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < m; ++j)
      A[static_cast<size_t>(i * m + j)] = Hinv[static_cast<size_t>((i + 1) * n + j + 1)] -
                                          Hinv[static_cast<size_t>((i + 1) * n)] * Hinv[static_cast<size_t>(j + 1)] / Hinv[0];
  Mat Gd(static_cast<size_t>(n * m));  // (G + damp I)[:, 1:]
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < m; ++j) Gd[static_cast<size_t>(k * m + j)] = Gp[static_cast<size_t>(k * n + j + 1)] + (k == j + 1 ? damp : 0.0);
  const Mat GA = matmul(Gd, A, n, m, m);
  const Mat h0(Hp.begin() + 1, Hp.begin() + n);
  const Mat hA = matmul(h0, A, 1, m, m);
  const Mat WGA = matmul(W, GA, rows, n, m);
  Mat Wr(static_cast<size_t>(rows * m));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < m; ++j)
      Wr[static_cast<size_t>(r * m + j)] = WGA[static_cast<size_t>(r * m + j)] - q0[static_cast<size_t>(r)] * hA[static_cast<size_t>(j)];
  const Mat U = upper_factor(A, m);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t r = 0; r < rows; ++r) {
      const double wv = Wr[static_cast<size_t>(r * m + j)];
      const double e = (wv - st.encode(r, j + 1, wv)) / U[static_cast<size_t>(j * m + j)];
      for (int64_t k = j + 1; k < m; ++k) Wr[static_cast<size_t>(r * m + k)] -= e * U[static_cast<size_t>(j * m + k)];
    }
  return st.out;
}

}  // namespace qloom::quant::vref
