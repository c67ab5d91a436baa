#include "qloom/export/quark_tensors.h"

#include "qloom/export/quark_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/core/float_codec.h"
#include "qloom/core/fp6_pack.h"
#include "qloom/export/fp4_block_tensors.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::exporter {

const char* activation_role_prefix(ActivationRole r) {
  switch (r) {
    case ActivationRole::kInput: return "input";
    case ActivationRole::kOutput: return "output";
    case ActivationRole::kProbs: return "prob_output";
  }
  return "?";
}

using quant::QDtype;
using quant::QScheme;
using quant::QuantizedTensor;
using quant::QuantSpec;
using quant::ScaleFormat;

namespace quark_layout {

// ---- small helpers --------------------------------------------------------------

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }


uint64_t numel_of(const std::vector<uint64_t>& s) {
  uint64_t n = 1;
  for (uint64_t d : s) n *= d;
  return n;
}

bool is_4bit_int(QDtype d) { return d == QDtype::kInt4 || d == QDtype::kUInt4; }
bool is_8bit_int(QDtype d) { return d == QDtype::kInt8 || d == QDtype::kUInt8; }
bool is_fp8(QDtype d) { return d == QDtype::kFp8E4M3 || d == QDtype::kFp8E5M2; }
bool is_fp6(QDtype d) { return d == QDtype::kFp6E2M3 || d == QDtype::kFp6E3M2; }

void check_model_dtype(DType m) {
  if (m != DType::kBF16 && m != DType::kF16 && m != DType::kF32)
    throw Error(ErrorKind::kUsage, "", "model dtype",
                "the model dtype must be bf16, f16 or f32, got " + std::string(dtype_name(m)),
                "pass the source model's floating-point dtype (config.json torch_dtype)");
}

std::string role_prefix(ActivationRole r) { return activation_role_prefix(r); }


void unsupported(const std::string& item, const std::string& msg, const std::string& remedy) {
  throw Error(ErrorKind::kUnsupported, "", item, msg, remedy);
}

WeightLayout weight_layout(const std::string& module, const std::vector<uint64_t>& shape,
                           const QuantSpec& w, DType model_dtype, bool reading) {
  const std::string item = module + ".weight";
  check_model_dtype(model_dtype);
  if (shape.size() != 2 || shape[0] == 0 || shape[1] == 0)
    throw Error(ErrorKind::kUsage, "", item,
                "a quantized weight must be a non-empty 2-D [out, in] matrix, got shape " +
                    format_shape(shape),
                "");
  if (w.is_dynamic)
    throw Error(ErrorKind::kUsage, "", item, "a weight spec cannot be dynamic",
                "weights are quantized statically (Quark asserts is_dynamic is not True for weights)");
  WeightLayout L;
  L.out = shape[0];
  L.in = shape[1];
  const uint64_t out = L.out, in = L.in;
  L.scale_dtype = exporter::quark_scale_dtype(w, model_dtype);
  L.zp_dtype = quark_zero_point_dtype(w);

  if (w.qscheme == QScheme::kPerChannel && w.ch_axis != 0)
    unsupported(item, "per_channel weights need ch_axis 0 (one scale per output row), got " +
                          std::to_string(w.ch_axis));
  if (w.qscheme == QScheme::kPerGroup) {
    if (w.ch_axis != -1 && w.ch_axis != 1)
      unsupported(item, "per_group weights need ch_axis -1 or 1 (groups along the input), got " +
                            std::to_string(w.ch_axis));
    if (w.group_size <= 0)
      throw Error(ErrorKind::kUsage, "", item, "per_group spec without a positive group_size", "");
    if (in % static_cast<uint64_t>(w.group_size) != 0)
      throw Error(ErrorKind::kUsage, "", item,
                  "group size " + std::to_string(w.group_size) + " does not divide in_features " +
                      std::to_string(in),
                  "choose a group size that divides " + std::to_string(in) +
                      " or exclude this layer");
  }
  const uint64_t g = w.qscheme == QScheme::kPerGroup ? static_cast<uint64_t>(w.group_size) : 0;

  if (is_fp8(w.dtype)) {
    // Default PackMethod (pack.py): the fp8 codes as they are, [out, in].
    if (w.qscheme == QScheme::kPerGroup)
      unsupported(item, "fp8 per_group weights are not a Quark export layout");
    if (w.scale_format != ScaleFormat::kFloat) unsupported(item, "fp8 weights need float scales");
    L.weight_dtype = w.dtype == QDtype::kFp8E4M3 ? DType::kF8_E4M3 : DType::kF8_E5M2;
    L.weight_shape = {out, in};
    L.scale_shape = w.qscheme == QScheme::kPerTensor ? std::vector<uint64_t>{} : std::vector<uint64_t>{out};
  } else if (is_8bit_int(w.dtype)) {
    // Pack_8_bits (pack.py): int8 / uint8 codes, transposed for per_group.
    if (w.scale_format != ScaleFormat::kFloat) unsupported(item, "integer weights need float scales");
    L.weight_dtype = w.dtype == QDtype::kInt8 ? DType::kI8 : DType::kU8;
    if (w.qscheme == QScheme::kPerGroup) {
      L.transposed = true;
      L.weight_shape = {in, out};
      L.scale_shape = {in / g, out};
    } else {
      L.weight_shape = {out, in};
      L.scale_shape = w.qscheme == QScheme::kPerTensor ? std::vector<uint64_t>{} : std::vector<uint64_t>{out};
    }
    L.zp_shape = L.scale_shape;
  } else if (is_4bit_int(w.dtype)) {
    // Pack_4_bits (pack.py): per_group transposes to [in, out] then packs 8
    // codes per int32 along the last axis, zero-padding the last word.
    if (w.scale_format != ScaleFormat::kFloat) unsupported(item, "integer weights need float scales");
    // Quark's exporter zero-pads the packed axis, but its importer sizes the
    // packed weight / zero point as out // 8 (pack.py
    // PackMethod._infer_scale_zero_point_shape raises for per-channel, and
    // Pack_4_bits._infer_tensor_shape floors for per-group), so a layer whose
    // out_features is not a multiple of 8 cannot be loaded back by Quark or
    // by transformers' quark integration. Refuse to write it.
    if (!reading && out % 8 != 0)
      unsupported(item, std::string(quant::quant_dtype_name(w.dtype)) +
                            " weights need out_features divisible by 8, got " + std::to_string(out) +
                            " (Quark's importer cannot reload the padded packing)");
    L.weight_dtype = DType::kI32;
    if (w.qscheme == QScheme::kPerGroup) {
      L.transposed = true;
      L.weight_shape = {in, ceil_div(out, 8)};
      L.scale_shape = {in / g, out};
      L.zp_shape = {in / g, ceil_div(out, 8)};
    } else {
      // Quark's unpack recovers a padded axis only from the scale's last
      // dimension (origin_packed_axis_size), which is `out` here, so a padded
      // `in` could not be read back.
      if (in % 8 != 0)
        unsupported(item, "per-channel/per-tensor int4 needs in_features divisible by 8, got " +
                              std::to_string(in) +
                              " (Quark pads the packed axis but cannot unpack it)");
      L.weight_shape = {out, in / 8};
      if (w.qscheme == QScheme::kPerChannel) {
        L.scale_shape = {out};
        L.zp_shape = {ceil_div(out, 8)};
      } else {
        L.scale_shape = {};
        L.zp_shape = {};
      }
    }
  } else if (w.dtype == QDtype::kFp4) {
    // Pack_fp4 (pack.py): two codes per byte, element 2k in the low nibble;
    // e8m0 scales [out, in / 32] (not transposed: fp4 is not in
    // PER_GROUP_INT_TRANSPOSE_DTYPES).
    if (w.qscheme != QScheme::kPerGroup || w.scale_format != ScaleFormat::kE8M0)
      unsupported(item, "fp4 weights are exported as MX: per_group with e8m0 scales");
    if (in % 2 != 0) unsupported(item, "fp4 weights need an even in_features");
    L.weight_dtype = DType::kU8;
    L.weight_shape = {out, in / 2};
    L.scale_shape = {out, in / g};
  } else if (is_fp6(w.dtype)) {
    // Pack_fp6 (pack.py, core/fp6_pack.h): four codes in three bytes along
    // the row; e8m0 scales [out, in / 32] as for fp4.
    if (w.qscheme != QScheme::kPerGroup || w.scale_format != ScaleFormat::kE8M0)
      unsupported(item, "fp6 weights are exported as MX: per_group with e8m0 scales");
    if (in % 4 != 0) unsupported(item, "fp6 weights need in_features divisible by 4");
    L.weight_dtype = DType::kU8;
    L.weight_shape = {out, in / 4 * 3};
    L.scale_shape = {out, in / g};
  } else {
    unsupported(item, std::string("weights in ") + quant::quant_dtype_name(w.dtype) +
                          " are not supported by qloom's Quark exporter yet");
  }
  return L;
}

// ---- element encoding --------------------------------------------------------------

void put_u16(std::vector<std::byte>& out, size_t i, uint16_t v) {
  out[2 * i] = static_cast<std::byte>(v & 0xFF);
  out[2 * i + 1] = static_cast<std::byte>(v >> 8);
}
void put_u32(std::vector<std::byte>& out, size_t i, uint32_t v) {
  for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<std::byte>((v >> (8 * b)) & 0xFF);
}
uint16_t get_u16(std::span<const std::byte> d, size_t i) {
  return static_cast<uint16_t>(static_cast<uint16_t>(d[2 * i]) |
                               (static_cast<uint16_t>(d[2 * i + 1]) << 8));
}
uint32_t get_u32(std::span<const std::byte> d, size_t i) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(d[4 * i + b]) << (8 * b);
  return v;
}

// Encodes `vals` (already exact in `dt`) as `dt` bytes; throws kUsage naming
// `item` when a value is not exactly representable.
std::vector<std::byte> encode_floats(const std::vector<float>& vals, DType dt, const std::string& item) {
  std::vector<std::byte> out;
  auto inexact = [&](size_t i) {
    throw Error(ErrorKind::kUsage, "", item,
                "scale #" + std::to_string(i) + " (" + std::to_string(vals[i]) +
                    ") is not exactly representable in " + std::string(dtype_name(dt)),
                "round scales to their storage dtype (quark_scale_dtype) before quantizing");
  };
  switch (dt) {
    case DType::kF32:
      out.resize(vals.size() * 4);
      for (size_t i = 0; i < vals.size(); ++i) put_u32(out, i, std::bit_cast<uint32_t>(vals[i]));
      break;
    case DType::kBF16:
      out.resize(vals.size() * 2);
      for (size_t i = 0; i < vals.size(); ++i) {
        const uint16_t h = float_to_bf16(vals[i]);
        if (std::bit_cast<uint32_t>(bf16_to_float(h)) != std::bit_cast<uint32_t>(vals[i])) inexact(i);
        put_u16(out, i, h);
      }
      break;
    case DType::kF16:
      out.resize(vals.size() * 2);
      for (size_t i = 0; i < vals.size(); ++i) {
        const uint16_t h = float_to_f16(vals[i]);
        if (std::bit_cast<uint32_t>(f16_to_float(h)) != std::bit_cast<uint32_t>(vals[i])) inexact(i);
        put_u16(out, i, h);
      }
      break;
    case DType::kU8: {  // e8m0 codes
      out.resize(vals.size());
      for (size_t i = 0; i < vals.size(); ++i) {
        const uint8_t c = float_to_e8m0(vals[i]);
        if (c == kE8M0Nan || std::bit_cast<uint32_t>(e8m0_to_float(c)) != std::bit_cast<uint32_t>(vals[i]))
          throw Error(ErrorKind::kUsage, "", item,
                      "E8M0 scale #" + std::to_string(i) + " (" + std::to_string(vals[i]) +
                          ") is not a power of two in [2^-127, 2^127]",
                      "MX scales must be exact powers of two");
        out[i] = static_cast<std::byte>(c);
      }
      break;
    }
    default:
      throw Error(ErrorKind::kInternal, "", item,
                  "no float encoding for " + std::string(dtype_name(dt)), "");
  }
  return out;
}

bool is_float_scale_dtype(DType dt) { return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16; }

float decode_float(std::span<const std::byte> d, DType dt, size_t i) {
  switch (dt) {
    case DType::kF32: return std::bit_cast<float>(get_u32(d, i));
    case DType::kBF16: return bf16_to_float(get_u16(d, i));
    case DType::kF16: return f16_to_float(get_u16(d, i));
    default: return 0.0f;
  }
}

// Codes of a 4-bit matrix [rows, cols] packed into [rows, ceil(cols / 8)]
// words, the last word zero-padded like Pack_4_bits.pack.
std::vector<int32_t> pack4_padded(const uint8_t* codes, size_t rows, size_t cols, bool is_signed,
                                  PackOrder order) {
  const size_t words = ceil_div(cols, 8);
  std::vector<int32_t> packed(rows * words);
  const size_t pcols = words * 8;
  if (pcols == cols) {
    if (is_signed)
      pack_int4(reinterpret_cast<const int8_t*>(codes), rows, cols, packed.data(), order);
    else
      pack_uint4(codes, rows, cols, packed.data(), order);
    return packed;
  }
  std::vector<uint8_t> padded(rows * pcols, 0);
  for (size_t r = 0; r < rows; ++r) std::memcpy(&padded[r * pcols], codes + r * cols, cols);
  if (is_signed)
    pack_int4(reinterpret_cast<const int8_t*>(padded.data()), rows, pcols, packed.data(), order);
  else
    pack_uint4(padded.data(), rows, pcols, packed.data(), order);
  return packed;
}

// Inverse of pack4_padded: [rows, cols] codes from [rows, ceil(cols/8)]
// words; the padding nibbles are dropped.
std::vector<uint8_t> unpack4_padded(const int32_t* words, size_t rows, size_t cols, bool is_signed,
                                    PackOrder order) {
  const size_t nw = ceil_div(cols, 8);
  const size_t pcols = nw * 8;
  std::vector<uint8_t> full(rows * pcols);
  if (is_signed)
    unpack_int4(words, rows, pcols, reinterpret_cast<int8_t*>(full.data()), order);
  else
    unpack_uint4(words, rows, pcols, full.data(), order);
  if (pcols == cols) return full;
  std::vector<uint8_t> out(rows * cols);
  for (size_t r = 0; r < rows; ++r) std::memcpy(&out[r * cols], &full[r * pcols], cols);
  return out;
}

std::vector<std::byte> words_to_bytes(const std::vector<int32_t>& w) {
  std::vector<std::byte> out(w.size() * 4);
  for (size_t i = 0; i < w.size(); ++i) put_u32(out, i, static_cast<uint32_t>(w[i]));
  return out;
}


int32_t zp_min(QDtype d) {
  switch (d) {
    case QDtype::kInt8: return -128;
    case QDtype::kInt4: return -8;
    default: return 0;
  }
}
int32_t zp_max(QDtype d) {
  switch (d) {
    case QDtype::kInt8: return 127;
    case QDtype::kUInt8: return 255;
    case QDtype::kInt4: return 7;
    default: return 15;
  }
}

}  // namespace quark_layout

using namespace quark_layout;

// ---- public: dtypes and specs ----------------------------------------------------

float round_to_dtype(float x, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16)
    throw Error(ErrorKind::kUsage, "", "", "round_to_dtype: " + std::string(dtype_name(dtype)) +
                                                " is not a float scale dtype", "");
  return quant::detail::round_to(dtype, x);
}

DType quark_scale_dtype(const QuantSpec& spec, DType model_dtype) {
  check_model_dtype(model_dtype);
  // The rules (and the Quark sources they follow) live with the quantizer,
  // which must round its scales to the same dtype; on disk an E8M0 scale is
  // its uint8 code (realquantizer.py to_e8m0_uint8).
  const DType d = quant::quark_scale_dtype(spec, model_dtype);
  return d == DType::kE8M0 ? DType::kU8 : d;  // (e5m3 scales are kU8 already)
}

std::optional<DType> quark_zero_point_dtype(const QuantSpec& spec) {
  // StaticScaledRealQuantizer registers zero_point only for INT_QUANT_DTYPES
  // (quantization/constants.py); pack_zero_point packs it with the weight's
  // PackMethod: Pack_8_bits -> int8 / uint8, Pack_4_bits -> int32 words.
  switch (spec.dtype) {
    case QDtype::kInt8: return DType::kI8;
    case QDtype::kUInt8: return DType::kU8;
    case QDtype::kInt4:
    case QDtype::kUInt4: return DType::kI32;
    default: return std::nullopt;
  }
}

std::vector<io::TensorSpec> quark_weight_specs(const std::string& module,
                                               const std::vector<uint64_t>& weight_shape,
                                               const QuantSpec& w, DType model_dtype,
                                               PackOrder order, const std::optional<QuantSpec>& w2) {
  (void)order;  // the order changes the bits, not the shapes
  if (quant::is_fp4_block_spec(w)) return fp4_block_weight_specs(module, weight_shape, w, w2);
  const WeightLayout L = weight_layout(module, weight_shape, w, model_dtype);
  std::vector<io::TensorSpec> specs;
  specs.push_back({module + ".weight", L.weight_dtype, L.weight_shape});
  specs.push_back({module + ".weight_scale", L.scale_dtype, L.scale_shape});
  if (L.zp_dtype) specs.push_back({module + ".weight_zero_point", *L.zp_dtype, L.zp_shape});
  return specs;
}

std::vector<io::TensorSpec> quark_activation_specs(const std::string& module, ActivationRole role,
                                                   const QuantSpec& spec, DType model_dtype) {
  check_model_dtype(model_dtype);
  if (spec.is_dynamic) return {};  // DynamicScaledQuantizer has no buffers
  const std::string p = role_prefix(role);
  const std::string item = module + "." + p + "_scale";
  // qparamslinear_builder.py _create_and_set_quantizer: static input/output
  // quantizers must be per_tensor (or dynamic).
  if (spec.qscheme != QScheme::kPerTensor)
    unsupported(item, "static activation quantization must be per_tensor (Quark's QParamsLinear "
                      "does not reload static per-channel/per-group activations)");
  if (spec.scale_format != ScaleFormat::kFloat || !(is_fp8(spec.dtype) || is_8bit_int(spec.dtype)))
    unsupported(item, std::string("static ") + quant::quant_dtype_name(spec.dtype) +
                          " activations are not supported (fp8 and int8/uint8 are)");
  std::vector<io::TensorSpec> specs;
  specs.push_back({item, exporter::quark_scale_dtype(spec, model_dtype), {}});
  if (auto zd = quark_zero_point_dtype(spec)) specs.push_back({module + "." + p + "_zero_point", *zd, {}});
  return specs;
}

// ---- public: packing ---------------------------------------------------------------

std::vector<ExportedTensor> pack_quantized_weight(const std::string& module, const QuantizedTensor& qt,
                                                  DType model_dtype, PackOrder order) {
  if (quant::is_fp4_block_spec(qt.spec)) return pack_fp4_block_weight(module, qt);
  const QuantSpec& w = qt.spec;
  const WeightLayout L = weight_layout(module, qt.shape, w, model_dtype);
  const std::string witem = module + ".weight";
  const uint64_t out = L.out, in = L.in;
  const uint64_t n = out * in;
  if (qt.codes.size() != n)
    throw Error(ErrorKind::kUsage, "", witem,
                "expected " + std::to_string(n) + " codes for shape " + format_shape(qt.shape) + ", got " +
                    std::to_string(qt.codes.size()),
                "");
  // Scale / zero-point counts in qloom's layout: per_tensor 1, per_channel
  // out, per_group [out, in / g].
  const uint64_t g = w.qscheme == QScheme::kPerGroup ? static_cast<uint64_t>(w.group_size) : 0;
  const uint64_t nscale = w.qscheme == QScheme::kPerTensor ? 1 : (w.qscheme == QScheme::kPerChannel ? out : out * (in / g));
  // QuantizedTensor::scale_dtype must name the storage dtype (E8M0 for MX).
  const DType want_sd = L.scale_dtype == DType::kU8 ? DType::kE8M0 : L.scale_dtype;
  if (qt.scale_dtype != want_sd)
    throw Error(ErrorKind::kUsage, "", module + ".weight_scale",
                "the QuantizedTensor's scale_dtype is " + std::string(dtype_name(qt.scale_dtype)) +
                    ", Quark stores these scales as " + std::string(dtype_name(want_sd)),
                "quantize with scale_dtype = quark_scale_dtype(spec, model dtype)");
  if (qt.scales.size() != nscale)
    throw Error(ErrorKind::kUsage, "", module + ".weight_scale",
                "expected " + std::to_string(nscale) + " scales, got " + std::to_string(qt.scales.size()), "");
  if (!L.zp_dtype || w.symmetric) {
    if (!qt.zero_points.empty() &&
        std::any_of(qt.zero_points.begin(), qt.zero_points.end(), [](int32_t z) { return z != 0; }))
      throw Error(ErrorKind::kUsage, "", module + ".weight_zero_point",
                  "zero points given for a symmetric / float spec", "leave zero_points empty");
  } else if (qt.zero_points.size() != nscale) {
    throw Error(ErrorKind::kUsage, "", module + ".weight_zero_point",
                "expected " + std::to_string(nscale) + " zero points for an asymmetric spec, got " +
                    std::to_string(qt.zero_points.size()),
                "");
  }

  std::vector<ExportedTensor> res;
  // ---- weight
  ExportedTensor wt{witem, L.weight_dtype, L.weight_shape, {}};
  if (is_fp8(w.dtype) || is_8bit_int(w.dtype)) {
    if (w.dtype == QDtype::kFp8E4M3)
      for (uint64_t i = 0; i < n; ++i)
        if ((qt.codes[i] & 0x7F) == 0x7F)
          throw Error(ErrorKind::kUsage, "", witem,
                      "code #" + std::to_string(i) + " is an fp8 e4m3 NaN", "quantize finite weights");
    if (L.transposed) {
      auto t = transpose(qt.codes.data(), out, in);
      wt.data.resize(n);
      std::memcpy(wt.data.data(), t.data(), n);
    } else {
      wt.data.resize(n);
      std::memcpy(wt.data.data(), qt.codes.data(), n);
    }
  } else if (is_4bit_int(w.dtype)) {
    const bool sgn = w.dtype == QDtype::kInt4;
    for (uint64_t i = 0; i < n; ++i) {
      const int v = sgn ? static_cast<int>(static_cast<int8_t>(qt.codes[i])) : static_cast<int>(qt.codes[i]);
      if (v < (sgn ? -8 : 0) || v > (sgn ? 7 : 15))
        throw Error(ErrorKind::kUsage, "", witem,
                    "code #" + std::to_string(i) + " = " + std::to_string(v) + " is outside the " +
                        quant::quant_dtype_name(w.dtype) + " range",
                    sgn ? "int4 codes are sign-extended bytes in [-8, 7]" : "uint4 codes are 0..15");
    }
    if (L.transposed) {
      auto t = transpose(qt.codes.data(), out, in);
      wt.data = words_to_bytes(pack4_padded(t.data(), in, out, sgn, order));
    } else {
      wt.data = words_to_bytes(pack4_padded(qt.codes.data(), out, in, sgn, order));
    }
  } else if (is_fp6(w.dtype)) {
    wt.data.resize(n / 4 * 3);
    pack_fp6(qt.codes.data(), n, reinterpret_cast<uint8_t*>(wt.data.data()));
  } else {  // fp4
    for (uint64_t i = 0; i < n; ++i)
      if (qt.codes[i] > 15)
        throw Error(ErrorKind::kUsage, "", witem,
                    "code #" + std::to_string(i) + " does not fit 4 bits", "fp4 codes are 0..15");
    std::vector<uint8_t> packed(n / 2);
    pack_nibbles_u8(qt.codes.data(), n, packed.data());
    wt.data.resize(packed.size());
    std::memcpy(wt.data.data(), packed.data(), packed.size());
  }
  res.push_back(std::move(wt));

  // ---- scales
  const std::string sitem = module + ".weight_scale";
  std::vector<float> scales = qt.scales;
  if (L.transposed && w.qscheme == QScheme::kPerGroup) scales = transpose(qt.scales.data(), out, in / g);
  res.push_back({sitem, L.scale_dtype, L.scale_shape, encode_floats(scales, L.scale_dtype, sitem)});

  // ---- zero points
  if (L.zp_dtype) {
    const std::string zitem = module + ".weight_zero_point";
    std::vector<int32_t> zp = qt.zero_points.empty() ? std::vector<int32_t>(nscale, 0) : qt.zero_points;
    for (size_t i = 0; i < zp.size(); ++i)
      if (zp[i] < zp_min(w.dtype) || zp[i] > zp_max(w.dtype))
        throw Error(ErrorKind::kUsage, "", zitem,
                    "zero point #" + std::to_string(i) + " = " + std::to_string(zp[i]) +
                        " is outside the " + quant::quant_dtype_name(w.dtype) + " range",
                    "");
    if (w.qscheme == QScheme::kPerGroup) zp = transpose(zp.data(), out, in / g);
    ExportedTensor zt{zitem, *L.zp_dtype, L.zp_shape, {}};
    if (is_8bit_int(w.dtype)) {
      zt.data.resize(zp.size());
      for (size_t i = 0; i < zp.size(); ++i) zt.data[i] = static_cast<std::byte>(static_cast<uint8_t>(zp[i]));
    } else if (w.qscheme == QScheme::kPerTensor) {
      // Pack_4_bits.pack of a 0-dim tensor: to(int32), no nibble packing.
      zt.data = words_to_bytes({zp[0]});
    } else {
      std::vector<uint8_t> codes(zp.size());
      for (size_t i = 0; i < zp.size(); ++i) codes[i] = static_cast<uint8_t>(zp[i]);
      const size_t rows = w.qscheme == QScheme::kPerGroup ? in / g : 1;
      const size_t cols = out;
      zt.data = words_to_bytes(pack4_padded(codes.data(), rows, cols, w.dtype == QDtype::kInt4, order));
    }
    res.push_back(std::move(zt));
  }
  return res;
}

std::vector<ExportedTensor> pack_activation_qparams(const std::string& module, ActivationRole role,
                                                    const QuantSpec& spec, float scale,
                                                    int32_t zero_point, DType model_dtype) {
  auto specs = quark_activation_specs(module, role, spec, model_dtype);
  std::vector<ExportedTensor> res;
  if (specs.empty()) return res;
  const io::TensorSpec& s = specs[0];
  if (!(scale > 0.0f) || !std::isfinite(scale))
    throw Error(ErrorKind::kUsage, "", s.name, "a scale must be positive and finite, got " +
                                                  std::to_string(scale), "");
  res.push_back({s.name, s.dtype, s.shape, encode_floats({scale}, s.dtype, s.name)});
  if (specs.size() > 1) {
    const io::TensorSpec& z = specs[1];
    if (zero_point < zp_min(spec.dtype) || zero_point > zp_max(spec.dtype))
      throw Error(ErrorKind::kUsage, "", z.name,
                  "zero point " + std::to_string(zero_point) + " is outside the " +
                      quant::quant_dtype_name(spec.dtype) + " range",
                  "");
    if (spec.symmetric && zero_point != 0)
      throw Error(ErrorKind::kUsage, "", z.name, "a symmetric spec has zero point 0", "");
    res.push_back({z.name, z.dtype, z.shape, {static_cast<std::byte>(static_cast<uint8_t>(zero_point))}});
  } else if (zero_point != 0) {
    throw Error(ErrorKind::kUsage, "", s.name, "float formats have no zero point", "");
  }
  return res;
}

TensorLookup index_lookup(const io::WeightIndex& index) {
  return [&index](const std::string& name) -> std::optional<io::TensorView> {
    if (index.find(name) == nullptr) return std::nullopt;
    return index.view(name);
  };
}

PackOrder pack_order_of(const nlohmann::json& qc) {
  if (auto e = qc.find("export"); e != qc.end() && e->is_object() && e->value("pack_method", "reorder") == "order")
    return PackOrder::kSequential;
  return PackOrder::kReorder;
}

}  // namespace qloom::exporter
