#include "qloom/export/compressed_tensors_scheme.h"

#include <bit>
#include <cstring>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

namespace qloom::exporter {
namespace {

using quant::QDtype;
using quant::QScheme;
using quant::QuantSpec;

[[noreturn]] void ct_unsupported(const std::string& where, const std::string& why) {
  throw Error(ErrorKind::kUnsupported, "", where, "compressed-tensors cannot express this: " + why,
              "export this model as Quark hf_format only, or quantize it with a scheme compressed-tensors "
              "supports (int4/uint4 groups or per-channel, int8, fp8, ptpc_fp8)");
}

bool is_int(QDtype d) { return d == QDtype::kInt8 || d == QDtype::kUInt8 || d == QDtype::kInt4 || d == QDtype::kUInt4; }
bool is_unsigned(QDtype d) { return d == QDtype::kUInt8 || d == QDtype::kUInt4; }

// The fields every QuantizationArgs carries, in model_dump's order.
nlohmann::ordered_json args_json(int bits, bool is_float, bool symmetric, const nlohmann::json& group_size,
                                 const std::string& strategy, bool dynamic, const nlohmann::json& observer) {
  nlohmann::ordered_json j;
  j["num_bits"] = bits;
  j["type"] = is_float ? "float" : "int";
  j["symmetric"] = symmetric;
  j["group_size"] = group_size;
  j["strategy"] = strategy;
  j["block_structure"] = nullptr;
  j["dynamic"] = dynamic;
  j["actorder"] = nullptr;
  j["scale_dtype"] = nullptr;
  // QuantizationArgs.serialize_dtype: null when symmetric; the asymmetric
  // zero points are int8 (calculate_range is signed for every int type).
  j["zp_dtype"] = symmetric ? nlohmann::json(nullptr) : nlohmann::json("torch.int8");
  j["observer"] = observer;
  j["observer_kwargs"] = nlohmann::json::object();
  return j;
}

void check_common(const QuantSpec& s, const std::string& where) {
  if (s.scale_format != quant::ScaleFormat::kFloat)
    ct_unsupported(where, "e8m0 (MX) scales; compressed-tensors' mxfp4 format has other conventions and qloom does not convert to it");
  if (!(s.scale_type.empty() || s.scale_type == "float"))
    ct_unsupported(where, "scale_type '" + s.scale_type + "' (only plain float scales are carried over)");
  if (!is_int(s.dtype) && s.dtype != QDtype::kFp8E4M3)
    ct_unsupported(where, std::string("element dtype ") + quant::quant_dtype_name(s.dtype));
}

int bits_of(const QuantSpec& s) { return quant::quant_dtype_bits(s.dtype); }

// Offset that maps a Quark code to compressed-tensors' signed range.
int code_shift(QDtype d) { return d == QDtype::kUInt4 ? 8 : d == QDtype::kUInt8 ? 128 : 0; }

int32_t signed_code(uint8_t code, QDtype d) {
  if (d == QDtype::kInt8 || d == QDtype::kInt4) return static_cast<int8_t>(code);
  return static_cast<int32_t>(code) - code_shift(d);
}

void put_bytes(std::vector<std::byte>& out, const void* p, size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}

std::vector<std::byte> ct_encode_floats(const std::vector<float>& v, DType dtype, const std::string& name) {
  std::vector<std::byte> out;
  out.reserve(v.size() * dtype_info(dtype).bits / 8);
  for (float x : v) {
    if (round_to_dtype(x, dtype) != x && !(x != x))
      throw Error(ErrorKind::kUsage, "", name, "scale " + std::to_string(x) + " is not exactly representable in " +
                                                   std::string(dtype_name(dtype)), "");
    if (dtype == DType::kF32) {
      put_bytes(out, &x, 4);
    } else if (dtype == DType::kBF16 || dtype == DType::kF16) {
      const uint16_t h = dtype == DType::kBF16 ? float_to_bf16(x) : float_to_f16(x);
      put_bytes(out, &h, 2);
    } else {
      throw Error(ErrorKind::kUnsupported, "", name, "scales stored as " + std::string(dtype_name(dtype)), "");
    }
  }
  return out;
}

std::vector<std::byte> i32_bytes(const std::vector<int32_t>& v) {
  std::vector<std::byte> out(v.size() * 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

uint64_t num_groups(const QuantSpec& w, uint64_t in) {
  if (w.qscheme == QScheme::kPerGroup) return (in + w.group_size - 1) / w.group_size;
  return 1;
}

std::vector<uint64_t> scale_shape(const QuantSpec& w, uint64_t out, uint64_t in) {
  if (w.qscheme == QScheme::kPerTensor) return {1};
  return {out, num_groups(w, in)};
}

}  // namespace

nlohmann::ordered_json ct_weight_args(const QuantSpec& w, const std::string& where) {
  check_common(w, where);
  if (w.is_dynamic) ct_unsupported(where, "dynamic weight quantization");
  const bool fl = w.dtype == QDtype::kFp8E4M3;
  if (fl && !w.symmetric) ct_unsupported(where, "asymmetric fp8 weights");
  if (is_unsigned(w.dtype) == w.symmetric && !fl)
    ct_unsupported(where, std::string(quant::quant_dtype_name(w.dtype)) +
                           (w.symmetric ? " with symmetric=true" : " with symmetric=false") +
                           " (qloom's schemes pair int with symmetric and uint with asymmetric)");
  switch (w.qscheme) {
    case QScheme::kPerTensor:
      if (bits_of(w) == 4) ct_unsupported(where, "per-tensor 4-bit weights (this converter writes groups and channels)");
      return args_json(8, fl, w.symmetric, nullptr, "tensor", false, "memoryless_minmax");
    case QScheme::kPerChannel:
      if (w.ch_axis != 0) ct_unsupported(where, "per-channel weight scales along axis " + std::to_string(w.ch_axis));
      return args_json(bits_of(w), fl, w.symmetric, nullptr, "channel", false, "memoryless_minmax");
    case QScheme::kPerGroup:
      if (fl) ct_unsupported(where, "per-group fp8 weights");
      return args_json(bits_of(w), false, w.symmetric, w.group_size, "group", false, "memoryless_minmax");
  }
  ct_unsupported(where, "unknown qscheme");
}

nlohmann::ordered_json ct_activation_args(const QuantSpec& a, const std::string& where) {
  check_common(a, where);
  if (bits_of(a) != 8) ct_unsupported(where, "activations of other than 8 bits");
  if (!a.symmetric) ct_unsupported(where, "asymmetric activations (not produced by qloom's schemes; not converted)");
  const bool fl = a.dtype == QDtype::kFp8E4M3;
  if (a.qscheme == QScheme::kPerTensor)
    return args_json(8, fl, true, nullptr, "tensor", a.is_dynamic,
                     a.is_dynamic ? nlohmann::json(nullptr) : nlohmann::json("static_minmax"));
  if (a.qscheme == QScheme::kPerChannel && a.is_dynamic && a.ch_axis == 1)
    return args_json(8, fl, true, nullptr, "token", true, nullptr);
  ct_unsupported(where, "activation scales other than per-tensor (static or dynamic) and dynamic per-token");
}

nlohmann::ordered_json ct_kv_cache_args(const QuantSpec& o, const std::string& where) {
  check_common(o, where);
  if (o.dtype != QDtype::kFp8E4M3 || o.qscheme != QScheme::kPerTensor || o.is_dynamic || !o.symmetric)
    ct_unsupported(where, "a KV-cache spec other than static per-tensor fp8_e4m3");
  return args_json(8, true, true, nullptr, "tensor", false, nullptr);
}

std::string ct_format(const QuantSpec& w, const QuantSpec* input) {
  const bool int_w = is_int(w.dtype);
  if (int_w && input) return "int-quantized";
  if (int_w) return "pack-quantized";
  if (input) return "float-quantized";
  return "naive-quantized";
}

std::vector<io::TensorSpec> ct_weight_specs(const std::string& module, uint64_t out, uint64_t in,
                                            const QuantSpec& w, DType scale_dtype, const std::string& format) {
  std::vector<io::TensorSpec> v;
  const std::vector<uint64_t> ss = scale_shape(w, out, in);
  const int b = bits_of(w);
  if (format == "pack-quantized") {
    v.push_back({module + ".weight_packed", DType::kI32, {out, (in * b + 31) / 32}});
    v.push_back({module + ".weight_scale", scale_dtype, ss});
    if (!w.symmetric) {
      if (w.qscheme == QScheme::kPerTensor) ct_unsupported(module, "asymmetric per-tensor packed weights");
      v.push_back({module + ".weight_zero_point", DType::kI32, {(out * b + 31) / 32, ss[1]}});
    }
    v.push_back({module + ".weight_shape", DType::kI64, {2}});
  } else {
    const DType wd = w.dtype == QDtype::kFp8E4M3 ? DType::kF8_E4M3 : DType::kI8;
    v.push_back({module + ".weight", wd, {out, in}});
    v.push_back({module + ".weight_scale", scale_dtype, ss});
    if (!w.symmetric) v.push_back({module + ".weight_zero_point", DType::kI8, ss});
  }
  return v;
}

std::vector<int32_t> ct_pack_rows(const std::vector<int32_t>& values, uint64_t rows, uint64_t cols, int bits) {
  if (bits != 4 && bits != 8) throw Error(ErrorKind::kInternal, "", "num_bits", "packing supports 4 and 8 bits", "");
  const uint64_t words = (cols * bits + 31) / 32;
  const uint32_t offset = 1u << (bits - 1), mask = (1u << bits) - 1;
  std::vector<int32_t> out(rows * words, 0);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t c = 0; c < cols; ++c) {
      const uint32_t u = (static_cast<uint32_t>(values[r * cols + c] + static_cast<int32_t>(offset))) & mask;
      const uint64_t bit = c * bits;
      uint32_t& word = reinterpret_cast<uint32_t&>(out[r * words + bit / 32]);
      word |= u << (bit % 32);
    }
  }
  return out;
}

std::vector<ExportedTensor> ct_weight_tensors(const std::string& module, const quant::QuantizedTensor& qt,
                                              const std::string& format) {
  const QuantSpec& w = qt.spec;
  if (qt.shape.size() != 2) throw Error(ErrorKind::kInternal, "", module, "weight is not 2-D", "");
  const uint64_t out = qt.shape[0], in = qt.shape[1];
  const DType sd = qt.scale_dtype;
  const std::vector<io::TensorSpec> specs = ct_weight_specs(module, out, in, w, sd, format);
  std::vector<ExportedTensor> t;
  for (const io::TensorSpec& s : specs) t.push_back({s.name, s.dtype, s.shape, {}});
  const int b = bits_of(w);
  size_t k = 0;
  // Codes.
  if (format == "pack-quantized") {
    std::vector<int32_t> sc(qt.codes.size());
    for (size_t i = 0; i < sc.size(); ++i) sc[i] = signed_code(qt.codes[i], w.dtype);
    t[k++].data = i32_bytes(ct_pack_rows(sc, out, in, b));
  } else if (w.dtype == QDtype::kFp8E4M3) {
    put_bytes(t[k++].data, qt.codes.data(), qt.codes.size());
  } else {
    std::vector<int8_t> sc(qt.codes.size());
    for (size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<int8_t>(signed_code(qt.codes[i], w.dtype));
    put_bytes(t[k++].data, sc.data(), sc.size());
  }
  // Scales: same element order ([out, groups] row-major) as QuantizedTensor.
  t[k].data = ct_encode_floats(qt.scales, sd, t[k].name);
  ++k;
  if (!w.symmetric) {
    const uint64_t g = num_groups(w, in);
    std::vector<int32_t> zp(qt.zero_points.size());
    for (size_t i = 0; i < zp.size(); ++i) zp[i] = qt.zero_points[i] - code_shift(w.dtype);
    if (format == "pack-quantized") {
      // pack_to_int32(zero_point, b, packed_dim=0): pack the transpose's rows.
      std::vector<int32_t> tr(zp.size());
      for (uint64_t o = 0; o < out; ++o)
        for (uint64_t j = 0; j < g; ++j) tr[j * out + o] = zp[o * g + j];
      const std::vector<int32_t> p = ct_pack_rows(tr, g, out, b);
      const uint64_t words = (out * b + 31) / 32;
      std::vector<int32_t> back(p.size());
      for (uint64_t j = 0; j < g; ++j)
        for (uint64_t wi = 0; wi < words; ++wi) back[wi * g + j] = p[j * words + wi];
      t[k].data = i32_bytes(back);
    } else {
      for (int32_t z : zp) t[k].data.push_back(static_cast<std::byte>(static_cast<int8_t>(z)));
    }
    ++k;
  }
  if (format == "pack-quantized") {
    const int64_t shape[2] = {static_cast<int64_t>(out), static_cast<int64_t>(in)};
    put_bytes(t[k++].data, shape, sizeof shape);
  }
  return t;
}

ExportedTensor ct_scalar_tensor(const std::string& name, float value, DType dtype) {
  return {name, dtype, {1}, ct_encode_floats({value}, dtype, name)};
}

}  // namespace qloom::exporter
