#include "qloom/perf/precision.h"

#include <algorithm>

#include "qloom/core/error.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::perf {
namespace {

constexpr int kNativeBits = 16;  // the served model dtype (bf16 / f16)

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

// Bits per element of a linear input as the kernel reads it: the code bits,
// plus the e8m0 scale shared by an MX group. Per-tensor / per-token scales
// are one float per row or tensor and do not count per element.
double input_bits(const quant::LayerQuantSpec& l) {
  if (!l.input) return kNativeBits;
  double bits = quant::quant_dtype_bits(l.input->dtype);
  if (l.input->scale_format == quant::ScaleFormat::kE8M0 && l.input->group_size > 0)
    bits += 8.0 / double(l.input->group_size);
  return bits;
}

Precision from_scheme(const quant::SchemeDef& s) {
  Precision p;
  p.name = s.name;
  p.quant_scheme = s.name;
  p.spec = s.linear;
  p.weight_bits = quant::quant_dtype_bits(s.linear.weight->dtype);
  p.activation_bits = input_bits(s.linear);
  p.level = p.weight_bits;
  p.description = s.description;
  return p;
}

std::vector<Precision> build_table() {
  std::vector<Precision> v;
  Precision n;
  n.name = kNative;
  n.description = "no quantization: the linear keeps the model dtype";
  v.push_back(n);
  for (const std::string& name : quant::scheme_names()) v.push_back(from_scheme(quant::get_scheme(name)));
  return v;
}

}  // namespace

const std::vector<Precision>& precision_table() {
  static const std::vector<Precision> v = build_table();
  return v;
}

std::vector<std::string> precision_names() {
  std::vector<std::string> out;
  for (const Precision& p : precision_table()) out.push_back(p.name);
  return out;
}

const Precision& get_precision(std::string_view name, const std::string& flag) {
  for (const Precision& p : precision_table())
    if (p.name == name) return p;
  const auto& later = quant::quark_only_scheme_names();
  if (std::find(later.begin(), later.end(), name) != later.end())
    throw Error(ErrorKind::kUnsupported, "", flag,
                "layer precision '" + std::string(name) +
                    "' is a Quark scheme that qloom does not implement yet (pending: issue 17, wave-2 schemes)",
                "drop it from the list; available: " + join(precision_names()));
  std::string remedy;
  const auto near = quant::near_misses(name, precision_names());
  if (!near.empty()) remedy = "did you mean '" + near.front() + "'? ";
  throw Error(ErrorKind::kUsage, "", flag, "unknown layer precision '" + std::string(name) + "'",
              remedy + "known: " + join(precision_names()));
}

std::vector<Precision> parse_precision_candidates(const std::vector<std::string>& names, const std::string& flag) {
  if (names.empty())
    throw Error(ErrorKind::kUsage, "", flag, "no layer precision given", "name at least one, e.g. native fp8 int8");
  std::vector<Precision> out;
  for (const std::string& n : names) {
    const Precision& p = get_precision(n, flag);
    if (std::any_of(out.begin(), out.end(), [&](const Precision& q) { return q.name == p.name; }))
      throw Error(ErrorKind::kUsage, "", flag, "layer precision '" + n + "' is listed twice", "name it once");
    out.push_back(p);
  }
  if (std::all_of(out.begin(), out.end(), [](const Precision& p) { return p.is_native(); }))
    throw Error(ErrorKind::kUsage, "", flag, "only 'native' is listed: there is nothing to search",
                "add quantized precisions, e.g. fp8 int4_wo_128");
  return out;
}

std::vector<std::string> parse_kv_candidates(const std::vector<std::string>& names, const std::string& flag) {
  bool native = false, fp8 = false;
  for (const std::string& n : names) {
    if (n != kNative && n != "fp8")
      throw Error(ErrorKind::kUsage, "", flag, "unknown KV-cache precision '" + n + "'", "known: native, fp8");
    bool& seen = n == kNative ? native : fp8;
    if (seen) throw Error(ErrorKind::kUsage, "", flag, "KV-cache precision '" + n + "' is listed twice", "name it once");
    seen = true;
  }
  if (!native)
    throw Error(ErrorKind::kUsage, "", flag,
                names.empty() ? "no KV-cache precision given" : "fp8 alone is not a search space",
                "list 'native fp8' (the default) or 'native'; a fixed fp8 cache is --kv-cache-scheme fp8");
  std::vector<std::string> out{kNative};
  if (fp8) out.push_back("fp8");
  return out;
}

uint64_t stored_weight_bits(const Precision& p, uint64_t rows, uint64_t cols, DType model_dtype) {
  if (p.is_native()) return rows * cols * uint64_t(dtype_bits(model_dtype));
  const auto specs = exporter::quark_weight_specs("weight", {rows, cols}, *p.spec->weight, model_dtype,
                                                  PackOrder::kReorder, p.spec->weight_stage2);
  uint64_t bytes = 0;
  for (const io::TensorSpec& s : specs) bytes += s.nbytes();
  return bytes * 8;
}

std::string unfit_reason(const Precision& p, uint64_t rows, uint64_t cols, DType model_dtype) {
  if (p.is_native()) return {};
  try {
    (void)exporter::quark_weight_specs("weight", {rows, cols}, *p.spec->weight, model_dtype, PackOrder::kReorder,
                                       p.spec->weight_stage2);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kUsage) throw;
    return e.message();
  }
  return {};
}

double nominal_bits_per_weight(const Precision& p, DType model_dtype) {
  constexpr uint64_t kSide = 4096;
  return double(stored_weight_bits(p, kSide, kSide, model_dtype)) / double(kSide * kSide);
}

}  // namespace qloom::perf
