// ThreadPool (core/thread_pool.h): every chunk runs under the caller's
// floating-point environment, so a result never depends on which thread (or
// how many) computed it: with flush-to-zero / denormals-are-zero or a
// non-default rounding mode set by the caller, workers compute exactly what a
// one-thread pool computes.
#include <gtest/gtest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "qloom/core/thread_pool.h"

namespace qloom {
namespace {

// Element-wise ops whose results depend on FTZ/DAZ and the rounding mode.
std::vector<float> compute(ThreadPool& pool) {
  const int64_t n = 4096;
  std::vector<float> out(static_cast<size_t>(n));
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      volatile float tiny = 1e-39f * static_cast<float>(i % 7 + 1);  // denormal
      volatile float third = 1.0f / static_cast<float>(i % 5 + 3);
      out[static_cast<size_t>(i)] = tiny * 0.75f + third * 1.0000001f;
    }
  }, 64);
  return out;
}

TEST(ThreadPool, WorkersRunUnderTheCallersFpEnvironment) {
  std::fenv_t saved;
  std::fegetenv(&saved);
  ThreadPool one(1), three(3);  // workers created under the default environment
  const std::vector<float> plain = compute(one);
#if defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ | DAZ
#endif
  std::fesetround(FE_UPWARD);
  const std::vector<float> want = compute(one);
  const std::vector<float> got = compute(three);
  std::fesetenv(&saved);
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(want.data(), plain.data(), want.size() * sizeof(float)));  // the env mattered
  EXPECT_EQ(0, std::memcmp(compute(three).data(), plain.data(), plain.size() * sizeof(float)));  // and is undone
}

}  // namespace
}  // namespace qloom

namespace qloom {
namespace {

// Back-to-back jobs (the polling path: workers never block between them) and
// jobs after the workers blocked (a pause longer than the poll): every index
// is covered exactly once, every time.
TEST(ThreadPool, BackToBackAndAfterIdleJobsCoverEveryIndexOnce) {
  for (unsigned threads : {2u, 3u}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    for (int round = 0; round < 2000; ++round) {
      if (round % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const int64_t n = 1 + round % 997;
      for (int64_t i = 0; i < n; ++i) hits[size_t(i)].store(0);
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "round " << round << " index " << i;
    }
  }
}

TEST(ThreadPool, ExceptionsReachTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100, [](int64_t b, int64_t) {
    if (b > 0) throw std::runtime_error("chunk failed");
  }), std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

}  // namespace
}  // namespace qloom
