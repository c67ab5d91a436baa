// Linear layers of the engine: y[rows, out] = x[rows, in] · Wᵀ (+ bias),
// W stored [out, in] row-major (the HF layout) as F32 or BF16, fp32
// accumulation. linear() is the optimized path (dispatched to OpenBLAS or
// qloom's own kernels, whichever measures faster for the shape class);
// linear_ref() is the plain scalar reference it is tested against
// (tests/engine/gemm_test.cpp, tolerance stated there).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "qloom/core/thread_pool.h"

namespace qloom::engine {

enum class WeightType { kF32, kBF16 };

// W re-laid out for the packed GEMM kernels of this CPU (prepack below).
struct PackedPanels;
// A linear running on a native quantized kernel (native/qlinear.h).
class QuantLinear;

struct LinearWeight {
  WeightType type = WeightType::kF32;
  int64_t out = 0;  // rows of W
  int64_t in = 0;   // columns of W
  std::vector<float> f32;      // out*in when type == kF32
  std::vector<uint16_t> bf16;  // out*in when type == kBF16 (raw bf16 bits)
  std::vector<float> bias;     // empty, or out values
  // Optional: W in the packed GEMM's panel layout (prepack()), so calls of
  // >= 128 rows skip re-packing W each time; the same bits either way.
  // Whoever changes f32 / bf16 / out / in must reset it (a copy shares it).
  std::shared_ptr<const PackedPanels> packed;
  // Set when the linear runs on a native quantized kernel (--runtime native,
  // --compute bf16): f32 / bf16 are then empty, out / in still hold the shape,
  // and linear() / linear_ref() call native->run() / run_ref() (bias added there).
  std::shared_ptr<const QuantLinear> native;

  // W[r, c] as float (slow; for tests and references).
  float at(int64_t r, int64_t c) const;
  // All of W as floats, row-major [out, in] (BF16 widened exactly).
  std::vector<float> values_f32() const;
  size_t bytes() const;
};

// x: rows*w.in floats, y: rows*w.out floats (overwritten). Thread-safe for
// distinct y; uses `pool` for parallelism.
void linear(const float* x, int64_t rows, const LinearWeight& w, float* y, ThreadPool& pool);
void linear_ref(const float* x, int64_t rows, const LinearWeight& w, float* y);

// Sets w.packed for the packed GEMM kernel linear() uses on this CPU (under
// QLOOM_MAX_ISA); a no-op without one (scalar) or for an empty W. For a
// weight used in many calls of >= 128 rows (a search that re-runs a layer).
void prepack(LinearWeight& w);

}  // namespace qloom::engine
