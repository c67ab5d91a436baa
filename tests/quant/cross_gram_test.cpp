// CrossGramAccumulator (quant/cross_gram.h): bitwise what its contract says
// (one float FMA chain per element per block of 512 rows, blocks added in
// double), whatever the batching, thread count or ISA; close to the exact
// double sum; the scale 2/n.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/quant/cross_gram.h"
#include "qloom/quant/gptq_linalg_kernels.h"
#include "quant/weight_gen.h"

namespace qloom::quant {
namespace {

// The contract written out: per block, float fma chains; blocks into double.
std::vector<double> contract_ref(const std::vector<float>& a, const std::vector<float>& b, int64_t rows, int64_t n) {
  std::vector<double> sum(static_cast<size_t>(n * n), 0.0);
  for (int64_t r0 = 0; r0 < rows; r0 += CrossGramAccumulator::kBlockRows) {
    const int64_t r1 = std::min(rows, r0 + CrossGramAccumulator::kBlockRows);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float c = 0.0f;
        for (int64_t r = r0; r < r1; ++r) c = std::fma(a[static_cast<size_t>(r * n + i)], b[static_cast<size_t>(r * n + j)], c);
        sum[static_cast<size_t>(i * n + j)] += c;
      }
  }
  for (double& v : sum) v *= 2.0 / static_cast<double>(rows);
  return sum;
}

struct Data {
  int64_t rows, n;
  std::vector<float> a, b;
};

Data make(int64_t rows, int64_t n, uint64_t seed) {
  Data d{rows, n, testgen::make_weights(static_cast<uint64_t>(rows * n), testgen::Dist::kStudentT3, seed, 1.0f),
         testgen::make_weights(static_cast<uint64_t>(rows * n), testgen::Dist::kGaussian, seed + 1, 3.0f)};
  return d;
}

TEST(CrossGramAccumulator, BitwiseTheContractWhateverTheBatchingThreadsAndIsa) {
  const Data d = make(1300, 67, 5);  // two whole blocks and a partial one; odd width
  const std::vector<double> ref = contract_ref(d.a, d.b, d.rows, d.n);
  std::vector<Isa> isas{Isa::kScalar};
  if (isa_supported(Isa::kAvx2)) isas.push_back(Isa::kAvx2);
  if (isa_supported(Isa::kAvx512)) isas.push_back(Isa::kAvx512);
  for (Isa isa : isas)
    for (unsigned threads : {1u, 3u})
      for (int64_t batch : {1300, 511, 97, 1}) {
        SCOPED_TRACE(testing::Message() << isa_name(isa) << " threads " << threads << " batch " << batch);
        linalg::detail::IsaOverride over(isa);
        ThreadPool pool(threads);
        CrossGramAccumulator acc(d.n);
        for (int64_t r = 0; r < d.rows; r += batch) {
          const int64_t k = std::min(batch, d.rows - r);
          acc.add(d.a.data() + r * d.n, d.b.data() + r * d.n, k, &pool);
        }
        EXPECT_EQ(acc.tokens(), static_cast<uint64_t>(d.rows));
        const std::vector<double> got = acc.take();
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(double)));
        EXPECT_EQ(acc.tokens(), 0u);
      }
}

TEST(CrossGramAccumulator, CloseToTheExactSumAndNotSymmetric) {
  const Data d = make(700, 40, 9);
  CrossGramAccumulator acc(d.n);
  acc.add(d.a.data(), d.b.data(), d.rows);
  const std::vector<double> got = acc.take();
  double worst = 0;
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      double exact = 0, mag = 0;
      for (int64_t r = 0; r < d.rows; ++r) {
        const double p = static_cast<double>(d.a[static_cast<size_t>(r * d.n + i)]) * d.b[static_cast<size_t>(r * d.n + j)];
        exact += p, mag += std::fabs(p);
      }
      exact *= 2.0 / d.rows, mag *= 2.0 / d.rows;
      worst = std::max(worst, std::fabs(got[static_cast<size_t>(i * d.n + j)] - exact) / mag);
    }
  EXPECT_LT(worst, 1e-5);  // float chains of <= 512 terms
  EXPECT_NE(got[1], got[static_cast<size_t>(d.n)]);
}

TEST(CrossGramAccumulator, EmptyAndAdversarial) {
  CrossGramAccumulator empty(5);
  EXPECT_EQ(empty.take(), std::vector<double>(25, 0.0));
  // Zeros, huge values and a NaN row: the NaN reaches only the entries of its
  // columns (the caller's problem, as for the Hessian), the rest stays exact.
  std::vector<float> a = {0, 0, 1e30f, 0, 2, 0}, b = {0, 1, 1e-30f, 0, 3, 0};
  CrossGramAccumulator acc(3);
  acc.add(a.data(), b.data(), 2);
  std::vector<double> c = acc.take();
  EXPECT_DOUBLE_EQ(c[0 * 3 + 1], 0.0);
  EXPECT_DOUBLE_EQ(c[2 * 3 + 2], 2.0 / 2 * static_cast<double>(1e30f * 1e-30f));
  EXPECT_DOUBLE_EQ(c[1 * 3 + 1], 2.0 / 2 * 6.0);
  a[0] = std::numeric_limits<float>::quiet_NaN();
  acc.add(a.data(), b.data(), 2);
  c = acc.take();
  EXPECT_TRUE(std::isnan(c[0 * 3 + 1]));
  EXPECT_DOUBLE_EQ(c[1 * 3 + 1], 6.0);
}

}  // namespace
}  // namespace qloom::quant
