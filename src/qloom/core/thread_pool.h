// ThreadPool: a fixed set of worker threads for data-parallel loops
// (attention heads, rows of an element-wise op, GEMM column blocks).
// parallel_for splits [0, n) into contiguous chunks, runs them on the
// workers and the calling thread, and returns when all are done; exceptions
// thrown by the body are rethrown on the caller (the first one).
// One parallel_for at a time per pool (calls from inside a body run inline).
// Workers run each chunk under the caller's floating-point environment
// (rounding mode, flush-to-zero / denormals-are-zero), so which thread runs
// a chunk never changes its result.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace qloom {

class ThreadPool {
 public:
  // threads = 0: std::thread::hardware_concurrency(). threads = 1 runs
  // everything on the calling thread.
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const;  // threads including the caller

  // body(begin, end) over chunks covering [0, n); at most size() chunks, each
  // at least min_chunk items (the last may be shorter).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body,
                    int64_t min_chunk = 1);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom
