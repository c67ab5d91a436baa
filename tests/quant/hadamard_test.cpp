// quant/hadamard: Quark's Hadamard sizes and matrices, and the fast
// transform against the dense reference on random and adversarial rows.
// Tolerance: |fast - ref| <= 1e-12 * (|x|_1 / sqrt(n) + 1e-300) per element
// (both compute in double; they differ by summation order only).
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/quant/hadamard.h"
#include "quant/weight_gen.h"

namespace qloom::quant {
namespace {

TEST(Hadamard, SizesFollowQuarksSearchOrder) {
  struct Case { int64_t n, k, m; };
  for (const Case c : {Case{1, 1, 1}, {64, 1, 64}, {576, 36, 16}, {1536, 12, 128}, {960, 60, 16}, {3584, 28, 128},
                       {5120, 40, 128}, {3072, 12, 256}, {12, 12, 1}, {140 * 4, 140, 4}, {108, 108, 1}}) {
    const HadamardSize s = hadamard_size(c.n);
    EXPECT_EQ(s.k, c.k) << c.n;
    EXPECT_EQ(s.m, c.m) << c.n;
  }
  // Williamson orders Quark picks first (52, 156, 172): refused, named.
  for (int64_t n : {52, 208, 172 * 64, 156}) EXPECT_THROW(hadamard_size(n), Error) << n;
  for (int64_t n : {100, 7, 44}) EXPECT_THROW(hadamard_size(n), Error) << n;
  EXPECT_THROW(hadamard_size(0), Error);
}

TEST(Hadamard, MatricesAreHadamard) {
  for (int64_t k : {1, 2, 16, 12, 20, 28, 36, 40, 60, 108, 140}) {
    const std::vector<int8_t> h = hadamard_k(k);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        int64_t dot = 0;
        for (int64_t c = 0; c < k; ++c) dot += h[size_t(i * k + c)] * h[size_t(j * k + c)];
        ASSERT_EQ(dot, i == j ? k : 0) << "order " << k << " rows " << i << "," << j;
      }
  }
}

// sha256 of each matrix as int8 bytes, from Quark itself
// (scripts/goldens/rotation_quark.py): qloom's constructions are Quark's
// matrices element for element.
TEST(Hadamard, MatricesEqualQuarks) {
  std::ifstream in(std::string(QLOOM_TEST_DATA_DIR) + "/rotation/quark_hadamard.json");
  ASSERT_TRUE(in) << "missing tests/data/rotation/quark_hadamard.json";
  const nlohmann::json g = nlohmann::json::parse(in);
  ASSERT_GE(g["known"].size(), 8u);
  for (const auto& [k, sha] : g["known"].items()) {
    const std::vector<int8_t> h = hadamard_k(std::stoll(k));
    EXPECT_EQ(job::sha256_hex(std::string(reinterpret_cast<const char*>(h.data()), h.size())), sha) << "order " << k;
  }
  for (const auto& [n, sha] : g["full"].items()) {
    const std::vector<int8_t> h = hadamard_matrix(std::stoll(n));
    EXPECT_EQ(job::sha256_hex(std::string(reinterpret_cast<const char*>(h.data()), h.size())), sha) << "size " << n;
  }
}

void expect_fast_equals_ref(int64_t n, const std::vector<double>& x, const char* what) {
  std::vector<double> fast = x, ref = x;
  const int64_t rows = static_cast<int64_t>(x.size()) / n;
  rotate_rows(fast.data(), rows, n);
  rotate_rows_ref(ref.data(), rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    double l1 = 0;
    for (int64_t i = 0; i < n; ++i) l1 += std::fabs(x[size_t(r * n + i)]);
    const double tol = 1e-12 * (l1 / std::sqrt(double(n)) + 1e-300);
    for (int64_t i = 0; i < n; ++i) {
      const double a = fast[size_t(r * n + i)], b = ref[size_t(r * n + i)];
      if (std::isnan(b) || std::isinf(b)) {  // adversarial rows: the same class of non-finite
        ASSERT_EQ(std::isnan(a), std::isnan(b)) << what << " n=" << n << " row " << r << " col " << i;
        if (std::isinf(b)) ASSERT_EQ(a, b) << what << " n=" << n;
        continue;
      }
      ASSERT_NEAR(a, b, tol) << what << " n=" << n << " row " << r << " col " << i;
    }
  }
}

TEST(Hadamard, FastMatchesReference) {
  testgen::Rng rng(17);
  for (int64_t n : {1, 2, 8, 64, 12, 24, 20, 28, 36, 40, 60, 108, 140, 576, 1536, 1152}) {
    std::vector<double> x(size_t(3 * n));
    for (auto& v : x) v = rng.student_t3();
    expect_fast_equals_ref(n, x, "student-t");
    for (auto& v : x) v = rng.normal() * 1e30;
    expect_fast_equals_ref(n, x, "huge");
    std::fill(x.begin(), x.end(), 0.0);
    expect_fast_equals_ref(n, x, "zeros");
  }
}

TEST(Hadamard, NonFiniteInputs) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t n : {64, 36, 576}) {
    std::vector<double> x(size_t(2 * n), 0.5);
    x[3] = inf;                                       // row 0: one inf -> +-inf everywhere
    x[size_t(n + 1)] = std::numeric_limits<double>::quiet_NaN();  // row 1: NaN everywhere
    expect_fast_equals_ref(n, x, "non-finite");
    std::vector<double> y = x;
    rotate_rows(y.data(), 2, n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(std::isinf(y[size_t(i)]));
      EXPECT_TRUE(std::isnan(y[size_t(n + i)]));
    }
  }
}

TEST(Hadamard, IsOrthogonalAndDeterministic) {
  testgen::Rng rng(5);
  for (int64_t n : {36, 576, 1536, 4096}) {
    std::vector<double> x(static_cast<size_t>(n));
    for (auto& v : x) v = rng.laplace();
    double before = 0, after = 0;
    for (double v : x) before += v * v;
    std::vector<double> y = x, z = x;
    rotate_rows(y.data(), 1, n);
    rotate_rows(z.data(), 1, n);
    for (double v : y) after += v * v;
    EXPECT_NEAR(after, before, 1e-10 * before) << n;
    EXPECT_EQ(y, z) << n;
    // R R^T = I: rotating by R^T (the transpose of kron(H_K, H_m) / sqrt(n))
    // undoes it; with the dense matrix: x = (x R) R^T.
    const std::vector<int8_t> h = hadamard_matrix(n);
    const double s = hadamard_scale(n);
    for (int64_t i = 0; i < n; i += n / 7 + 1) {
      double back = 0;
      for (int64_t c = 0; c < n; ++c) back += y[size_t(c)] * h[size_t(i * n + c)] * s;
      EXPECT_NEAR(back, x[size_t(i)], 1e-9) << n << " " << i;
    }
  }
}

}  // namespace
}  // namespace qloom::quant
