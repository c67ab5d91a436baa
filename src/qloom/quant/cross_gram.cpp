#include "qloom/quant/cross_gram.h"

#include <algorithm>

#include "qloom/quant/gptq_linalg.h"

namespace qloom::quant {

CrossGramAccumulator::CrossGramAccumulator(int64_t cols)
    : cols_(cols), sum_(static_cast<size_t>(cols * cols), 0.0) {}

void CrossGramAccumulator::add(const float* a, const float* b, int64_t rows, ThreadPool* pool) {
  if (rows <= 0) return;
  const int64_t n = cols_;
  if (sum_.empty()) sum_.assign(static_cast<size_t>(n * n), 0.0);  // after take()
  last_pool_ = pool;
  n_ += static_cast<uint64_t>(rows);
  while (rows > 0) {
    const int64_t take = std::min(rows, kBlockRows - open_rows_);
    if (take == kBlockRows) {
      add_block(a, b, take, pool);
    } else {
      open_a_.resize(static_cast<size_t>(kBlockRows * n));
      open_b_.resize(static_cast<size_t>(kBlockRows * n));
      std::copy(a, a + take * n, open_a_.begin() + open_rows_ * n);
      std::copy(b, b + take * n, open_b_.begin() + open_rows_ * n);
      open_rows_ += take;
      if (open_rows_ == kBlockRows) flush(pool);
    }
    a += take * n;
    b += take * n;
    rows -= take;
  }
}

// block[i, j] = fma chain over r of a[r, i] · b[r, j] from +0: gemm_sub's
// chain of -(-a[r, i]) · b[r, j] (the negation is exact).
void CrossGramAccumulator::add_block(const float* a, const float* b, int64_t rows, ThreadPool* pool) {
  const int64_t n = cols_;
  at_.resize(static_cast<size_t>(n * rows));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) at_[static_cast<size_t>(i * rows + r)] = -a[r * n + i];
  block_.assign(static_cast<size_t>(n * n), 0.0f);
  linalg::gemm_sub(n, n, rows, at_.data(), rows, b, n, block_.data(), n, pool);
  for (size_t k = 0; k < sum_.size(); ++k) sum_[k] += block_[k];
}

void CrossGramAccumulator::flush(ThreadPool* pool) {
  if (open_rows_ == 0) return;
  add_block(open_a_.data(), open_b_.data(), open_rows_, pool);
  open_rows_ = 0;
}

std::vector<double> CrossGramAccumulator::take() {
  const int64_t n = cols_;
  flush(last_pool_);
  for (auto* v : {&open_a_, &open_b_, &at_, &block_}) std::vector<float>().swap(*v);
  std::vector<double> c;
  c.swap(sum_);
  c.resize(static_cast<size_t>(n * n), 0.0);
  const double f = n_ ? 2.0 / static_cast<double>(n_) : 0.0;
  for (double& v : c) v *= f;
  n_ = 0;
  return c;
}

}  // namespace qloom::quant
