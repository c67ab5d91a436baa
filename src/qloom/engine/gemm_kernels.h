// Internal: the SIMD kernel sets behind linear() (gemm.cpp dispatches).
// Each set is compiled for its ISA with per-function target attributes
// (gemm_avx2.cpp, gemm_avx512.cpp share gemm_kernels.inc), so only the
// dispatcher may call it, and only after isa_supported() said yes.
//
// Both entry points compute y[r, n] = bias[n] + Σ_k x[r, k]·W[n, k] for every
// row r < rows and every column n in [n0, n1), in fp32 with fp32 FMA
// accumulation (BF16 weights are widened exactly, x is never rounded).
//   gemm: packed GEMM (MR x NR register tiles, W and x repacked per call);
//         for rows >= ~16. n0 must be a multiple of nr. `buf` holds at least
//         pack_floats(n1 - n0) floats, 64-byte aligned, private to the caller.
//   gemv: streams W rows directly (up to 4 x rows per pass); for decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "qloom/engine/gemm.h"

namespace qloom::engine::detail {

struct GemmKernelSet;
}  // namespace qloom::engine::detail

namespace qloom::engine {
// W in one kernel set's B-panel layout (gemm_kernels.inc, pack_entry): per
// k block of kc (the last shorter) every panel of nr columns (the last
// zero-padded), kc x nr floats each; block k0 starts at k0 * panels * nr.
struct PackedPanels {
  const detail::GemmKernelSet* set = nullptr;
  int64_t out = 0, in = 0;
  WeightType type = WeightType::kF32;
  const void* source = nullptr;  // w.f32 / w.bf16 data when packed (a cheap staleness check)
  std::vector<float> data;
};
}  // namespace qloom::engine

namespace qloom::engine::detail {

struct GemmKernelSet {
  const char* name;
  int64_t nr;  // columns per register tile (gemm)
  int64_t mr;  // rows per register tile (gemm)
  int64_t kc;  // depth of one packed block
  int64_t mc;  // rows of x packed at a time
  // packed: w's panels in this set's layout, or null (packed per call).
  void (*gemm)(const float* x, int64_t rows, const LinearWeight& w, int64_t n0, int64_t n1, float* y,
               float* buf, const float* packed);
  void (*gemv)(const float* x, int64_t rows, const LinearWeight& w, int64_t n0, int64_t n1, float* y);
  void (*pack)(const LinearWeight& w, float* dst);  // dst: packed_floats(w) floats
  // One k block of gemm on B panels the caller packed itself (native
  // kernels that dequantize W into this layout, engine/native/packed4_*):
  // y[r, j] = (first ? bias[j] (0 when null) : y[r, j]) + Σ_kk x[r, k0 + kk]·B[kk, j]
  // for r < rows, j < ncols, one FMA chain per element in kk order (gemm's).
  // bp: ceil(ncols / nr) panels of kc x nr floats (pack layout); x, y: row
  // strides ldx, ldy; abuf: mc * kc floats, 64-byte aligned, private.
  void (*gemm_panels)(const float* x, int64_t ldx, int64_t rows, int64_t k0, int64_t kc, const float* bp,
                      int64_t ncols, const float* bias, bool first, float* y, int64_t ldy, float* abuf);

  size_t packed_floats(const LinearWeight& w) const {
    return static_cast<size_t>((w.out + nr - 1) / nr * nr * w.in);
  }
  size_t pack_floats(int64_t ncols) const {
    const int64_t panels = (ncols + nr - 1) / nr;
    return static_cast<size_t>(mc * kc + panels * nr * kc);
  }
};

// nullptr when the build is not x86-64.
const GemmKernelSet* gemm_kernels_avx2();
const GemmKernelSet* gemm_kernels_avx512();

// OpenBLAS (gemm_blas.cpp): same contract as GemmKernelSet::gemm for the
// columns [n0, n1), single-threaded sgemm calls (the caller parallelises over
// columns). BF16 weights are widened in panels into `buf`
// (blas_pack_floats(in) floats).
void gemm_blas(const float* x, int64_t rows, const LinearWeight& w, int64_t n0, int64_t n1, float* y,
               float* buf);
size_t blas_pack_floats(int64_t in);

}  // namespace qloom::engine::detail
