// GPTQ's fixed-order linear algebra (quant/gptq_linalg.h): every blocked,
// threaded SIMD kernel must equal its plain reference BITWISE, for every ISA
// the CPU has (scalar, avx2, avx512) and thread counts 1, 2, 3, on odd sizes
// (tile, panel, 256-deep slice and chunk edges), tiny and huge values and
// ill-conditioned matrices; the references themselves are checked against
// the maths (L Lᵀ = A, L M = I) with a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/quant/gptq_linalg.h"
#include "qloom/quant/gptq_linalg_kernels.h"
#include "quant/weight_gen.h"

namespace qloom::quant::linalg {
namespace {

using testgen::Rng;

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::kScalar};
  if (isa_supported(Isa::kAvx2)) v.push_back(Isa::kAvx2);
  if (isa_supported(Isa::kAvx512)) v.push_back(Isa::kAvx512);
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b, size_t* first = nullptr) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      if (first) *first = i;
      return false;
    }
  return true;
}

// Runs `opt` under every ISA and thread count; each result must equal `ref`.
template <class T, class F>
void expect_all_equal(const std::vector<T>& ref, F&& opt, const char* what) {
  for (Isa isa : isas())
    for (unsigned threads : {1u, 2u, 3u}) {
      detail::IsaOverride o(isa);
      ThreadPool pool(threads);
      const std::vector<T> got = opt(&pool);
      size_t at = 0;
      ASSERT_TRUE(same_bits(got, ref, &at)) << what << ": " << isa_name(isa) << ", " << threads << " threads, first "
                                            << "difference at " << at << ": " << got[at] << " vs " << ref[at];
    }
}

enum class Values { kNormal, kTiny, kHuge, kMixed };

double draw(Rng& r, Values v) {
  const double g = r.normal();
  switch (v) {
    case Values::kNormal: return g;
    case Values::kTiny: return g * 1e-150;  // products near the bottom of double's range
    case Values::kHuge: return g * 1e150;   // and near the top
    case Values::kMixed: return g * std::pow(10.0, 40.0 * r.uniform() - 20.0);
  }
  return g;
}

// X [rows, n] and A = Xᵀ X / rows + damp · mean(diag) · I (positive definite
// for damp > 0; rows < n makes Xᵀ X singular, so damp sets the condition).
std::vector<double> spd(int64_t n, uint64_t seed, double damp, Values v = Values::kNormal, int64_t rank = -1) {
  Rng r(seed);
  const int64_t rows = rank < 0 ? n + 8 : rank;
  std::vector<double> X(static_cast<size_t>(rows * n));
  for (auto& x : X) x = draw(r, v);
  std::vector<double> A(static_cast<size_t>(n * n), 0.0);
  syrk_upper_add_ref(X.data(), rows, n, A.data());
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += A[static_cast<size_t>(i * n + i)] / static_cast<double>(rows * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j < n; ++j) {
      const double s = A[static_cast<size_t>(i * n + j)] / static_cast<double>(rows) + (i == j ? damp * mean : 0.0);
      A[static_cast<size_t>(i * n + j)] = A[static_cast<size_t>(j * n + i)] = s;
    }
  return A;
}

TEST(GptqLinalg, SyrkMatchesReferenceBitwise) {
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {300, 65}, {257, 130}, {40, 301}}) {
    for (Values v : {Values::kNormal, Values::kTiny, Values::kHuge, Values::kMixed}) {
      SCOPED_TRACE(testing::Message() << rows << " x " << n << " values " << static_cast<int>(v));
      Rng r(static_cast<uint64_t>(rows * 1000 + n));
      std::vector<double> X(static_cast<size_t>(rows * n)), C0(static_cast<size_t>(n * n));
      for (auto& x : X) x = static_cast<float>(draw(r, v));  // the accumulator's x are floats
      for (auto& c : C0) c = draw(r, v);                      // a running sum to continue
      std::vector<double> ref = C0;
      syrk_upper_add_ref(X.data(), rows, n, ref.data());
      expect_all_equal(ref, [&](ThreadPool* p) {
        std::vector<double> c = C0;
        syrk_upper_add(X.data(), rows, n, c.data(), p);
        return c;
      }, "syrk");
    }
  }
}

// The float chain HessianAccumulator sums each block of rows with: tiny and
// huge values near float's range ends, NaN / inf rows, odd sizes.
TEST(GptqLinalg, FloatSyrkMatchesReferenceBitwise) {
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {128, 65}, {257, 130}, {40, 301}, {17, 576}}) {
    for (int v = 0; v < 5; ++v) {
      SCOPED_TRACE(testing::Message() << rows << " x " << n << " values " << v);
      Rng r(static_cast<uint64_t>(rows * 1000 + n + v));
      std::vector<float> X(static_cast<size_t>(rows * n)), C0(static_cast<size_t>(n * n), 0.0f);
      const double scale = v == 1 ? 1e-19 : v == 2 ? 1e18 : 1.0;
      for (auto& x : X) x = static_cast<float>(r.normal() * scale);
      if (v == 3) X[static_cast<size_t>((rows / 2) * n)] = std::numeric_limits<float>::quiet_NaN();
      if (v == 4) X[static_cast<size_t>(n - 1)] = std::numeric_limits<float>::infinity();
      if (v == 0)
        for (auto& c : C0) c = static_cast<float>(r.normal());
      std::vector<float> ref = C0;
      syrk_upper_add_ref(X.data(), rows, n, ref.data());
      expect_all_equal(ref, [&](ThreadPool* p) {
        std::vector<float> c = C0;
        syrk_upper_add(X.data(), rows, n, c.data(), p);
        return c;
      }, "syrk f32");
    }
  }
}

TEST(GptqLinalg, CholeskyAndInverseMatchReferenceBitwise) {
  struct Case {
    int64_t n;
    double damp;
    Values v;
    int64_t rank;  // rows of X (< n: singular before damping)
  };
  const Case cases[] = {{1, 0.5, Values::kNormal, -1},   {5, 0.0, Values::kNormal, -1},
                        {63, 1e-3, Values::kNormal, -1}, {64, 0.01, Values::kMixed, -1},
                        {65, 0.01, Values::kNormal, -1}, {130, 1e-9, Values::kNormal, 20},  // cond ~1e10
                        {257, 0.01, Values::kHuge, -1},  {330, 0.01, Values::kTiny, -1},
                        {331, 1e-12, Values::kNormal, 40}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "n " << c.n << " damp " << c.damp << " rank " << c.rank);
    const int64_t n = c.n;
    const std::vector<double> A = spd(n, static_cast<uint64_t>(n), c.damp, c.v, c.rank);
    std::vector<double> L = A;
    ASSERT_TRUE(cholesky_lower_ref(L.data(), n));
    expect_all_equal(L, [&](ThreadPool* p) {
      std::vector<double> a = A;
      EXPECT_TRUE(cholesky_lower(a.data(), n, p));
      return a;
    }, "cholesky");
    std::vector<double> M = L;
    invert_lower_ref(M.data(), n);
    expect_all_equal(M, [&](ThreadPool* p) {
      std::vector<double> a = L;
      invert_lower(a.data(), n, p);
      return a;
    }, "inverse");
    // The references do the maths: L Lᵀ = A and L M = I, relative to the
    // size of the terms (the ill-conditioned cases lose digits in M).
    double worst_llt = 0, worst_inv = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0, mag = 0, t = 0, tmag = 0;
        for (int64_t k = 0; k <= j; ++k) {
          s += L[static_cast<size_t>(i * n + k)] * L[static_cast<size_t>(j * n + k)];
          mag += std::fabs(L[static_cast<size_t>(i * n + k)] * L[static_cast<size_t>(j * n + k)]);
        }
        for (int64_t k = j; k <= i; ++k) {
          t += L[static_cast<size_t>(i * n + k)] * M[static_cast<size_t>(k * n + j)];
          tmag += std::fabs(L[static_cast<size_t>(i * n + k)] * M[static_cast<size_t>(k * n + j)]);
        }
        worst_llt = std::max(worst_llt, std::fabs(s - A[static_cast<size_t>(i * n + j)]) / mag);
        worst_inv = std::max(worst_inv, std::fabs(t - (i == j ? 1.0 : 0.0)) / tmag);
      }
    EXPECT_LT(worst_llt, 1e-12);
    EXPECT_LT(worst_inv, 1e-8);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) ASSERT_EQ(M[static_cast<size_t>(i * n + j)], 0.0);
  }
}

TEST(GptqLinalg, CholeskyRefusesWhatIsNotPositiveDefiniteAndKeepsTheUpperTriangle) {
  const int64_t n = 150;
  for (int64_t bad : {int64_t{0}, int64_t{70}, n - 1}) {  // first panel, later panel, last pivot
    std::vector<double> A = spd(n, 5, 0.01);
    // A negative diagonal entry: pivot `bad` cannot be positive.
    A[static_cast<size_t>(bad * n + bad)] = -1.0;
    for (Isa isa : isas())
      for (unsigned threads : {1u, 3u}) {
        detail::IsaOverride o(isa);
        ThreadPool pool(threads);
        std::vector<double> a = A;
        EXPECT_FALSE(cholesky_lower(a.data(), n, &pool)) << bad;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = i + 1; j < n; ++j) ASSERT_EQ(a[static_cast<size_t>(i * n + j)], A[static_cast<size_t>(i * n + j)]);
      }
    std::vector<double> r = A;
    EXPECT_FALSE(cholesky_lower_ref(r.data(), n));
  }
  std::vector<double> nan = spd(8, 1, 0.1);
  nan[3 * 8 + 3] = NAN;
  EXPECT_FALSE(cholesky_lower(nan.data(), 8, nullptr));
  std::vector<double> inf = spd(8, 1, 0.1);
  inf[0] = INFINITY;
  EXPECT_FALSE(cholesky_lower(inf.data(), 8, nullptr));
}

TEST(GptqLinalg, GemmSubMatchesReferenceBitwise) {
  // GPTQ's lazy update: m rows, the columns after a block, K = the block.
  for (auto [m, n, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 33, 5}, {48, 192, 128}, {50, 301, 128},
                         {13, 70, 300}, {100, 17, 64}}) {
    for (Values v : {Values::kNormal, Values::kTiny, Values::kMixed}) {
      SCOPED_TRACE(testing::Message() << m << " x " << n << " x " << K);
      Rng r(static_cast<uint64_t>(m * 7 + n * 3 + K));
      const int64_t lda = K + 3, ldb = n + 5, ldc = n + 2;  // strided, like GPTQ's
      std::vector<float> A(static_cast<size_t>(m * lda)), B(static_cast<size_t>(K * ldb)), C0(static_cast<size_t>(m * ldc));
      const double s = v == Values::kTiny ? 1e-19 : 1.0;
      for (auto& x : A) x = static_cast<float>(v == Values::kMixed ? draw(r, v) * 1e-12 : r.normal() * s);
      for (auto& x : B) x = static_cast<float>(r.normal() * s);
      for (auto& x : C0) x = static_cast<float>(r.normal());
      std::vector<float> ref = C0;
      gemm_sub_ref(m, n, K, A.data(), lda, B.data(), ldb, ref.data(), ldc);
      expect_all_equal(ref, [&](ThreadPool* p) {
        std::vector<float> c = C0;
        gemm_sub(m, n, K, A.data(), lda, B.data(), ldb, c.data(), ldc, p);
        return c;
      }, "gemm_sub");
    }
  }
}

TEST(GptqLinalg, IsaOverrideRefusesWhatTheCpuLacks) {
  if (isa_supported(Isa::kAvx512)) GTEST_SKIP() << "every ISA is available here";
  EXPECT_THROW(detail::IsaOverride(Isa::kAvx512), Error);
}

}  // namespace
}  // namespace qloom::quant::linalg
