// Explicit choice of linear()'s implementation, for tests and benchmarks.
// linear() itself is linear_path(GemmPath::kAuto, ...): it picks, per shape
// class and weight type, the path measured fastest (figures in gemm.cpp).
//
// Every path computes the full contract of gemm.h for any shape (rows >= 0,
// in >= 0, out >= 0), so tests can run each one on every shape:
//   kScalar      portable C++ with std::fma, in the canonical order below
//   kAvx2Gemv    qloom's AVX2 GEMV kernel (W streamed, up to 4 rows a pass)
//   kAvx2Gemm    qloom's AVX2 packed GEMM (6x16 tiles)
//   kAvx512Gemv  qloom's AVX-512 GEMV kernel
//   kAvx512Gemm  qloom's AVX-512 packed GEMM (12x32 tiles)
//   kBlas        OpenBLAS sgemm, single-threaded per column block
// Canonical order (determinism across ISA caps): below 128 rows (the GEMV
// side of kAuto's split) every y element is bias + a fixed tree over 16
// partial FMA chains (lane l takes k = l mod 16); from 128 rows on (the GEMM
// side) it is one FMA chain over k in order, starting from the bias. The
// AVX2 and AVX-512 kernels and kScalar implement exactly these, so kAuto
// gives the same bits under QLOOM_MAX_ISA=scalar|avx2|avx512 and any thread
// count (tests/engine/gemm_test.cpp, GemmTest.BitwiseAcrossIsasAndThreads).
// kBlas (OpenBLAS) has its own order and is never picked by kAuto.
// Paths needing an ISA the CPU lacks (or that QLOOM_MAX_ISA caps away, see
// convert.h) are unavailable; linear_path throws Error(kUnsupported) for them.
// kAuto picks only qloom's own kernels (OpenBLAS measured no faster, see
// gemm.cpp), so QLOOM_MAX_ISA=avx2|scalar makes linear() use exactly that ISA.
#pragma once

#include <cstdint>

#include "qloom/engine/gemm.h"

namespace qloom::engine {

enum class GemmPath { kAuto, kScalar, kAvx2Gemv, kAvx2Gemm, kAvx512Gemv, kAvx512Gemm, kBlas };

const char* gemm_path_name(GemmPath path);
bool gemm_path_available(GemmPath path);
// The concrete path kAuto takes for this shape class and weight type.
GemmPath gemm_auto_path(int64_t rows, int64_t in, int64_t out, WeightType type);

void linear_path(GemmPath path, const float* x, int64_t rows, const LinearWeight& w, float* y,
                 ThreadPool& pool);

}  // namespace qloom::engine
