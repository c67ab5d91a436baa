// engine_bench: linear() (auto dispatch) against each explicit GemmPath
// (qloom's AVX-512 / AVX2 kernels, OpenBLAS) and the scalar linear_ref(), on
// the LLM shape classes: prefill (rows 512: 768x768, 768x2048, 2048x768,
// compute-bound) and decode (rows 1: memory/L3-bound GEMV), F32 and BF16
// weights, 2 threads (linear_ref is single-threaded). The GFLOP/s counter is
// 2·rows·in·out per call. Names: BM_linear/<path>/<f32|bf16>/rows/in/out.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/gemm_dispatch.h"

namespace {

using qloom::engine::GemmPath;
using qloom::engine::LinearWeight;
using qloom::engine::WeightType;

constexpr unsigned kThreads = 2;

LinearWeight make_weight(WeightType type, int64_t out, int64_t in) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> v(static_cast<size_t>(out * in));
  for (float& f : v) f = dist(rng);
  LinearWeight w;
  w.type = type;
  w.out = out;
  w.in = in;
  if (type == WeightType::kF32) {
    w.f32 = std::move(v);
  } else {
    w.bf16.resize(v.size());
    qloom::f32_to_bf16(v.data(), w.bf16.data(), v.size());
  }
  return w;
}

// path == nullopt-like sentinel: -1 runs linear_ref.
void run(benchmark::State& state, int path, WeightType type) {
  const int64_t rows = state.range(0), in = state.range(1), out = state.range(2);
  const LinearWeight w = make_weight(type, out, in);
  std::vector<float> x(static_cast<size_t>(rows * in)), y(static_cast<size_t>(rows * out));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& f : x) f = dist(rng);
  qloom::ThreadPool pool(kThreads);
  if (path >= 0) {
    const auto p = static_cast<GemmPath>(path);
    if (p == GemmPath::kAuto)
      state.SetLabel(std::string("auto=") + gemm_path_name(gemm_auto_path(rows, in, out, type)));
    for (auto _ : state) {
      qloom::engine::linear_path(p, x.data(), rows, w, y.data(), pool);
      benchmark::DoNotOptimize(y.data());
    }
  } else {
    for (auto _ : state) {
      qloom::engine::linear_ref(x.data(), rows, w, y.data());
      benchmark::DoNotOptimize(y.data());
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * in * out * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s_W"] = benchmark::Counter(static_cast<double>(w.bytes()) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

bool register_all() {
  const std::vector<std::vector<int64_t>> shapes = {
      {512, 768, 768}, {512, 768, 2048}, {512, 2048, 768},  // prefill
      {1, 768, 768},   {1, 768, 2048},   {1, 2048, 768},    // decode
      {4, 768, 2048},  {16, 768, 2048},  {64, 768, 2048}, {128, 768, 2048}};  // small batches
  struct P {
    int path;
    const char* name;
  };
  std::vector<P> paths = {{static_cast<int>(GemmPath::kAuto), "linear"}};
  for (GemmPath p : {GemmPath::kAvx512Gemm, GemmPath::kAvx512Gemv, GemmPath::kAvx2Gemm,
                     GemmPath::kAvx2Gemv, GemmPath::kBlas})
    if (qloom::engine::gemm_path_available(p)) paths.push_back({static_cast<int>(p), gemm_path_name(p)});
  paths.push_back({-1, "linear_ref"});
  for (const P& p : paths)
    for (WeightType t : {WeightType::kF32, WeightType::kBF16}) {
      std::string name = "BM_linear/";
      name += p.name;
      name += t == WeightType::kF32 ? "/f32" : "/bf16";
      auto* b = benchmark::RegisterBenchmark(name.c_str(), [p, t](benchmark::State& s) { run(s, p.path, t); });
      for (const auto& s : shapes) {
        if (p.path < 0 && s[0] * s[1] * s[2] > 400000000) continue;  // linear_ref: ~1 s per call
        b->Args(s);
      }
      b->ArgNames({"rows", "in", "out"})->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  return true;
}

const bool registered = register_all();

}  // namespace
