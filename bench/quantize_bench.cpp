// Weight quantization throughput: the scalar reference against the optimized
// quantizer (1 thread and all hardware threads) for fp8, int4_wo_128,
// uint4_wo_128 and mxfp4 on a 4096 x 4096 bf16-valued matrix, plus the fast
// dequantizer. Reports elements/s (items_per_second).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "qloom/core/float_codec.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"

namespace {

using namespace qloom;
using namespace qloom::quant;

constexpr uint64_t kRows = 4096, kCols = 4096;

const std::vector<float>& weights() {
  static const std::vector<float> w = [] {
    std::vector<float> v(kRows * kCols);
    uint64_t s = 12345;
    for (auto& x : v) {
      // splitmix64 -> Box-Muller, scaled like LLM weights, on the bf16 grid.
      auto next = [&] {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return ((z ^ (z >> 31)) >> 11) * 0x1.0p-53 + 0x1.0p-54;
      };
      const double g = std::sqrt(-2.0 * std::log(next())) * std::cos(6.283185307179586 * next());
      x = bf16_to_float(float_to_bf16(static_cast<float>(0.02 * g)));
    }
    return v;
  }();
  return w;
}

DType scale_dtype(const QuantSpec& spec) {
  const DType d = quark_scale_dtype(spec, DType::kBF16);
  return d == DType::kE8M0 ? DType::kF32 : d;
}

void BM_Ref(benchmark::State& state, const char* scheme) {
  const QuantSpec spec = *get_scheme(scheme).linear.weight;
  const auto& w = weights();
  for (auto _ : state) {
    auto t = quantize_weight_ref(w.data(), kRows, kCols, spec, scale_dtype(spec), scheme, DType::kBF16);
    benchmark::DoNotOptimize(t.codes.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRows * kCols));
}

void BM_Fast(benchmark::State& state, const char* scheme) {
  const QuantSpec spec = *get_scheme(scheme).linear.weight;
  const auto& w = weights();
  const unsigned threads = static_cast<unsigned>(state.range(0));
  for (auto _ : state) {
    auto t = quantize_weight(w.data(), kRows, kCols, spec, scale_dtype(spec), scheme, DType::kBF16, threads);
    benchmark::DoNotOptimize(t.codes.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRows * kCols));
}

void BM_Dequantize(benchmark::State& state, const char* scheme) {
  const QuantSpec spec = *get_scheme(scheme).linear.weight;
  const auto& w = weights();
  const auto t = quantize_weight(w.data(), kRows, kCols, spec, scale_dtype(spec), scheme, DType::kBF16);
  std::vector<float> out(kRows * kCols);
  const unsigned threads = static_cast<unsigned>(state.range(0));
  for (auto _ : state) {
    dequantize(t, out.data(), threads);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRows * kCols));
}

// range(0) = threads: 1, or 0 = all hardware threads.
#define QLOOM_QUANT_BENCHES(name, scheme)                                                      \
  BENCHMARK_CAPTURE(BM_Ref, name, scheme)->Unit(benchmark::kMillisecond)->UseRealTime();        \
  BENCHMARK_CAPTURE(BM_Fast, name, scheme)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_Dequantize, name, scheme)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

QLOOM_QUANT_BENCHES(fp8, "fp8")
QLOOM_QUANT_BENCHES(int4_wo_128, "int4_wo_128")
QLOOM_QUANT_BENCHES(uint4_wo_128, "uint4_wo_128")
QLOOM_QUANT_BENCHES(mxfp4, "mxfp4")

}  // namespace
