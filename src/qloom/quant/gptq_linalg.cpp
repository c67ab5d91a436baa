// Blocked, threaded versions of gptq_linalg.h's chains. Work is cut into
// register tiles (ChainKernels) and tasks over threads; a tile's k range is
// walked in slices of kKC with C stored between slices (an exact round trip),
// so each element's chain is never reordered.
#include "qloom/quant/gptq_linalg.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/quant/gptq_linalg_kernels.h"

namespace qloom::quant::linalg {
namespace detail {
namespace {

thread_local int t_override = -1;

template <class T, bool Sub>
void scalar_micro(int64_t kc, const T* ap, const T* bp, T* c, int64_t ldc) {
  constexpr int MR = 4, NR = 4;
  T acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = c[i * ldc + j];
  for (int64_t k = 0; k < kc; ++k)
    for (int i = 0; i < MR; ++i) {
      const T av = Sub ? -ap[k * MR + i] : ap[k * MR + i];
      for (int j = 0; j < NR; ++j) acc[i][j] = std::fma(av, bp[k * NR + j], acc[i][j]);
    }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) c[i * ldc + j] = acc[i][j];
}

template <class T>
void scalar_axpy(int64_t n, T alpha, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], alpha, y[i]);
}

template <class T>
void scalar_pack(int64_t kc, const T* b, int64_t ldb, T* dst) {
  for (int64_t k = 0; k < kc; ++k)
    for (int j = 0; j < 4; ++j) dst[k * 4 + j] = b[k * ldb + j];
}

template <class T>
const ChainKernels<T>* scalar_set() {
  static const ChainKernels<T> set{"scalar",          4, 4, scalar_micro<T, false>, scalar_micro<T, true>,
                                   scalar_axpy<T>, scalar_pack<T>};
  return &set;
}

}  // namespace

IsaOverride::IsaOverride(Isa isa) : saved_(t_override) {
  if (!isa_supported(isa))
    throw Error(ErrorKind::kUnsupported, "", isa_name(isa),
                std::string("ISA ") + isa_name(isa) + " is not available on this CPU (or QLOOM_MAX_ISA caps it)");
  t_override = static_cast<int>(isa);
}
IsaOverride::~IsaOverride() { t_override = saved_; }

}  // namespace detail

namespace {

using detail::ChainKernels;

Isa current_isa() { return detail::t_override >= 0 ? static_cast<Isa>(detail::t_override) : best_isa(); }

template <class T>
const ChainKernels<T>* kernels() {
  constexpr bool f64 = sizeof(T) == sizeof(double);
  const ChainKernels<T>* k = nullptr;
  switch (current_isa()) {
    case Isa::kAvx512:
      if constexpr (f64) k = detail::chain_kernels_f64_avx512();
      else k = detail::chain_kernels_f32_avx512();
      break;
    case Isa::kAvx2:
      if constexpr (f64) k = detail::chain_kernels_f64_avx2();
      else k = detail::chain_kernels_f32_avx2();
      break;
    case Isa::kScalar: break;
  }
  return k ? k : detail::scalar_set<T>();
}

// Which C[i, j] (indices local to C) a job writes.
enum class Mask { kAll, kLower /* j <= i */, kUpper /* j >= i */ };

// C[i, j] = chain over k of ±A[i, k] · B[k, j], A[i, k] = a[i*rsa + k*csa],
// B[k, j] = b[k*ldb + j].
template <class T>
struct Job {
  int64_t m = 0, n = 0, K = 0;
  const T* a = nullptr;
  int64_t rsa = 0, csa = 0;
  const T* b = nullptr;
  int64_t ldb = 0;
  T* c = nullptr;
  int64_t ldc = 0;
  bool sub = false;
  Mask mask = Mask::kAll;
};

constexpr int64_t kKC = 256;      // k slice per pass over a tile
constexpr int64_t kTileRows = 4;  // register tiles per task, each way
constexpr int64_t kSerialMacs = int64_t{1} << 18;

bool kept(Mask m, int64_t i, int64_t j) { return m == Mask::kAll || (m == Mask::kLower ? j <= i : j >= i); }

// Any / every element of the block [i0, i1) x [j0, j1) kept by the mask.
bool any_kept(Mask m, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  return m == Mask::kAll || (m == Mask::kLower ? j0 <= i1 - 1 : j1 - 1 >= i0);
}
bool all_kept(Mask m, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  return m == Mask::kAll || (m == Mask::kLower ? j1 - 1 <= i0 : j0 >= i1 - 1);
}

template <class T>
struct Scratch {
  std::vector<T> c;
};

// One register tile at (i0, j0) over a k slice of kc: ap / bp are the tile's
// packed rows of A ([k][MR]) and columns of B ([k][NR]), zero-padded. Edge
// tiles and tiles the mask cuts run on a copy of C; only kept elements are
// stored.
template <class T>
void tile(const Job<T>& g, const ChainKernels<T>& ks, int64_t i0, int64_t j0, int64_t kc, const T* ap, const T* bp,
          Scratch<T>& s) {
  const int64_t MR = ks.mr, NR = ks.nr, mr = std::min(MR, g.m - i0), nr = std::min(NR, g.n - j0);
  if (!any_kept(g.mask, i0, i0 + mr, j0, j0 + nr)) return;
  auto micro = g.sub ? ks.micro_sub : ks.micro_add;
  T* c = g.c + i0 * g.ldc + j0;
  if (mr == MR && nr == NR && all_kept(g.mask, i0, i0 + mr, j0, j0 + nr)) {
    micro(kc, ap, bp, c, g.ldc);
    return;
  }
  s.c.assign(static_cast<size_t>(MR * NR), T(0));
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) s.c[static_cast<size_t>(i * NR + j)] = c[i * g.ldc + j];
  micro(kc, ap, bp, s.c.data(), NR);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j)
      if (kept(g.mask, i0 + i, j0 + j)) c[i * g.ldc + j] = s.c[static_cast<size_t>(i * NR + j)];
}

// B[k0:k1, c0:c1) into panels of NR columns, [panel][k - k0][NR], zero-padded.
template <class T>
void pack_b(const Job<T>& g, const ChainKernels<T>& ks, int64_t k0, int64_t k1, int64_t c0, int64_t c1,
            std::vector<T>& out) {
  const int64_t NR = ks.nr, kc = k1 - k0, panels = (c1 - c0 + NR - 1) / NR;
  out.resize(static_cast<size_t>(panels * kc * NR));
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j0 = c0 + p * NR, nr = std::min(NR, c1 - j0);
    T* dst = out.data() + p * kc * NR;
    if (nr == NR) {
      ks.pack(kc, g.b + k0 * g.ldb + j0, g.ldb, dst);
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = g.b + (k0 + k) * g.ldb + j0;
      for (int64_t j = 0; j < NR; ++j) dst[k * NR + j] = j < nr ? src[j] : T(0);
    }
  }
}

// A[r0:r1, k0:k1) into tiles of MR rows, [tile][k - k0][MR], zero-padded.
template <class T>
void pack_a(const Job<T>& g, int64_t MR, int64_t k0, int64_t k1, int64_t r0, int64_t r1, std::vector<T>& out) {
  const int64_t kc = k1 - k0, tiles = (r1 - r0 + MR - 1) / MR;
  out.resize(static_cast<size_t>(tiles * kc * MR));
  for (int64_t t = 0; t < tiles; ++t) {
    T* dst = out.data() + t * kc * MR;
    const int64_t rows = std::min(MR, r1 - r0 - t * MR);
    const T* src = g.a + (r0 + t * MR) * g.rsa + k0 * g.csa;
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t i = 0; i < MR; ++i) dst[k * MR + i] = i < rows ? src[i * g.rsa + k * g.csa] : T(0);
  }
}

// body(i) for i in [0, n), round-robin over the pool's threads.
template <class F>
void round_robin(int64_t n, ThreadPool* pool, F&& body) {
  const int64_t P = pool ? pool->size() : 1;
  if (P <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  pool->parallel_for(P, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w)
      for (int64_t i = w; i < n; i += P) body(i);
  });
}

// Per k slice of kKC: A and B packed once (all row tiles, all column panels),
// then tasks of kTileRows x kTileRows register tiles spread over the threads
// round-robin. Slices run in order, so every chain keeps its order; any
// split of the tiles gives the same bits.
template <class T>
void run_job(const Job<T>& g, ThreadPool* pool) {
  if (g.m <= 0 || g.n <= 0 || g.K <= 0) return;
  const ChainKernels<T>& ks = *kernels<T>();
  const int64_t MR = ks.mr, NR = ks.nr, RB = kTileRows * MR, CB = kTileRows * NR;
  const int64_t rbs = (g.m + RB - 1) / RB, cbs = (g.n + CB - 1) / CB;
  std::vector<int64_t> tasks;
  for (int64_t t = 0; t < rbs * cbs; ++t) {
    const int64_t i0 = t / cbs * RB, j0 = t % cbs * CB;
    if (any_kept(g.mask, i0, std::min(g.m, i0 + RB), j0, std::min(g.n, j0 + CB))) tasks.push_back(t);
  }
  if (!pool || g.m * g.n * g.K < kSerialMacs) pool = nullptr;
  const int64_t tiles = (g.m + MR - 1) / MR, panels = (g.n + NR - 1) / NR;
  std::vector<T> apack, bpack;
  for (int64_t k0 = 0; k0 < g.K; k0 += kKC) {
    const int64_t k1 = std::min(g.K, k0 + kKC), kc = k1 - k0;
    apack.resize(static_cast<size_t>(tiles * MR * kc));
    bpack.resize(static_cast<size_t>(panels * NR * kc));
    round_robin(rbs + cbs, pool, [&](int64_t i) {  // row blocks' A, column blocks' B
      std::vector<T> tmp;
      if (i < rbs) {
        const int64_t r0 = i * RB, r1 = std::min(g.m, r0 + RB);
        pack_a(g, MR, k0, k1, r0, r1, tmp);
        std::copy(tmp.begin(), tmp.end(), apack.begin() + r0 * kc);
      } else {
        const int64_t c0 = (i - rbs) * CB, c1 = std::min(g.n, c0 + CB);
        pack_b(g, ks, k0, k1, c0, c1, tmp);
        std::copy(tmp.begin(), tmp.end(), bpack.begin() + c0 * kc);
      }
    });
    round_robin(static_cast<int64_t>(tasks.size()), pool, [&](int64_t ti) {
      const int64_t t = tasks[static_cast<size_t>(ti)];
      const int64_t r0 = t / cbs * RB, r1 = std::min(g.m, r0 + RB), c0 = t % cbs * CB, c1 = std::min(g.n, c0 + CB);
      Scratch<T> s;
      for (int64_t j0 = c0; j0 < c1; j0 += NR)
        for (int64_t i0 = r0; i0 < r1; i0 += MR)
          tile(g, ks, i0, j0, kc, apack.data() + i0 * kc, bpack.data() + j0 * kc, s);
    });
  }
}

// body(begin, end) over [0, n) in chunks of `chunk`, round-robin on the pool.
template <class F>
void over_chunks(int64_t n, int64_t chunk, ThreadPool* pool, F&& body) {
  const int64_t nc = (n + chunk - 1) / chunk, P = pool ? pool->size() : 1;
  auto one = [&](int64_t c) { body(c * chunk, std::min(n, (c + 1) * chunk)); };
  if (P <= 1 || nc <= 1) {
    for (int64_t c = 0; c < nc; ++c) one(c);
    return;
  }
  pool->parallel_for(P, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w)
      for (int64_t c = w; c < nc; c += P) one(c);
  });
}

constexpr int64_t kNB = 96;      // panel width of the factorizations (a multiple of every mr)
constexpr int64_t kChunk = 256;  // rows / columns per task of the panel steps

}  // namespace

const char* kernel_isa() { return kernels<double>()->name; }

// ------------------------------------------------------------------ SYRK

namespace {

template <class T>
void syrk_upper(const T* X, int64_t rows, int64_t n, T* C, ThreadPool* pool) {
  Job<T> g;
  g.m = g.n = n, g.K = rows;
  g.a = X, g.rsa = 1, g.csa = n;  // A[i, r] = X[r, i]
  g.b = X, g.ldb = n;
  g.c = C, g.ldc = n;
  g.mask = Mask::kUpper;
  run_job(g, pool);
}

template <class T>
void syrk_upper_ref(const T* X, int64_t rows, int64_t n, T* C) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {
      T acc = C[i * n + j];
      for (int64_t r = 0; r < rows; ++r) acc = std::fma(X[r * n + i], X[r * n + j], acc);
      C[i * n + j] = acc;
    }
}

}  // namespace

void syrk_upper_add(const double* X, int64_t rows, int64_t n, double* C, ThreadPool* pool) {
  syrk_upper(X, rows, n, C, pool);
}
void syrk_upper_add_ref(const double* X, int64_t rows, int64_t n, double* C) { syrk_upper_ref(X, rows, n, C); }
void syrk_upper_add(const float* X, int64_t rows, int64_t n, float* C, ThreadPool* pool) {
  syrk_upper(X, rows, n, C, pool);
}
void syrk_upper_add_ref(const float* X, int64_t rows, int64_t n, float* C) { syrk_upper_ref(X, rows, n, C); }

// -------------------------------------------------------------- Cholesky

namespace {

// Panel columns [j0, j0 + w) of A, transposed: pt[jj*len + ii] holds
// A[j0 + ii, j0 + jj] for ii >= jj (len = n - j0). Factors it in place:
// column jj gets the chain terms of k in [j0, j0 + jj) (the earlier ones came
// from the trailing updates), then the pivot and the division.
bool factor_panel(double* pt, int64_t w, int64_t len, ThreadPool* pool, const ChainKernels<double>& ks) {
  for (int64_t jj = 0; jj < w; ++jj) {  // the diagonal block, in order
    double* row = pt + jj * len;
    for (int64_t kk = 0; kk < jj; ++kk) ks.axpy(w - jj, -pt[kk * len + jj], pt + kk * len + jj, row + jj);
    const double d = row[jj];
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double l = std::sqrt(d);
    row[jj] = l;
    for (int64_t ii = jj + 1; ii < w; ++ii) row[ii] /= l;
  }
  over_chunks(len - w, kChunk, pool, [&](int64_t b, int64_t e) {  // the rows below it
    for (int64_t jj = 0; jj < w; ++jj) {
      double* row = pt + jj * len + w;
      for (int64_t kk = 0; kk < jj; ++kk) ks.axpy(e - b, -pt[kk * len + jj], pt + kk * len + w + b, row + b);
      const double l = pt[jj * len + jj];
      for (int64_t ii = b; ii < e; ++ii) row[ii] /= l;
    }
  });
  return true;
}

}  // namespace

bool cholesky_lower(double* A, int64_t n, ThreadPool* pool) {
  const ChainKernels<double>& ks = *kernels<double>();
  std::vector<double> pt(static_cast<size_t>(std::min(n, kNB) * n));
  for (int64_t j0 = 0; j0 < n; j0 += kNB) {
    const int64_t w = std::min(kNB, n - j0), len = n - j0;
    over_chunks(len, kChunk, pool, [&](int64_t b, int64_t e) {
      for (int64_t ii = b; ii < e; ++ii)
        for (int64_t jj = 0; jj < w && jj <= ii; ++jj)
          pt[static_cast<size_t>(jj * len + ii)] = A[(j0 + ii) * n + j0 + jj];
    });
    if (!factor_panel(pt.data(), w, len, pool, ks)) return false;
    over_chunks(len, kChunk, pool, [&](int64_t b, int64_t e) {
      for (int64_t ii = b; ii < e; ++ii)
        for (int64_t jj = 0; jj < w && jj <= ii; ++jj)
          A[(j0 + ii) * n + j0 + jj] = pt[static_cast<size_t>(jj * len + ii)];
    });
    if (w == len) break;
    Job<double> g;  // A[j0+w:, j0+w:] (lower) -= L[j0+w:, panel] · L[j0+w:, panel]ᵀ
    g.m = g.n = len - w, g.K = w;
    g.a = A + (j0 + w) * n + j0, g.rsa = n, g.csa = 1;
    g.b = pt.data() + w, g.ldb = len;
    g.c = A + (j0 + w) * n + j0 + w, g.ldc = n;
    g.sub = true;
    g.mask = Mask::kLower;
    run_job(g, pool);
  }
  return true;
}

bool cholesky_lower_ref(double* A, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = A[j * n + j];
    for (int64_t k = 0; k < j; ++k) d = std::fma(-A[j * n + k], A[j * n + k], d);
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double l = std::sqrt(d);
    A[j * n + j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = A[i * n + j];
      for (int64_t k = 0; k < j; ++k) s = std::fma(-A[i * n + k], A[j * n + k], s);
      A[i * n + j] = s / l;
    }
  }
  return true;
}

// --------------------------------------------------------------- inverse

// Column block J = [j0, j0 + wj) of M, right-looking down the rows in
// blocks K: the rows of K are finished (the chain's terms with k in K, then
// the division), then every row below takes K's terms at once (one GEMM:
// S[K1:, J] += L[K1:, K] · M[K, J]). The terms with k < j come first in each
// chain and have M[k, j] = 0 (S starts at +0 and is never written above the
// diagonal): fma(x, 0, +0) = +0, so the chain is the reference's.
void invert_lower(double* A, int64_t n, ThreadPool* pool) {
  const ChainKernels<double>& ks = *kernels<double>();
  std::vector<double> S;
  for (int64_t j0 = 0; j0 < n; j0 += kNB) {
    const int64_t wj = std::min(kNB, n - j0), len = n - j0;
    S.assign(static_cast<size_t>(len * wj), 0.0);  // S[(i - j0) * wj + (j - j0)]
    for (int64_t k0 = j0; k0 < n; k0 += kNB) {
      const int64_t k1 = std::min(n, k0 + kNB);
      for (int64_t i = k0; i < k1; ++i) {
        double* row = S.data() + (i - j0) * wj;
        for (int64_t k = k0; k < i; ++k) {
          const int64_t cnt = std::min(wj, k - j0 + 1);  // M[k, j] == 0 for j > k
          ks.axpy(cnt, A[i * n + k], S.data() + (k - j0) * wj, row);
        }
        const double l = A[i * n + i];
        for (int64_t jj = 0; jj < wj && j0 + jj < i; ++jj) row[jj] = -row[jj] / l;
        if (i < j0 + wj) row[i - j0] = 1.0 / l;
      }
      if (k1 == n) break;
      Job<double> g;
      g.m = n - k1, g.n = wj, g.K = k1 - k0;
      g.a = A + k1 * n + k0, g.rsa = n, g.csa = 1;
      g.b = S.data() + (k0 - j0) * wj, g.ldb = wj;
      g.c = S.data() + (k1 - j0) * wj, g.ldc = wj;
      run_job(g, pool);
    }
    // Later column blocks read L only right of this one: write M[:, J] back.
    for (int64_t i = j0; i < n; ++i)
      for (int64_t jj = 0; jj < wj && j0 + jj <= i; ++jj) A[i * n + j0 + jj] = S[static_cast<size_t>((i - j0) * wj + jj)];
  }
  for (int64_t i = 0; i < n; ++i) std::fill(A + i * n + i + 1, A + (i + 1) * n, 0.0);
}

void invert_lower_ref(double* A, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::fill(A + i * n + i + 1, A + (i + 1) * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double l = A[i * n + i];
    for (int64_t j = 0; j < i; ++j) {
      double s = 0.0;
      for (int64_t k = j; k < i; ++k) s = std::fma(A[i * n + k], A[k * n + j], s);
      A[i * n + j] = -s / l;
    }
    A[i * n + i] = 1.0 / l;
  }
}

// ------------------------------------------------------------ GPTQ update

void gemm_sub(int64_t m, int64_t n, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc, ThreadPool* pool) {
  Job<float> g;
  g.m = m, g.n = n, g.K = K;
  g.a = A, g.rsa = lda, g.csa = 1;
  g.b = B, g.ldb = ldb;
  g.c = C, g.ldc = ldc;
  g.sub = true;
  run_job(g, pool);
}

void gemm_sub_ref(int64_t m, int64_t n, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  float* C, int64_t ldc) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      float acc = C[r * ldc + c];
      for (int64_t k = 0; k < K; ++k) acc = std::fma(-A[r * lda + k], B[k * ldb + c], acc);
      C[r * ldc + c] = acc;
    }
}

}  // namespace qloom::quant::linalg
