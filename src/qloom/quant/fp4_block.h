// FP4 (e2m1) block quantization whose group scales are not OCP MX e8m0
// exponents: the amd-quark 0.13 schemes
//   amdfp4, amdfp4_g32      AmdFP4Spec: one e5m3 scale per 16 / 32 inputs
//   nvfp4 (alias fp4_block16_scale_e4m3), amdfp4_global16/32
//                           ScaleQuantSpec(FP4PerGroupSpec(G, "float32"),
//                           FP8E4M3 / FP8E5M3 PerTensorSpec is_scale_quant):
//                           f32 group scales quantized to fp8 e4m3 / e5m3
//                           relative to a per-tensor f32 global scale.
// This file is the REFERENCE (it defines the bytes qloom exports); the
// _fast functions (fp4_block_fast.cpp) must give the same result bit for bit.
//
// Every rule was read in Quark 0.13 and checked against Quark itself (the
// bundled demo model quantized by LLMTemplate + ModelQuantizer +
// export_safetensors in bf16: every weight code and scale byte equal, see
// tests/quant/fp4_block_test.cpp). Files:
//   O  quark/torch/quantization/observer/observer.py (PerBlockMXObserver,
//      ObserverBase.get_scale "e5m3" / "float32", calculate_fp8_quant_parameters)
//   T  quark/torch/quantization/tensor_quantize.py (SequentialQuantize:
//      quant_max_first_level = 6, the global stage observes the group amax)
//   P  quark/torch/quantization/post_calibration.py
//      (realign_single_sequential_quantizer)
//   K  quark/torch/kernel/hw_emulation/hw_emulation_interface.py
//      (real_quantize_fp4_fp6_per_group), quark/torch/kernel/float8_e5m3
//
// Notation: amax_g = max |w| over a group (exact: the weights are values of
// the model dtype C), rC() rounds to C (bf16 / f16 / identity for f32).
//  amdfp4 (O "e5m3"):  scale_g = e5m3(rC(amax_g / 6)), 0 -> eps first (so an
//      all-zero group, or one below 2^-18 * 6, gets scale 0, byte 0x00).
//  two-stage (T, O "float32", P): the global scale
//      s2 = amax / (6 * M)  (f32 division; M = 448 for e4m3, 114688 for e5m3;
//                           0 -> eps)
//      with amax = max |w| over the tensor, or over every tensor of its
//      shared-scale group (nvfp4: q/k/v and gate/up of one block share s2);
//      then per group t = amax_g / (s2 * 6) (f32, one division),
//      c_g = fp8(t) (e4m3: torch's cast, RNE; e5m3: e5m3.h), a c_g of value
//      0 becomes 1.0 ("protect zeros"), and the group's effective scale is
//      f32(value(c_g) * s2). Stored: weight_scale = c_g, weight_scale_2 = s2.
//  codes (K): e2m1 RNE of f32(w) / scale (a true division), saturating at
//      +-6; a zero magnitude is +0 (code 0). A scale of 0 divides by eps
//      instead (amdfp4's tiny groups: codes saturate, scale 0 zeroes them).
// Deliberate difference from Quark 0.13: for amdfp4_global16/32 Quark's P
// casts t with torch's .to(uint8) (the "packed dtype" of fp8_e5m3) instead
// of encoding e5m3, so its weight_scale bytes are t truncated modulo 256 and
// its checkpoints decode to noise (relative MSE ~1 on the demo model). qloom
// writes the e5m3 code of t, the scheme's evident intent (and what its
// non-realigned export path computes up to one rounding).
// Unreachable difference: torch's e4m3 cast gives NaN for t in (464, 480);
// t <= 448 (1 + 2^-22) here, and qloom's codec saturates.
//
// Dynamic activations (input_tensors; fake_quantize_fp4_block): per token,
// per group along the features: amdfp4 scale_g = e5m3(amax_g / 6); two-stage
// scale_g = f32(amax_g / 6) (0 -> eps), quantized by the static calibrated
// global scale s2 (input_scale_2): value(fp8(scale_g / s2)) * s2; then
// x' = e2m1(x / scale_g) * scale_g. f32 throughout: Quark's loader rounds
// scale_g to the model dtype first, which is not reproduced (as in
// fake_quant.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "qloom/core/dtype.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

// True for fp4 per_group specs with scale_format float32 or e5m3.
bool is_fp4_block_spec(const QuantSpec& s);

// Validates a (first stage, second stage) pair: first is_fp4_block_spec; a
// float32 first stage needs a second stage (fp8_e4m3 / fp8_e5m3, per_tensor,
// static, is_scale_quant) and an e5m3 one must have none. Throws
// Error(kUnsupported) naming `where`.
void check_fp4_block_specs(const QuantSpec& first, const std::optional<QuantSpec>& second, std::string_view where);

// The largest finite value of a second stage's format: 448 (fp8_e4m3) or
// 114688 (fp8_e5m3).
float scale_stage_max(const QuantSpec& second);

// Value <-> code of a second stage's format (fp8_e4m3 / fp8_e5m3).
float scale_stage_value(const QuantSpec& second, uint8_t code);
uint8_t scale_stage_code(const QuantSpec& second, float x);

// The global scale of a second stage: amax / (6 * scale_stage_max), f32,
// 0 -> eps. `amax` is max |w| (weights; over a shared-scale group: the max of
// its members') or the calibrated max |x| rounded to the model dtype
// (activations). A negative or non-finite amax throws Error(kInvalidInput).
float fp4_global_scale(float amax, const QuantSpec& second);

// max |x| over n values (0 for n == 0); NaN / inf are the caller's to reject.
float abs_max(const float* x, uint64_t n);

// Quantizes a [rows, cols] weight (rows = out_features). `second` and
// `global_scale` (s2) only for two-stage specs. Non-finite weights throw
// Error(kInvalidInput) naming `tensor_name`, row and column; cols not a
// multiple of the group size throws Error(kUnsupported).
QuantizedTensor quantize_fp4_block_ref(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                       const std::optional<QuantSpec>& second, float global_scale,
                                       std::string_view tensor_name, DType model_dtype = DType::kF32);
QuantizedTensor quantize_fp4_block(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                   const std::optional<QuantSpec>& second, float global_scale,
                                   std::string_view tensor_name, DType model_dtype = DType::kF32,
                                   unsigned threads = 0);

// Dynamic activation fake quantization in place (see the file comment); x is
// [rows, cols], rows = tokens. Rows holding NaN / inf are left unchanged.
void fake_quantize_fp4_block_ref(float* x, int64_t rows, int64_t cols, const QuantSpec& first,
                                 const std::optional<QuantSpec>& second, float global_scale);
void fake_quantize_fp4_block(float* x, int64_t rows, int64_t cols, const QuantSpec& first,
                             const std::optional<QuantSpec>& second, float global_scale);

namespace detail {
// Shared by the reference and the fast path (one definition of each rule).
// The scale of one weight group from its amax (amdfp4: rC(amax / 6) to e5m3;
// two-stage: the stored second-stage value; *code receives the stored byte).
float fp4_weight_group_scale(const QuantSpec& first, const std::optional<QuantSpec>& second, float global_scale,
                             float amax, DType model_dtype, uint8_t* code);
// The scale of one activation group (dynamic), the effective f32 scale.
float fp4_act_group_scale(const QuantSpec& first, const std::optional<QuantSpec>& second, float global_scale,
                          float amax);
// e2m1 code of x / scale (scale 0 -> eps), zero magnitude -> +0.
uint8_t fp4_encode(float x, float scale);
}  // namespace detail

}  // namespace qloom::quant
