// The scalar REFERENCE weight quantizer: it defines the bytes qloom exports.
// quantize_fast.h must produce exactly the same QuantizedTensor; tests check
// that bit for bit.
//
// Every rule below was read in AMD Quark's source (amd-quark 0.13 wheel) and
// then checked against Quark itself: a tiny Llama (7 linears, 590K weights)
// quantized with LLMTemplate + ModelQuantizer + export_safetensors in bf16,
// f16 and f32, for every scheme of scheme_registry.h, has exactly the codes,
// scales and zero points of this file (Gaussian, Student-t, all-zero rows and
// groups, an outlier, float denormals, exact ties), except the MX
// float-denormal blocks noted under (4). Files:
//   O  quark/torch/quantization/observer/observer.py  (UniformScalingObserver.
//      calculate_int_quant_params / calculate_fp8_quant_parameters,
//      ObserverBase.get_scale, PerBlockMXObserver)
//   U  quark/torch/quantization/utils.py  (calculate_qmin_qmax, even_round,
//      get_dtype_params)
//   K  quark/torch/kernel/hw_emulation/hw_emulation_interface.py
//      (real_quantize_int_per_{tensor,channel,group}_affine,
//      real_quantize_fp8_per_{tensor,channel}_with_scale,
//      real_quantize_fp4_fp6_per_group, dequantize_*)
//   M  quark/torch/kernel/hw_emulation/csrc/mx/funcs.cuh (fake_quantize_element)
//   N  quark/torch/utils/numerics.py (to_e8m0_uint8, safe_log2)
//
// Notation: C = the model's weight dtype (`model_dtype`: f32, bf16 or f16).
// Quark's observers keep min/max in C and do their arithmetic on C tensors,
// so PyTorch rounds each intermediate result to C: rC(x) below (the identity
// for f32; RNE to bf16 / f16 otherwise, as torch computes a bf16 op in f32 and
// rounds). S = `scale_dtype`, the dtype the scales are stored in; rS(x) rounds
// to it. Quark's scale_type "float" means "the model dtype", so with Quark's
// schemes S = C, except for symmetric per-tensor int specs (int8), whose
// scale PyTorch promotes to f32 (see quark_scale_dtype). qloom rounds each
// scale to S BEFORE computing the codes from it, so the stored scale and codes
// always dequantize to dequantize_ref(); with S = C (Quark) rS is a no-op.
// All other arithmetic is f32, round to nearest even, as in Quark's kernels;
// the functions force that FP environment (MXCSR) while they run. eps =
// FLT_EPSILON = 2^-23 (torch.finfo(torch.float32).eps).
//
// (1) Symmetric integers (int8 [-128,127], int4 [-8,7]; O, K):
//     amax = max(-min(min,0), max(max,0)) over the group (tensor / row / group)
//     scale = rS(max(rC(amax / ((qmax - qmin) / 2)), eps))   [/127.5, /7.5]
//     code  = clamp(rint(x * (1 / scale)), qmin, qmax)
//     Quark multiplies by the f32 reciprocal (1.0 / scale), it does not
//     divide; on the test model a division changes ~0.05% of the codes.
// (2) Asymmetric integers (uint4 [0,15]; O "AWQ" branch, K):
//     range = rC(max(max,0) - min(min,0)); scale = rS(max(rC(range / 15), eps))
//     zp    = clamp(qmin - rint(rC'(min(min,0) / scale)), qmin, qmax)
//     code  = clamp(rint(x * (1 / scale)) + zp, qmin, qmax)
//     The zero point is added AFTER rounding, as in the codes Quark exports
//     (its weights pass PyTorch's fake-quantize kernels, zp + nearbyint(x *
//     inv_scale)); Quark's scaled_real_quantize alone adds it before, which
//     differs at ties with an odd zero point (demo model: x/s = 1.5, zp 9 ->
//     Quark's checkpoint holds 11). rC' is rC, or the identity for
//     per-tensor specs (their scale is f32, see quark_scale_dtype). Dropping
//     either rC in the scale would change ~1% of the codes of a bf16 model.
// (3) FP8 e4m3 per tensor / per channel (O calculate_fp8_quant_parameters, K):
//     scale = rC(amax / 448); scale == 0 -> eps; scale = rS(scale)
//     code  = e4m3(clamp(rC(x / scale), -448, 448))
//     A true division (not a reciprocal) whose quotient PyTorch rounds to C
//     before the cast to e4m3: for bf16 models this double rounding decides
//     ~2% of the codes, and qloom reproduces it. e4m3 rounding is RNE and
//     keeps the sign of zero.
// (5) OCP MXFP6 e2m3 / e3m2: rule (4) with the element format's mbits / emax
//     (3 / 2 and 2 / 4: the even rounding adds 1 << 19 / 1 << 20, e =
//     E - emax) and its element grid (max 7.5 / 28), see mx_fp6.h.
// (6) fp8 specs with scale_type "float32" (int4_fp8's first stage): rule (3)
//     without rC in the scale (scale = amax / 448 in f32); the codes still
//     round x / scale to C.
// (4) OCP MXFP4 (O PerBlockMXObserver + get_scale "e8m0" "even", U even_round,
//     K real_quantize_fp4_fp6_per_group, M, N):
//     per 32 consecutive inputs: amax; E = exponent of amax rounded "evenly"
//     to a power of two (add 1 << (23 - mbits - 1) = 1 << 21 to the f32 bits
//     and keep sign + exponent: mantissas >= 0.75 round up; amax 0 -> 2^-126;
//     an overflow to inf -> E = +inf); e = clamp(E - emax, -126, 127) with
//     emax = 2 for fp4; scale = 2^e, stored as the e8m0 byte e + 127.
//     code = fp4 e2m1 RNE of x / scale, saturating at +-6; a result of zero
//     magnitude is code 0 (+0): Quark's element quantizer returns +0.0.
//     Difference from Quark: Quark clamps e at -127 for the codes but writes
//     the byte from max(scale, 2^-126) (to_e8m0_uint8), so a block whose amax
//     is below 1.75 * 2^-125 (~4.1e-38, float-denormal territory) gets codes
//     computed with 2^-127 but a stored scale of 2^-126. qloom uses 2^-126 for
//     both, so the stored bytes dequantize consistently. All-zero blocks are
//     identical (byte 1, codes 0).
// Input checks: NaN / inf weights throw Error(kInvalidInput) naming the tensor
// and the element; a group size that does not divide the input dimension (or
// an MX tensor whose input dimension is not a multiple of 32) throws
// Error(kUnsupported) with a remedy.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qloom/core/fp_env.h"
#include "qloom/core/dtype.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

// The dtype Quark stores this spec's scale in, for a model whose weights /
// activations are `model_dtype`: kE8M0 for MX specs; kU8 (e5m3 codes) for
// AMD FP4's scale_format e5m3 (fp4_block.h); scale_type "float32" /
// "bfloat16" / "float16" as named; otherwise ("float" or null) the model
// dtype, except symmetric per-tensor integer specs (int8 weight_scale and
// input_scale), which Quark stores as f32 because its observer takes
// torch.max of two 0-dim tensors, bf16 and f32 eps, which promotes to f32.
// Verified on exported checkpoints (amd-quark 0.13, bf16 / f16 / f32 models).
DType quark_scale_dtype(const QuantSpec& spec, DType model_dtype);

// Quantizes a [rows, cols] row-major weight (rows = out_features, cols =
// in_features) with `spec` (weight spec of a linear). `scale_dtype` (kF32,
// kBF16 or kF16; ignored for MX specs, whose scales are e8m0) is the dtype
// the scales are stored in; `model_dtype` (kF32, kBF16, kF16) the dtype the
// weight had in the model — pass the source tensor's dtype: Quark rounds
// intermediate results to it, see the file comment. `w` holds the weight's
// values (exactly representable in model_dtype when they come from it).
// `tensor_name` names the weight in errors.
QuantizedTensor quantize_weight_ref(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& spec,
                                    DType scale_dtype, std::string_view tensor_name,
                                    DType model_dtype = DType::kF32);

// What the codes mean, in f32, exactly as Quark's dequantize kernels compute
// it (K dequantize_int_* / dequantize_fp8_* / fp4): (code - zp) * scale for
// integers, value(code) * scale for fp8 / fp4. Row-major, t.shape.
std::vector<float> dequantize_ref(const QuantizedTensor& t);
// Same into a caller buffer of t.codes.size() floats.
void dequantize_ref(const QuantizedTensor& t, float* out);

// The static per-tensor scale of an activation or KV-cache spec (fp8 e4m3 or
// symmetric int8, per_tensor, static) from the running amax = max |x| seen in
// calibration, as Quark's PerTensorMinMaxObserver turns it into a scale:
//   fp8:  rS(rC(amax / 448)), 0 -> eps          (input_scale, output_scale)
//   int8: rS(max(rC(amax / 127.5), eps))         (input_scale)
// with C = `model_dtype` (the activations' dtype) and S = `scale_dtype`.
// Other specs throw Error(kUnsupported); a negative or non-finite amax
// throws Error(kInvalidInput).
float static_scale_from_amax(float amax, const QuantSpec& spec, DType scale_dtype,
                             DType model_dtype = DType::kF32);

// The scale Quark exports for both k_proj and v_proj of one attention layer
// (kv_cache_group): max(k_scale, v_scale, rS(min_kv_scale))
// (quark/torch/export/main_export/model_post_process.py, _build_kv_scale).
float kv_group_scale(float k_scale, float v_scale, float min_kv_scale, DType scale_dtype);

namespace detail {

// Shared by quantize_ref.cpp and quantize_fast.cpp so that both compute every
// scale, zero point and code with the very same scalar code; only the loops
// over elements differ.

inline constexpr float kEps = 1.1920928955078125e-07f;  // 2^-23

enum class Kind : uint8_t { kInt, kFp8, kMx };

// A validated spec + shape: how elements map to scales.
struct Plan {
  Kind kind = Kind::kInt;
  uint64_t rows = 0, cols = 0;
  uint64_t group = 0;            // elements per scale along a row (cols for per-channel)
  uint64_t groups_per_row = 0;   // 1 for per-channel, cols / group for per-group
  bool per_tensor = false;
  int qmin = 0, qmax = 0;        // integer kinds
  bool is_signed = true;         // integer codes are signed (int8 / int4)
  bool symmetric = true;         // integer kinds: false = zero points
  DType scale_dtype = DType::kF32, model_dtype = DType::kF32;
  QDtype mx_dtype = QDtype::kFp4;  // MX kind: the element format (mx_fp6.h)
  // fp8 scale_type "float32": Quark's get_scale casts amax to f32 before the
  // division, so the scale is amax / 448 in f32, not rounded to the model dtype.
  bool fp8_scale_f32 = false;
};

// Checks spec, shape and dtypes; throws the documented errors.
Plan make_plan(uint64_t rows, uint64_t cols, const QuantSpec& spec, DType scale_dtype, DType model_dtype,
               std::string_view tensor_name);

// Rounds x to `t` (kF32: identity; kBF16 / kF16: round to nearest even).
float round_to(DType t, float x);

struct GroupParams {
  float scale = 1.0f;     // as stored (already rounded to the scale dtype)
  float inv_scale = 1.0f; // f32 1 / scale (integer kinds)
  float zero_point = 0;   // integer kinds, as a float (exact)
  int32_t zp = 0;
};

// Integer kinds from the group's min and max; fp8 and MX from its amax.
GroupParams int_params(const Plan& p, float mn, float mx, std::string_view tensor_name);
GroupParams fp8_params(const Plan& p, float amax, std::string_view tensor_name);
// MX: `mbits` / `emax` of the element format (fp4 1 / 2, fp6_e2m3 3 / 2,
// fp6_e3m2 2 / 4; mx_fp6.h).
GroupParams mx_params(float amax, int mbits = 1, int emax = 2);
// The parameters of one group x[0..len) (len >= 1) for the plan's kind: its
// min / max (integer kinds) or amax (fp8, MX), then the function above.
GroupParams group_params(const Plan& p, const float* x, uint64_t len, std::string_view tensor_name);

// Element encoders (the exact rules above).
uint8_t encode_int(const Plan& p, const GroupParams& g, float x);
uint8_t encode_fp8(const Plan& p, const GroupParams& g, float x);
uint8_t encode_mx(const GroupParams& g, float x, QDtype element = QDtype::kFp4);

[[noreturn]] void throw_nonfinite(std::string_view tensor_name, uint64_t row, uint64_t col, float value);

// The FP environment the rules assume (round to nearest even, no
// flush-to-zero / denormals-are-zero) for the lifetime of the object.
using FpEnvGuard = IeeeFpEnv;

}  // namespace detail
}  // namespace qloom::quant
