// Reading Quark-layout tensors back (quark_tensors.h: logical_weight_shape,
// unpack_quantized_weight, unpack_activation_qparams): the inverse of the
// packing in quark_tensors.cpp, with typed errors naming the tensor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/core/format.h"
#include "qloom/core/fp6_pack.h"
#include "qloom/export/fp4_block_tensors.h"
#include "qloom/export/quark_layout.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/export/tensor_lookup.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::exporter {

using namespace quark_layout;
using quant::QDtype;
using quant::QScheme;
using quant::QuantizedTensor;
using quant::QuantSpec;
using quant::ScaleFormat;

// ---- public: unpacking -------------------------------------------------------------

namespace {



// Float scales in any float dtype; numel must match; shapes compared by the
// caller's accepted alternatives.
std::vector<float> read_float_scales(const io::TensorView& v, uint64_t expected_numel) {
  if (!is_float_scale_dtype(v.dtype()))
    tensor_layout_error(v.name(), "scales must be F32, BF16 or F16, got " + std::string(dtype_name(v.dtype())));
  if (v.numel() != expected_numel)
    tensor_layout_error(v.name(), "expected " + std::to_string(expected_numel) + " scales, got shape " +
                               format_shape(v.shape()));
  std::vector<float> out(expected_numel);
  for (uint64_t i = 0; i < expected_numel; ++i) out[i] = decode_float(v.data, v.dtype(), i);
  return out;
}

bool shape_is_one_of(const std::vector<uint64_t>& s, std::initializer_list<std::vector<uint64_t>> alts) {
  for (const auto& a : alts)
    if (s == a) return true;
  return false;
}

}  // namespace

std::pair<uint64_t, uint64_t> logical_weight_shape(const std::string& module, const QuantSpec& spec,
                                                   const TensorLookup& lookup) {
  const io::TensorView wv = need_tensor(lookup, module + ".weight");
  const io::TensorView sv = need_tensor(lookup, module + ".weight_scale");
  if (wv.shape().size() != 2) tensor_layout_error(wv.name(), "expected a 2-D tensor, got " + format_shape(wv.shape()));
  uint64_t out = 0, in = 0;
  if (is_fp8(spec.dtype) || (is_8bit_int(spec.dtype) && spec.qscheme != QScheme::kPerGroup)) {
    out = wv.shape()[0];
    in = wv.shape()[1];
  } else if (is_8bit_int(spec.dtype)) {
    in = wv.shape()[0];
    out = wv.shape()[1];
  } else if (is_4bit_int(spec.dtype) && spec.qscheme == QScheme::kPerGroup) {
    in = wv.shape()[0];
    // Pack_4_bits.unpack(origin_packed_axis_size = scale.shape[-1]).
    if (sv.shape().size() != 2) tensor_layout_error(sv.name(), "expected [in/g, out], got " + format_shape(sv.shape()));
    out = sv.shape()[1];
  } else if (is_4bit_int(spec.dtype)) {
    out = wv.shape()[0];
    in = wv.shape()[1] * 8;
  } else if (spec.dtype == QDtype::kFp4) {
    out = wv.shape()[0];
    in = wv.shape()[1] * 2;
  } else if (is_fp6(spec.dtype)) {
    if (wv.shape()[1] % 3 != 0) tensor_layout_error(wv.name(), "packed fp6 rows hold a multiple of 3 bytes, got " + format_shape(wv.shape()));
    out = wv.shape()[0];
    in = wv.shape()[1] / 3 * 4;
  } else {
    unsupported(wv.name(), std::string("weights in ") + quant::quant_dtype_name(spec.dtype) +
                               " are not supported");
  }
  return {out, in};
}

QuantizedTensor unpack_quantized_weight(const std::string& module, const QuantSpec& spec,
                                        const TensorLookup& lookup, PackOrder order,
                                        const std::optional<QuantSpec>& spec2) {
  if (quant::is_fp4_block_spec(spec)) return unpack_fp4_block_weight(module, spec, spec2, lookup);
  const io::TensorView wv = need_tensor(lookup, module + ".weight");
  const io::TensorView sv = need_tensor(lookup, module + ".weight_scale");
  if (wv.shape().size() != 2) tensor_layout_error(wv.name(), "expected a 2-D tensor, got " + format_shape(wv.shape()));
  const uint64_t g = spec.qscheme == QScheme::kPerGroup ? static_cast<uint64_t>(std::max(spec.group_size, 1)) : 0;

  const auto [out, in] = logical_weight_shape(module, spec, lookup);
  // Any float model dtype gives the same shapes; bf16 is a placeholder.
  const WeightLayout L = weight_layout(module, {out, in}, spec, DType::kBF16, /*reading=*/true);
  expect_tensor_layout(wv, L.weight_dtype, L.weight_shape);
  if (wv.nbytes() != dtype_storage_bytes(L.weight_dtype, numel_of(L.weight_shape)).value_or(0))
    tensor_layout_error(wv.name(), "byte size does not match dtype and shape");

  QuantizedTensor qt;
  qt.spec = spec;
  qt.shape = {out, in};
  qt.scale_dtype = spec.scale_format == ScaleFormat::kE8M0 ? DType::kE8M0 : sv.dtype();
  const uint64_t n = out * in;
  qt.codes.resize(n);
  if (is_fp8(spec.dtype) || is_8bit_int(spec.dtype)) {
    const auto* b = reinterpret_cast<const uint8_t*>(wv.data.data());
    if (L.transposed) {
      auto t = transpose(b, in, out);
      qt.codes = std::move(t);
    } else {
      std::memcpy(qt.codes.data(), b, n);
    }
  } else if (is_4bit_int(spec.dtype)) {
    const bool sgn = spec.dtype == QDtype::kInt4;
    std::vector<int32_t> words(numel_of(L.weight_shape));
    for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<int32_t>(get_u32(wv.data, i));
    if (L.transposed) {
      auto t = unpack4_padded(words.data(), in, out, sgn, order);
      qt.codes = transpose(t.data(), in, out);
    } else {
      qt.codes = unpack4_padded(words.data(), out, in, sgn, order);
    }
  } else if (is_fp6(spec.dtype)) {
    unpack_fp6(reinterpret_cast<const uint8_t*>(wv.data.data()), n, qt.codes.data());
  } else {  // fp4
    unpack_nibbles_u8(reinterpret_cast<const uint8_t*>(wv.data.data()), n, qt.codes.data());
  }

  // Scales.
  const uint64_t nscale = numel_of(L.scale_shape);
  if (spec.scale_format == ScaleFormat::kE8M0) {
    expect_tensor_layout(sv, DType::kU8, L.scale_shape);
    qt.scales.resize(nscale);
    for (uint64_t i = 0; i < nscale; ++i) {
      const uint8_t c = static_cast<uint8_t>(sv.data[i]);
      if (c == kE8M0Nan) tensor_layout_error(sv.name(), "e8m0 scale #" + std::to_string(i) + " is NaN (0xFF)");
      qt.scales[i] = e8m0_to_float(c);
    }
  } else {
    if (spec.qscheme == QScheme::kPerTensor) {
      if (!shape_is_one_of(sv.shape(), {{}, {1}}))
        tensor_layout_error(sv.name(), "expected a scalar scale, got shape " + format_shape(sv.shape()));
    } else if (spec.qscheme == QScheme::kPerChannel) {
      if (!shape_is_one_of(sv.shape(), {{out}, {out, 1}}))
        tensor_layout_error(sv.name(), "expected shape [" + std::to_string(out) + "], got " + format_shape(sv.shape()));
    } else if (sv.shape() != L.scale_shape) {
      tensor_layout_error(sv.name(), "expected shape " + format_shape(L.scale_shape) + ", got " + format_shape(sv.shape()));
    }
    qt.scales = read_float_scales(sv, nscale);
    if (L.transposed) qt.scales = transpose(qt.scales.data(), in / g, out);
  }

  // Zero points.
  if (L.zp_dtype) {
    auto zv = lookup(module + ".weight_zero_point");
    if (!zv && !spec.symmetric)
      throw Error(ErrorKind::kNotFound, "", module + ".weight_zero_point",
                  "an asymmetric weight needs its zero points", "");
    if (zv) {
      expect_tensor_layout(*zv, *L.zp_dtype, L.zp_shape);
      std::vector<int32_t> zp(nscale);
      if (is_8bit_int(spec.dtype)) {
        for (uint64_t i = 0; i < nscale; ++i) {
          const uint8_t b = static_cast<uint8_t>(zv->data[i]);
          zp[i] = spec.dtype == QDtype::kInt8 ? static_cast<int32_t>(static_cast<int8_t>(b)) : b;
        }
      } else if (spec.qscheme == QScheme::kPerTensor) {
        zp[0] = static_cast<int32_t>(get_u32(zv->data, 0));
      } else {
        const size_t rows = spec.qscheme == QScheme::kPerGroup ? in / g : 1;
        std::vector<int32_t> words(numel_of(L.zp_shape));
        for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<int32_t>(get_u32(zv->data, i));
        auto codes = unpack4_padded(words.data(), rows, out, spec.dtype == QDtype::kInt4, order);
        for (size_t i = 0; i < codes.size(); ++i)
          zp[i] = spec.dtype == QDtype::kInt4 ? static_cast<int32_t>(static_cast<int8_t>(codes[i]))
                                               : static_cast<int32_t>(codes[i]);
      }
      if (spec.qscheme == QScheme::kPerGroup) zp = transpose(zp.data(), in / g, out);
      if (spec.symmetric) {
        for (size_t i = 0; i < zp.size(); ++i)
          if (zp[i] != 0)
            tensor_layout_error(zv->name(), "zero point #" + std::to_string(i) + " = " + std::to_string(zp[i]) +
                                         " in a symmetric spec (must be 0)");
      } else {
        qt.zero_points = std::move(zp);
      }
    }
  }
  return qt;
}

std::optional<ActivationQParams> unpack_activation_qparams(const std::string& module, ActivationRole role,
                                                           const TensorLookup& lookup) {
  const std::string p = role_prefix(role);
  auto sv = lookup(module + "." + p + "_scale");
  if (!sv) return std::nullopt;
  ActivationQParams q;
  q.scale = read_float_scales(*sv, 1)[0];
  if (auto zv = lookup(module + "." + p + "_zero_point")) {
    if (zv->numel() != 1) tensor_layout_error(zv->name(), "expected a scalar zero point, got " + format_shape(zv->shape()));
    switch (zv->dtype()) {
      case DType::kI8: q.zero_point = static_cast<int8_t>(static_cast<uint8_t>(zv->data[0])); break;
      case DType::kU8: q.zero_point = static_cast<uint8_t>(zv->data[0]); break;
      case DType::kI32: q.zero_point = static_cast<int32_t>(get_u32(zv->data, 0)); break;
      default: tensor_layout_error(zv->name(), "zero points must be I8, U8 or I32, got " + std::string(dtype_name(zv->dtype())));
    }
  }
  return q;
}

}  // namespace qloom::exporter
