// CrossGramAccumulator: 2/n Σ a bᵀ over paired rows of two streams (the
// cross term of GPTAQ and Qronos: a = the float model's input of a linear,
// or its difference from the quantized model's, b = the quantized model's
// input, row t of both from the same token), as HessianAccumulator
// (gptq.h) accumulates 2/n Σ x xᵀ:
//   the row stream (however add() splits it) is cut into blocks of
//   kBlockRows rows; each block's Σ is one float FMA chain per element over
//   its rows in order (linalg::gemm_sub on the negated, transposed block of
//   a: fixed reduction order, bitwise the same for every thread count and
//   ISA), added in block order to a double total.
// C[i, j] = 2/n Σ_t a_t[i] b_t[j], [cols, cols] row-major (not symmetric).
#pragma once

#include <cstdint>
#include <vector>

#include "qloom/core/thread_pool.h"

namespace qloom::quant {

class CrossGramAccumulator {
 public:
  static constexpr int64_t kBlockRows = 512;
  explicit CrossGramAccumulator(int64_t cols);
  // a, b [rows, cols] row-major, row t of a paired with row t of b. The
  // last add()'s pool also sums the open block in take(): it must outlive it.
  void add(const float* a, const float* b, int64_t rows, ThreadPool* pool = nullptr);
  int64_t cols() const { return cols_; }
  uint64_t tokens() const { return n_; }
  // 2/n Σ a bᵀ (all zero when n == 0); the accumulator is empty afterwards.
  std::vector<double> take();

 private:
  void add_block(const float* a, const float* b, int64_t rows, ThreadPool* pool);
  void flush(ThreadPool* pool);

  int64_t cols_;
  uint64_t n_ = 0;
  std::vector<double> sum_;
  std::vector<float> open_a_, open_b_;  // rows of the block not yet summed
  int64_t open_rows_ = 0;
  std::vector<float> at_, block_;       // scratch: -aᵀ of a block, one block's Σ
  ThreadPool* last_pool_ = nullptr;
};

}  // namespace qloom::quant
