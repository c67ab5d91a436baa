// Native quantized linear layers: the engine running a quantized checkpoint's
// linears with low-precision kernels instead of dequantized fp32 weights and
// simulated activation quantization (the "simulate" runtime).
//
// A QuantLinearData says what the checkpoint holds for one linear, in the
// layout-neutral form of quant::QuantizedTensor (one code per element of the
// [out, in] weight, scales per tensor / channel / group, zero points) plus how
// its input activations are quantized. make_quant_linear() re-lays it out for
// the kernel family of its format (engine/native/*_linear.*) and returns a
// QuantLinear that run()s y[rows, out] = x[rows, in] · Wᵀ (+ bias) with:
//   int8 W, int8 A (static per-tensor / dynamic per-token): integer dot
//     products (VNNI vpdpbusd where the CPU has it), int32 accumulation, the
//     scales applied once per output: y = s_x · s_w[o] · Σ q_x q_w (+ bias);
//   fp8 W, fp8 A (static per-tensor / dynamic per-token), and bf16 W with A
//     rounded to bf16 (--compute bf16): both operands exactly as bf16,
//     vdpbf16ps with fp32 accumulation, scales applied once per output;
//   int4 / uint4 (group 32/64/128, per-channel) and mxfp4 weight-only: codes
//     stay packed, dequantized in registers (w = (q - z) · s, or fp4 · 2^e)
//     exactly as quant::dequantize computes them, fp32 activations, fp32 FMA.
// The activation codes are computed exactly as quant::fake_quantize_activation
// computes them (each family's tests/engine/native_*_test.cpp holds it to that), so
// native and simulate differ only in summation order and where the scales
// are multiplied in.
//
// Every family has run_ref(): a plain scalar reference with the same
// arithmetic (same codes, same per-output scaling; integer sums exact), which
// tests compare run() against under every QLOOM_MAX_ISA cap. run() gives the
// same bits for any thread count, and (integer families) for every ISA.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qloom/core/thread_pool.h"

namespace qloom::engine {

enum class QWeightFormat : uint8_t {
  kInt8,     // signed int8 codes, symmetric
  kFp8E4M3,  // OCP fp8 e4m3fn bit patterns
  kInt4,     // signed int4 in [-8, 7] (one sign-extended code per byte in `codes`)
  kUInt4,    // unsigned int4 in [0, 15] with zero points
  kMxfp4,    // OCP fp4 e2m1 bit patterns (low 4 bits), E8M0 scale per 32 along `in`
  kBf16,     // raw bf16 bits (codes holds 2 bytes per element, little-endian)
};

enum class QActFormat : uint8_t {
  kF32,           // activations stay fp32 (weight-only formats)
  kBf16,          // rounded to bf16, RNE (--compute bf16)
  kInt8PerTensor, // static: q = clamp(nearbyint(x · (1/act_scale)), -128, 127)
  kInt8PerToken,  // dynamic, one symmetric scale per row (Quark per_channel, ch_axis 1)
  kFp8PerTensor,  // static: q = e4m3(clamp(x / act_scale, ±448))
  kFp8PerToken,   // dynamic, one scale per row: amax / 448 (ptpc_fp8)
};

const char* qweight_format_name(QWeightFormat f);
const char* qact_format_name(QActFormat f);

struct QuantLinearData {
  QWeightFormat weight = QWeightFormat::kInt8;
  QActFormat act = QActFormat::kF32;
  int64_t out = 0, in = 0;
  // Elements of one scale along `in`: 0 = one scale for the whole tensor
  // (scales.size() == 1), `in` = per output channel, else the group size
  // (32 for mxfp4; `in` must be a multiple of it).
  int64_t group = 0;
  // One code per element, row-major [out, in], as quant::QuantizedTensor::codes
  // (kBf16: 2 bytes per element).
  std::vector<uint8_t> codes;
  // Dequantization scales [out, in / group] (or [1]); E8M0 scales as the
  // power-of-two floats they are. Unused for kBf16.
  std::vector<float> scales;
  // kUInt4 only: zero points, same layout as scales; w = (q - z) · s.
  std::vector<int32_t> zero_points;
  float act_scale = 0.0f;  // kInt8PerTensor / kFp8PerTensor: the checkpoint's input_scale
  std::string name;        // the linear's module name, for errors
};

class QuantLinear {
 public:
  virtual ~QuantLinear() = default;
  virtual QWeightFormat weight_format() const = 0;
  virtual QActFormat act_format() const = 0;
  virtual int64_t out() const = 0;
  virtual int64_t in() const = 0;
  // y[rows, out] = x[rows, in]·Wᵀ (+ bias when non-null, `out` values),
  // overwriting y; parallel over output tiles on `pool`. Thread-safe for
  // distinct y. No heap allocation per call once warm (per-thread scratch).
  virtual void run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const = 0;
  // The scalar reference of the same arithmetic (single-threaded).
  virtual void run_ref(const float* x, int64_t rows, const float* bias, float* y) const = 0;
  // W as fp32 [out, in] (what quant::dequantize gives): for tests and for
  // callers that need the values.
  virtual std::vector<float> dequantize() const = 0;
  // Bytes held (codes, scales, packed panels).
  virtual size_t bytes() const = 0;
  // Which kernel run() takes on this CPU (under QLOOM_MAX_ISA), e.g. "avx512-vnni".
  virtual const char* kernel_name() const = 0;
};

// True when a native kernel exists for this (weight, act, group) combination.
bool quant_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in);

// Validates `data` (sizes, code ranges, finite positive scales; throws
// qloom::Error kInvalidInput naming data.name) and builds the kernel's form.
// Throws kUnsupported when quant_linear_supported() is false.
std::shared_ptr<const QuantLinear> make_quant_linear(QuantLinearData data);

}  // namespace qloom::engine
