// Internals of the bf16 dot-product family (bf16dot_linear.h): the data the
// kernels share, the canonical arithmetic every path reproduces bit for bit,
// and the kernel entry points per ISA.
//
// The canonical arithmetic (what vdpbf16ps does, per the Intel SDM, measured
// bit-exact on the dev machine: tests/engine/native_bf16dot_test.cpp):
//   acc = +0
//   for p = 0 .. pairs-1:                       (pairs = ceil(in / 2); the pad
//     acc = dp_fma(x[2p+1], w[2p+1], acc)        element of an odd `in` is +0
//     acc = dp_fma(x[2p],   w[2p],   acc)        in both operands)
//   y = fma(acc, s_x[r] * s_w[o], bias[o])      (acc * (s_x * s_w) without bias)
//   y = canonical quiet NaN (0x7FC00000) if y is NaN
// where dp_fma is an fp32 fused multiply-add with round to nearest even,
// denormal inputs read as zero (DAZ: bf16 denormals contribute nothing) and
// tiny results flushed to a zero of their sign (FTZ, tininess detected after
// rounding, as x86 does). Each output is one sequential chain over k, so the
// register tiling (rows x outputs) and the thread split never change a bit.
// The epilogue runs in the IEEE default environment (no FTZ / DAZ). NaN
// payloads are the one thing ISAs would pick differently (which NaN operand
// an FMA propagates), hence the canonical NaN.
#pragma once

#include <cstdint>

#include "qloom/core/fp_env.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace qloom::engine::native::bf16dot {

constexpr int kPanel = 16;  // outputs per W panel (one zmm of fp32 accumulators)

// Everything a kernel call reads and writes.
//  w:   bf16 W packed in panels of 16 outputs: dword (q * pairs + p) * 16 + j
//       holds w[16q + j][2p] (low half) and w[16q + j][2p + 1] (high half);
//       outputs past `out` and the pad of an odd `in` are +0.
//  w8:  instead of w, fp8 e4m3 W in the same layout with bytes for halves
//       (byte 2 * ((q * pairs + p) * 16 + j) + h), widened to bf16 in
//       registers (fp8_bf16 below; exact): half the bytes to stream. Never a
//       NaN code: make() stores 0 there and NaN as the output's sw, which
//       gives the same (canonical NaN) outputs without a NaN test per weight.
//  xq:  the activation codes, bf16, row r at xq + r * 2 * pairs (an odd
//       `in` padded with +0).
//  sx:  one scale per row; sw: one per output (panels * 16 values).
struct Args {
  const uint32_t* w = nullptr;
  const uint8_t* w8 = nullptr;
  int64_t pairs = 0;
  const uint16_t* xq = nullptr;
  int64_t rows = 0;
  const float* sx = nullptr;
  const float* sw = nullptr;
  const float* bias = nullptr;  // null or `out` values
  float* y = nullptr;           // [rows, out]
  int64_t out = 0;
};

// Kernels over panels [q0, q1) for every row. The ISA kernels exist only on
// x86-64 builds; callers check *_kernel_built() and the CPU first.
bool avx512bf16_kernel_built();
bool avx2_kernel_built();
void run_avx512bf16(const Args& a, int64_t q0, int64_t q1);
void run_avx2(const Args& a, int64_t q0, int64_t q1);
void run_scalar(const Args& a, int64_t q0, int64_t q1);

// The bf16 pattern of each e4m3 code's value (NaN codes -> +-0x7FC0).
const uint16_t* fp8_bf16();
// The W pair dword of output o, pair p (from w or w8).
uint32_t w_pair(const Args& a, int64_t o, int64_t p);

// The canonical operations in plain C++ (the reference; run_scalar uses them).
float dp_fma(float a, float b, float acc);
float dot_ref(const Args& a, int64_t row, int64_t o);
float epilogue_ref(float acc, float sx, float sw, const float* bias, int64_t o);

// The IEEE default environment (round to nearest even, no FTZ / DAZ) for its
// lifetime: the activation quantizers and epilogues must not see a caller's
// flush-to-zero (core/fp_env.h).
using IeeeEnv = IeeeFpEnv;

}  // namespace qloom::engine::native::bf16dot
