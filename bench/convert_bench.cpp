// convert_bench: throughput of the bulk conversions in convert.h, scalar
// reference path vs the best SIMD path this CPU has, on 1M elements (4 MiB of
// f32, L2/L3-resident on big server parts, so this measures the kernels rather
// than DRAM). bytes_per_second counts bytes read plus bytes written.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "qloom/core/convert.h"

namespace {

constexpr size_t kN = size_t{1} << 20;

// Realistic weights: roughly normal values, a few large outliers.
std::vector<float> sample_floats() {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = (i % 997 == 0) ? dist(rng) * 1000.0f : dist(rng);
  return v;
}

void set_isa(benchmark::State& state, qloom::Isa& isa) {
  isa = state.range(0) == 0 ? qloom::Isa::kScalar : qloom::best_isa();
  state.SetLabel(qloom::isa_name(isa));
}

void BM_bf16_to_f32(benchmark::State& state) {
  qloom::Isa isa;
  set_isa(state, isa);
  const std::vector<float> f = sample_floats();
  std::vector<uint16_t> in(kN);
  qloom::f32_to_bf16(qloom::Isa::kScalar, f.data(), in.data(), kN);
  std::vector<float> out(kN);
  for (auto _ : state) {
    qloom::bf16_to_f32(isa, in.data(), out.data(), kN);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kN * (2 + 4));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kN);
}

void BM_f32_to_bf16(benchmark::State& state) {
  qloom::Isa isa;
  set_isa(state, isa);
  const std::vector<float> in = sample_floats();
  std::vector<uint16_t> out(kN);
  for (auto _ : state) {
    qloom::f32_to_bf16(isa, in.data(), out.data(), kN);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kN * (4 + 2));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kN);
}

void BM_f32_to_fp8_e4m3(benchmark::State& state) {
  qloom::Isa isa;
  set_isa(state, isa);
  std::vector<float> in = sample_floats();
  for (float& x : in) x *= 448.0f / 20.0f;  // spread over e4m3's range, some saturating
  std::vector<uint8_t> out(kN);
  for (auto _ : state) {
    qloom::f32_to_fp8_e4m3(isa, in.data(), out.data(), kN);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kN * (4 + 1));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kN);
}

// Arg 0 = scalar reference, 1 = best_isa().
BENCHMARK(BM_bf16_to_f32)->Arg(0)->Arg(1);
BENCHMARK(BM_f32_to_bf16)->Arg(0)->Arg(1);
BENCHMARK(BM_f32_to_fp8_e4m3)->Arg(0)->Arg(1);

}  // namespace
