#include "qloom/quant/fp4_block.h"

#include <cmath>
#include <string>

#include "qloom/core/e5m3.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {

namespace {

constexpr float kFp4Max = 6.0f;

bool is_scale_stage(const QuantSpec& s) {
  return (s.dtype == QDtype::kFp8E4M3 || s.dtype == QDtype::kFp8E5M3) && s.qscheme == QScheme::kPerTensor &&
         !s.is_dynamic && s.is_scale_quant;
}

[[noreturn]] void fp4_block_unsupported(std::string_view where, const std::string& what) {
  throw Error(ErrorKind::kUnsupported, "", std::string(where), what,
              "use one of Quark's fp4 block schemes as it defines them: nvfp4, amdfp4, amdfp4_g32, "
              "amdfp4_global16, amdfp4_global32");
}

uint64_t checked_group(const QuantSpec& first, uint64_t cols, std::string_view name) {
  const uint64_t g = static_cast<uint64_t>(first.group_size);
  if (g == 0 || cols % g != 0)
    throw Error(ErrorKind::kUnsupported, "", std::string(name),
                "in_features " + std::to_string(cols) + " is not a multiple of the fp4 group size " +
                    std::to_string(first.group_size),
                "exclude this layer (--exclude_layers), as Quark cannot quantize it either");
  return g;
}

}  // namespace

bool is_fp4_block_spec(const QuantSpec& s) {
  return s.dtype == QDtype::kFp4 && s.qscheme == QScheme::kPerGroup &&
         (s.scale_format == ScaleFormat::kFloat32 || s.scale_format == ScaleFormat::kE5M3);
}

void check_fp4_block_specs(const QuantSpec& first, const std::optional<QuantSpec>& second, std::string_view where) {
  if (!is_fp4_block_spec(first)) fp4_block_unsupported(where, "not an fp4 per_group spec with float32 or e5m3 scales");
  if (first.group_size <= 0) fp4_block_unsupported(where, "fp4 block spec without a positive group_size");
  if (first.ch_axis != -1 && first.ch_axis != 1)
    fp4_block_unsupported(where, "fp4 block groups along axis " + std::to_string(first.ch_axis) + " (only the input axis)");
  if (first.scale_format == ScaleFormat::kE5M3) {
    if (second) fp4_block_unsupported(where, "an e5m3-scaled fp4 spec with a second stage");
    return;
  }
  if (!second) fp4_block_unsupported(where, "an fp4 spec with float32 scales but no scale-quantization stage");
  if (!is_scale_stage(*second))
    fp4_block_unsupported(where, std::string("second stage ") + quant_dtype_name(second->dtype) +
                           " is not a static per_tensor fp8_e4m3 / fp8_e5m3 scale quantizer");
}

float scale_stage_max(const QuantSpec& second) {
  return second.dtype == QDtype::kFp8E5M3 ? kE5M3Max : 448.0f;
}

float scale_stage_value(const QuantSpec& second, uint8_t code) {
  return second.dtype == QDtype::kFp8E5M3 ? e5m3_to_float(code) : fp8_e4m3_to_float(code);
}

uint8_t scale_stage_code(const QuantSpec& second, float x) {
  return second.dtype == QDtype::kFp8E5M3 ? float_to_e5m3(x) : float_to_fp8_e4m3(x);
}

float fp4_global_scale(float amax, const QuantSpec& second) {
  detail::FpEnvGuard env;
  if (!std::isfinite(amax) || amax < 0.0f)
    throw Error(ErrorKind::kInvalidInput, "", "global scale",
                "amax " + std::to_string(amax) + " is not a finite non-negative number",
                "the weights or calibration activations contain NaN or inf");
  // T: quant_max_first_level * quant_max, one f32 division (O "float32").
  const float s = amax / (kFp4Max * scale_stage_max(second));
  return s == 0.0f ? detail::kEps : s;
}

float abs_max(const float* x, uint64_t n) {
  float m = 0.0f;
  for (uint64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));
  return m;
}

namespace detail {

float fp4_weight_group_scale(const QuantSpec& first, const std::optional<QuantSpec>& second, float global_scale,
                             float amax, DType model_dtype, uint8_t* code) {
  if (!second) {
    // O "e5m3": torch.div in the model dtype, eps for 0, then e5m3 qdq.
    float s = round_to(model_dtype, amax / kFp4Max);
    if (s == 0.0f) s = kEps;
    *code = float_to_e5m3(s);
    return e5m3_to_float(*code);
  }
  (void)first;
  // P: amax / (global * element_max) in f32, cast, zeros protected as 1.0.
  const float t = amax / (global_scale * kFp4Max);
  uint8_t c = scale_stage_code(*second, t);
  if (scale_stage_value(*second, c) == 0.0f) c = scale_stage_code(*second, 1.0f);
  *code = c;
  return scale_stage_value(*second, c);
}

float fp4_act_group_scale(const QuantSpec& first, const std::optional<QuantSpec>& second, float global_scale,
                          float amax) {
  (void)first;
  if (!second) return e5m3_round(amax / kFp4Max == 0.0f ? kEps : amax / kFp4Max);
  float s = amax / kFp4Max;  // O "float32" (scale_type float32)
  if (s == 0.0f) s = kEps;
  // The static second stage: x / s2, clamped and cast, times s2.
  const float q = s / global_scale;
  const float clamped = q > scale_stage_max(*second) ? scale_stage_max(*second) : q;
  return scale_stage_value(*second, scale_stage_code(*second, clamped)) * global_scale;
}

uint8_t fp4_encode(float x, float scale) {
  const float s = scale == 0.0f ? kEps : scale;
  uint8_t c = float_to_fp4_e2m1(x / s);
  if ((c & 0x7u) == 0) c = 0;
  return c;
}

}  // namespace detail

QuantizedTensor quantize_fp4_block_ref(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                       const std::optional<QuantSpec>& second, float global_scale,
                                       std::string_view tensor_name, DType model_dtype) {
  detail::FpEnvGuard env;
  check_fp4_block_specs(first, second, tensor_name);
  const uint64_t g = checked_group(first, cols, tensor_name);
  const uint64_t n = rows * cols;
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i])) detail::throw_nonfinite(tensor_name, i / cols, i % cols, w[i]);
  QuantizedTensor t;
  t.spec = first;
  t.shape = {rows, cols};
  t.codes.resize(n);
  t.scales.resize(n / g);
  t.scale_dtype = second && second->dtype == QDtype::kFp8E4M3 ? DType::kF8_E4M3 : DType::kU8;
  if (second) {
    t.scale_spec = second;
    t.global_scale = global_scale;
  }
  for (uint64_t gi = 0; gi < n / g; ++gi) {
    const float* x = w + gi * g;
    uint8_t code = 0;
    t.scales[gi] = detail::fp4_weight_group_scale(first, second, global_scale, abs_max(x, g), model_dtype, &code);
    const float eff = group_scale(t, gi);
    for (uint64_t i = 0; i < g; ++i) t.codes[gi * g + i] = detail::fp4_encode(x[i], eff);
  }
  return t;
}

void fake_quantize_fp4_block_ref(float* x, int64_t rows, int64_t cols, const QuantSpec& first,
                                 const std::optional<QuantSpec>& second, float global_scale) {
  detail::FpEnvGuard env;
  check_fp4_block_specs(first, second, "activation");
  if (rows <= 0 || cols <= 0) return;
  const uint64_t g = checked_group(first, static_cast<uint64_t>(cols), "activation");
  const uint64_t n = static_cast<uint64_t>(rows * cols);
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return;  // a blown-up activation: leave it, the logits show it
  for (uint64_t gi = 0; gi < n / g; ++gi) {
    float* v = x + gi * g;
    const float s = detail::fp4_act_group_scale(first, second, global_scale, abs_max(v, g));
    for (uint64_t i = 0; i < g; ++i) v[i] = fp4_e2m1_to_float(detail::fp4_encode(v[i], s)) * s;
  }
}

}  // namespace qloom::quant
