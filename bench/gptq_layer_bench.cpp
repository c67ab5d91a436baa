// GPTQ on one linear layer, phase by phase: Hessian accumulation (4096
// calibration tokens), the Cholesky factor of the damped inverse, and the
// whole gptq_quantize (int4 g128, act_order; includes the factorization),
// for in_features 2048 (a 2048 x 2048 attention projection) and 8192 (the
// 2048 x 8192 down_proj of qloom-synth's bench-4gb preset), on
// QLOOM_BENCH_THREADS threads (default 2). Seconds per call (one call: the
// 8192 case is seconds long).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "qloom/core/thread_pool.h"
#include "qloom/quant/gptq.h"

namespace {

using namespace qloom;
using namespace qloom::quant;

constexpr int64_t kTokens = 4096, kRows = 2048;

unsigned threads() {
  const char* e = std::getenv("QLOOM_BENCH_THREADS");
  return e ? static_cast<unsigned>(std::atoi(e)) : 2u;
}

std::vector<float> gaussian(size_t n, uint64_t s, double sd) {
  std::vector<float> v(n);
  auto next = [&] {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * 0x1.0p-53 + 0x1.0p-54;
  };
  for (auto& x : v) x = static_cast<float>(sd * std::sqrt(-2.0 * std::log(next())) * std::cos(6.283185307179586 * next()));
  return v;
}

std::vector<double> hessian(int64_t cols, ThreadPool& pool) {
  const std::vector<float> x = gaussian(static_cast<size_t>(kTokens * cols), 7, 1.0);
  HessianAccumulator acc(cols);
  for (int64_t t = 0; t < kTokens; t += 512) acc.add(x.data() + t * cols, 512, &pool);
  return acc.take_hessian();
}

void BM_Hessian(benchmark::State& state) {
  const int64_t cols = state.range(0);
  ThreadPool pool(threads());
  for (auto _ : state) benchmark::DoNotOptimize(hessian(cols, pool));
}

// Symmetric, diagonally dominant (positive definite) without the O(n^2 t)
// cost of a real Hessian.
std::vector<double> dominant(int64_t n) {
  const std::vector<float> r = gaussian(static_cast<size_t>(n * n), 3, 1.0);
  std::vector<double> H(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j)
      H[static_cast<size_t>(i * n + j)] = H[static_cast<size_t>(j * n + i)] =
          i == j ? 4.0 * static_cast<double>(n) : r[static_cast<size_t>(i * n + j)];
  return H;
}

void BM_CholeskyInverse(benchmark::State& state) {
  const int64_t cols = state.range(0);
  ThreadPool pool(threads());
  const std::vector<double> H = dominant(cols);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<double> h = H;
    std::vector<float> U;
    state.ResumeTiming();
    if (!detail::cholesky_inverse_upper(h, cols, 0.01, U, nullptr, &pool)) state.SkipWithError("not positive definite");
    benchmark::DoNotOptimize(U.data());
  }
}

void BM_GptqQuantize(benchmark::State& state) {
  const int64_t cols = state.range(0);
  ThreadPool pool(threads());
  const std::vector<double> H = hessian(cols, pool);
  const std::vector<float> w = gaussian(static_cast<size_t>(kRows * cols), 11, 0.02);
  QuantSpec spec;
  spec.dtype = QDtype::kInt4;
  spec.qscheme = QScheme::kPerGroup;
  spec.group_size = 128;
  spec.symmetric = true;
  for (auto _ : state) {
    GptqResult r = gptq_quantize(w.data(), kRows, static_cast<uint64_t>(cols), H, spec, DType::kBF16, "bench",
                                 DType::kBF16, {}, &pool);
    benchmark::DoNotOptimize(r.qt.codes.data());
  }
}

BENCHMARK(BM_Hessian)->Arg(2048)->Arg(4096)->Arg(8192)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_CholeskyInverse)->Arg(2048)->Arg(4096)->Arg(8192)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_GptqQuantize)->Arg(2048)->Arg(4096)->Arg(8192)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
