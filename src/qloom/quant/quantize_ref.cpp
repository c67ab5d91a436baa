#include "qloom/quant/quantize_ref.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/mx_fp6.h"

namespace qloom::quant {
namespace detail {
namespace {

std::string str(std::string_view s) { return std::string(s); }

const char* short_dtype(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    default: return "?";
  }
}

bool is_float_scale_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// rS: rounds a positive finite scale to the storage dtype. A scale that
// underflows to 0 there becomes eps (Quark's rule for zero scales; never the
// case when S = C, as in Quark); one that overflows (f16) is an error.
float store_scale(DType s_dtype, float s, std::string_view tensor_name) {
  float r = round_to(s_dtype, s);
  if (r == 0.0f) r = round_to(s_dtype, kEps);
  if (!std::isfinite(r))
    throw Error(ErrorKind::kUnsupported, "", str(tensor_name),
                "a quantization scale (" + std::to_string(s) + ") overflows " + short_dtype(s_dtype),
                "store the scales as f32 or bf16, or exclude the layer with --exclude_layers");
  return r;
}

}  // namespace

float round_to(DType t, float x) {
  switch (t) {
    case DType::kBF16: return bf16_to_float(float_to_bf16(x));
    case DType::kF16: return f16_to_float(float_to_f16(x));
    default: return x;
  }
}

void throw_nonfinite(std::string_view tensor_name, uint64_t row, uint64_t col, float value) {
  const char* what = std::isnan(value) ? "NaN" : (value > 0 ? "+inf" : "-inf");
  throw Error(ErrorKind::kInvalidInput, "", str(tensor_name),
              "weight element [" + std::to_string(row) + ", " + std::to_string(col) + "] is " + what +
                  "; a quantization scale cannot be computed",
              "the source checkpoint holds non-finite weights: fix it at the source, or keep the layer "
              "unquantized with --exclude_layers");
}

Plan make_plan(uint64_t rows, uint64_t cols, const QuantSpec& spec, DType scale_dtype, DType model_dtype,
               std::string_view tensor_name) {
  const std::string name = str(tensor_name);
  Plan p;
  p.rows = rows;
  p.cols = cols;
  p.symmetric = spec.symmetric;
  p.scale_dtype = scale_dtype;
  p.model_dtype = model_dtype;
  if (!is_float_scale_dtype(model_dtype))
    throw Error(ErrorKind::kUsage, "", name,
                std::string("model dtype ") + std::string(dtype_name(model_dtype)) +
                    " is not a weight dtype qloom quantizes from",
                "weights must be f32, bf16 or f16");
  if (rows == 0 || cols == 0)
    throw Error(ErrorKind::kInvalidInput, "", name,
                "weight has no elements (shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "])",
                "exclude the layer with --exclude_layers");

  switch (spec.dtype) {
    case QDtype::kInt8: p.kind = Kind::kInt; p.qmin = -128; p.qmax = 127; p.is_signed = true; break;
    case QDtype::kUInt8: p.kind = Kind::kInt; p.qmin = 0; p.qmax = 255; p.is_signed = false; break;
    case QDtype::kInt4: p.kind = Kind::kInt; p.qmin = -8; p.qmax = 7; p.is_signed = true; break;
    case QDtype::kUInt4: p.kind = Kind::kInt; p.qmin = 0; p.qmax = 15; p.is_signed = false; break;
    case QDtype::kFp8E4M3: p.kind = Kind::kFp8; break;
    case QDtype::kFp4:
    case QDtype::kFp6E2M3:
    case QDtype::kFp6E3M2: p.kind = Kind::kMx; p.mx_dtype = spec.dtype; break;
    default:
      throw Error(ErrorKind::kUnsupported, "", name,
                  std::string("weight dtype ") + quant_dtype_name(spec.dtype) + " is not implemented yet",
                  "choose a scheme with int8, int4, uint4, fp8_e4m3 or MX fp4 / fp6 weights");
  }
  p.fp8_scale_f32 = p.kind == Kind::kFp8 && spec.scale_type == "float32";
  if (p.kind == Kind::kMx) {
    if (spec.scale_format != ScaleFormat::kE8M0 || spec.qscheme != QScheme::kPerGroup)
      throw Error(ErrorKind::kUnsupported, "", name,
                  std::string(quant_dtype_name(spec.dtype)) +
                      " weights are implemented here only as OCP MX (per_group, e8m0 scales); fp4 with "
                      "float32 / e5m3 scales (nvfp4, amdfp4*) is quantized by quant/fp4_block.h",
                  "use mxfp4, mxfp6_e2m3 or mxfp6_e3m2 here, or call quantize_fp4_block (quant/fp4_block.h)");
    if (!spec.scale_calculation_mode.empty() && spec.scale_calculation_mode != "even")
      throw Error(ErrorKind::kUnsupported, "", name,
                  "MX scale_calculation_mode '" + spec.scale_calculation_mode + "' is not implemented",
                  "use scale_calculation_mode \"even\" (Quark's default)");
  } else {
    if (spec.scale_format != ScaleFormat::kFloat)
      throw Error(ErrorKind::kUnsupported, "", name,
                  std::string("e8m0 scales are implemented only for fp4 / fp6 (MX) weights, not ") +
                      quant_dtype_name(spec.dtype),
                  "");
    if (!is_float_scale_dtype(scale_dtype))
      throw Error(ErrorKind::kUsage, "", name,
                  std::string("scale dtype ") + std::string(dtype_name(scale_dtype)) + " cannot hold float scales",
                  "store scales as f32, bf16 or f16");
  }
  if (p.kind == Kind::kFp8 && spec.qscheme == QScheme::kPerGroup)
    throw Error(ErrorKind::kUnsupported, "", name, "per-group fp8 weights are not implemented",
                "use fp8 (per tensor) or ptpc_fp8 (per channel)");

  switch (spec.qscheme) {
    case QScheme::kPerTensor:
      p.per_tensor = true;
      p.group = cols;
      p.groups_per_row = 1;
      break;
    case QScheme::kPerChannel:
      if (spec.ch_axis != 0)
        throw Error(ErrorKind::kUnsupported, "", name,
                    "per-channel weight scales along axis " + std::to_string(spec.ch_axis) +
                        " are not implemented (only ch_axis 0, one scale per output channel)",
                    "");
      p.group = cols;
      p.groups_per_row = 1;
      break;
    case QScheme::kPerGroup: {
      if (spec.ch_axis != -1 && spec.ch_axis != 1)
        throw Error(ErrorKind::kUnsupported, "", name,
                    "per-group weight scales along axis " + std::to_string(spec.ch_axis) +
                        " are not implemented (only the input dimension, ch_axis -1 or 1)",
                    "");
      if (spec.group_size <= 0)
        throw Error(ErrorKind::kUsage, "", name,
                    "per_group spec with group_size " + std::to_string(spec.group_size), "group_size must be > 0");
      const uint64_t gs = static_cast<uint64_t>(spec.group_size);
      if (cols % gs != 0)
        throw Error(ErrorKind::kUnsupported, "", name,
                    "in_features " + std::to_string(cols) + " is not a multiple of the group size " +
                        std::to_string(gs),
                    "exclude the layer with --exclude_layers or choose a per-channel scheme "
                    "(int4_wo_per_channel, uint4_wo_per_channel)");
      p.group = gs;
      p.groups_per_row = cols / gs;
      break;
    }
  }
  return p;
}

GroupParams int_params(const Plan& p, float mn, float mx, std::string_view tensor_name) {
  const DType c = p.model_dtype;
  const float mn_neg = std::min(mn, 0.0f);
  const float mx_pos = std::max(mx, 0.0f);
  float s;
  if (p.symmetric) {
    // O: max_val_pos = max(-min_val_neg, max_val_pos);
    //    scale = max_val_pos / (float(quant_max - quant_min) / 2); max(scale, eps)
    const float amax = std::max(-mn_neg, mx_pos);
    const float half_range = static_cast<float>(p.qmax - p.qmin) / 2.0f;
    s = std::max(round_to(c, amax / half_range), kEps);
  } else {
    // O (zero_point_type int32, "AWQ"): scale = (max_val_pos - min_val_neg) /
    //    float(quant_max - quant_min); max(scale, eps)
    const float range = round_to(c, mx_pos - mn_neg);
    s = std::max(round_to(c, range / static_cast<float>(p.qmax - p.qmin)), kEps);
  }
  GroupParams g;
  g.scale = store_scale(p.scale_dtype, s, tensor_name);
  g.inv_scale = 1.0f / g.scale;  // K: inv_scale = 1.0 / scale (f32)
  if (!p.symmetric) {
    // O: zero_point = quant_min - round(min_val_neg / scale); clamp. For
    // per-tensor specs the scale is already an f32 tensor (0-dim promotion).
    const float q = p.per_tensor ? mn_neg / g.scale : round_to(c, mn_neg / g.scale);
    int zp = p.qmin - static_cast<int>(std::nearbyint(q));
    zp = std::clamp(zp, p.qmin, p.qmax);
    g.zp = zp;
    g.zero_point = static_cast<float>(zp);
  }
  return g;
}

GroupParams fp8_params(const Plan& p, float amax, std::string_view tensor_name) {
  // O calculate_fp8_quant_parameters -> get_scale("float32"):
  //   scale = amax / 448 (in the model dtype); masked_fill(scale == 0, eps).
  // scale_type "float32" (rule (6)): amax.to(float32) / 448, no rC.
  float s = p.fp8_scale_f32 ? amax / 448.0f : round_to(p.model_dtype, amax / 448.0f);
  if (s == 0.0f) s = kEps;
  GroupParams g;
  g.scale = store_scale(p.scale_dtype, s, tensor_name);
  g.inv_scale = 1.0f / g.scale;
  return g;
}

GroupParams mx_params(float amax, int kMbits, int kEmax) {
  // U even_round(amax, dtype) with the dtype's mbits, emax (get_dtype_params).
  uint32_t bits = std::bit_cast<uint32_t>(amax) & 0x7FFFFFFFu;  // amax may be -0.0
  int e;
  if (bits == 0) {
    e = -126 - kEmax;  // zero -> f32 min normal 2^-126
  } else {
    bits = (bits + (1u << (23 - kMbits - 1))) & 0xFF800000u;
    const uint32_t field = bits >> 23;
    if (field == 0xFF) {
      e = 127;  // rounded up to inf: log2 -> inf, clamp -> 127
    } else if (field == 0) {
      e = -127;  // a float denormal that did not round up: log2(0) = -inf
    } else {
      e = static_cast<int>(field) - 127 - kEmax;
    }
  }
  // Quark: clamp(-127, 127) for the codes, but the stored e8m0 byte comes from
  // max(scale, 2^-126) (N to_e8m0_uint8). qloom uses -126 for both.
  e = std::clamp(e, -126, 127);
  GroupParams g;
  g.scale = std::ldexp(1.0f, e);
  g.inv_scale = std::ldexp(1.0f, -e);  // exact (2^-127 is a float denormal, still exact)
  return g;
}

GroupParams group_params(const Plan& p, const float* x, uint64_t len, std::string_view tensor_name) {
  float mn = x[0], mx = x[0], amax = 0.0f;
  for (uint64_t i = 0; i < len; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  switch (p.kind) {
    case Kind::kInt: return int_params(p, mn, mx, tensor_name);
    case Kind::kFp8: return fp8_params(p, amax, tensor_name);
    case Kind::kMx: break;
  }
  const MxElement& e = mx_element(p.mx_dtype);
  return mx_params(amax, e.mbits, e.emax);
}

uint8_t encode_int(const Plan& p, const GroupParams& g, float x) {
  // rint(x * inv_scale) + zero_point, clamped: the zero point is added AFTER
  // rounding. That is what Quark's exported checkpoints hold (the weight goes
  // through PyTorch's fake-quantize kernels, zp + nearbyint(x * inv_scale),
  // before export): on the demo model a tie x/s = 1.5 with zp 9 exports 11,
  // not rint(10.5) = 10 (tests/export QuarkBytes, amd-quark 0.12.post1 and 0.13).
  const float t = x * g.inv_scale;
  float r = std::nearbyint(t) + g.zero_point;
  r = std::clamp(r, static_cast<float>(p.qmin), static_cast<float>(p.qmax));
  return static_cast<uint8_t>(static_cast<int>(r) & 0xFF);
}

uint8_t encode_fp8(const Plan& p, const GroupParams& g, float x) {
  // K real_quantize_fp8_per_{tensor,channel}_with_scale:
  //   res = inputs / scale (a tensor of the model dtype); clamp(+-448); .to(e4m3fn)
  float q = round_to(p.model_dtype, x / g.scale);
  q = std::clamp(q, -448.0f, 448.0f);
  return float_to_fp8_e4m3(q);
}

uint8_t encode_mx(const GroupParams& g, float x, QDtype element) {
  // K real_quantize_fp4_fp6_per_group: input / scale (f32), then M
  // fake_quantize_element (RNE, saturate at the format's max, zero magnitude
  // -> +0.0).
  return mx_encode_ref(mx_element(element), x / g.scale);
}

}  // namespace detail

using namespace detail;

DType quark_scale_dtype(const QuantSpec& spec, DType model_dtype) {
  if (spec.scale_format == ScaleFormat::kE8M0) return DType::kE8M0;
  if (spec.scale_format == ScaleFormat::kE5M3) return DType::kU8;  // AmdFP4Spec (fp4_block.h)
  if (spec.scale_type == "float32") return DType::kF32;
  if (spec.scale_type == "bfloat16") return DType::kBF16;
  if (spec.scale_type == "float16") return DType::kF16;
  const bool is_int = spec.dtype == QDtype::kInt8 || spec.dtype == QDtype::kUInt8 ||
                      spec.dtype == QDtype::kInt4 || spec.dtype == QDtype::kUInt4;
  if (is_int && spec.qscheme == QScheme::kPerTensor) return DType::kF32;
  return model_dtype;
}

QuantizedTensor quantize_weight_ref(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& spec,
                                    DType scale_dtype, std::string_view tensor_name, DType model_dtype) {
  FpEnvGuard fpenv;
  const Plan p = make_plan(rows, cols, spec, scale_dtype, model_dtype, tensor_name);
  const uint64_t n = rows * cols;
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i])) throw_nonfinite(tensor_name, i / cols, i % cols, w[i]);

  QuantizedTensor t;
  t.spec = spec;
  t.shape = {rows, cols};
  t.codes.resize(n);
  t.scale_dtype = p.kind == Kind::kMx ? DType::kE8M0 : scale_dtype;
  const bool asym = p.kind == Kind::kInt && !p.symmetric;

  auto params_of = [&](const float* x, uint64_t len) { return group_params(p, x, len, tensor_name); };
  auto encode = [&](const GroupParams& g, float x) -> uint8_t {
    switch (p.kind) {
      case Kind::kInt: return encode_int(p, g, x);
      case Kind::kFp8: return encode_fp8(p, g, x);
      case Kind::kMx: break;
    }
    return encode_mx(g, x, p.mx_dtype);
  };

  if (p.per_tensor) {
    const GroupParams g = params_of(w, n);
    t.scales = {g.scale};
    if (asym) t.zero_points = {g.zp};
    for (uint64_t i = 0; i < n; ++i) t.codes[i] = encode(g, w[i]);
    return t;
  }
  t.scales.resize(rows * p.groups_per_row);
  if (asym) t.zero_points.resize(rows * p.groups_per_row);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t gi = 0; gi < p.groups_per_row; ++gi) {
      const uint64_t off = r * cols + gi * p.group;
      const GroupParams g = params_of(w + off, p.group);
      t.scales[r * p.groups_per_row + gi] = g.scale;
      if (asym) t.zero_points[r * p.groups_per_row + gi] = g.zp;
      for (uint64_t i = 0; i < p.group; ++i) t.codes[off + i] = encode(g, w[off + i]);
    }
  }
  return t;
}

void dequantize_ref(const QuantizedTensor& t, float* out) {
  const QuantSpec& spec = t.spec;
  const uint64_t n = t.codes.size();
  if (n == 0) return;
  const uint64_t cols = t.shape.size() == 2 ? t.shape[1] : n;
  uint64_t group = cols;  // per-channel
  if (spec.qscheme == QScheme::kPerTensor) group = n;
  if (spec.qscheme == QScheme::kPerGroup) group = static_cast<uint64_t>(spec.group_size);
  const bool is_signed_int = spec.dtype == QDtype::kInt8 || spec.dtype == QDtype::kInt4;
  for (uint64_t i = 0; i < n; ++i) {
    // Scale index: per-tensor 0; per-channel row; per-group row * G + col / g.
    uint64_t si = 0;
    if (spec.qscheme == QScheme::kPerChannel) si = i / cols;
    if (spec.qscheme == QScheme::kPerGroup) si = (i / cols) * (cols / group) + (i % cols) / group;
    const float s = group_scale(t, si);
    const uint8_t c = t.codes[i];
    switch (spec.dtype) {
      case QDtype::kFp8E4M3: out[i] = fp8_e4m3_to_float(c) * s; break;
      case QDtype::kFp4:
      case QDtype::kFp6E2M3:
      case QDtype::kFp6E3M2: out[i] = mx_decode(mx_element(spec.dtype), c) * s; break;
      default: {
        const int v = is_signed_int ? static_cast<int>(static_cast<int8_t>(c)) : static_cast<int>(c);
        const int zp = t.zero_points.empty() ? 0 : t.zero_points[si];
        out[i] = static_cast<float>(v - zp) * s;
        break;
      }
    }
  }
}

std::vector<float> dequantize_ref(const QuantizedTensor& t) {
  std::vector<float> out(t.codes.size());
  dequantize_ref(t, out.data());
  return out;
}

float static_scale_from_amax(float amax, const QuantSpec& spec, DType scale_dtype, DType model_dtype) {
  FpEnvGuard fpenv;
  const char* item = "static scale";
  if (!std::isfinite(amax) || amax < 0.0f)
    throw Error(ErrorKind::kInvalidInput, "", item,
                "calibration amax " + std::to_string(amax) + " is not a finite non-negative number",
                "the calibration activations contain NaN or inf; check the model and the calibration data");
  if (spec.qscheme != QScheme::kPerTensor || spec.is_dynamic ||
      !(spec.dtype == QDtype::kFp8E4M3 || (spec.dtype == QDtype::kInt8 && spec.symmetric)))
    throw Error(ErrorKind::kUnsupported, "", item,
                std::string("static scales are implemented for static per-tensor fp8_e4m3 and symmetric "
                            "int8 specs, not ") +
                    quant_dtype_name(spec.dtype),
                "");
  // The observer's min/max arithmetic is the weight path's: reuse it.
  const Plan p = make_plan(1, 1, spec, scale_dtype, model_dtype, item);
  if (spec.dtype == QDtype::kFp8E4M3) return fp8_params(p, amax, item).scale;
  return int_params(p, -amax, amax, item).scale;
}

float kv_group_scale(float k_scale, float v_scale, float min_kv_scale, DType scale_dtype) {
  const float m = round_to(scale_dtype, min_kv_scale);
  return std::max({k_scale, v_scale, m});
}

}  // namespace qloom::quant
