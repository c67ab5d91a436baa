// The layer-precision candidates of `qloom perf`'s mixed-precision search
// (quark-quant-perf's --layer-precision-candidates / --kv-cache-precision-
// candidates): "native" (the linear stays in the model dtype) and every
// scheme of qloom's scheme registry (quant/scheme_registry.h) under its Quark
// --quant_scheme name, each with what the search models:
//   weight_bits      bits of one weight code (native: 16, the served dtype)
//   activation_bits  bits per element of the linear's input as the kernel reads
//                    it (16 when the scheme leaves activations unquantized;
//                    MX adds its e8m0 scale per group)
//   level            the precision hierarchy: a unit at a higher level is
//                    "at least as precise"; level = weight_bits (native 16 >
//                    8-bit formats > 4-bit formats), so schemes of one weight
//                    width are interchangeable for the hierarchy rule.
// Stored bits per weight (codes + scales + zero points) come from the Quark
// hf_format layout itself (exporter::quark_weight_specs), for one weight
// shape or nominally for a large [4096, 4096] weight.
//
// Errors (qloom::Error, naming `flag`): an unknown name is kUsage with the
// nearest names; a Quark scheme qloom has not implemented yet (mxfp4_fp8,
// mxfp6_e2m3, nvfp4, ...) is kUnsupported saying it is pending (issue 17);
// duplicates and empty lists are kUsage. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::perf {

inline constexpr const char* kNative = "native";

struct Precision {
  std::string name;                             // "native", "fp8", "int4_wo_128", ...
  std::string quant_scheme;                     // Quark --quant_scheme; "" for native
  std::optional<quant::LayerQuantSpec> spec;    // nullopt for native
  int weight_bits = 16;
  double activation_bits = 16;
  int level = 16;
  std::string description;

  bool is_native() const { return !spec.has_value(); }
  // True when the scheme quantizes the linear's input (W8A8, MXFP4).
  bool quantizes_activations() const { return spec && spec->input.has_value(); }
};

// native, then the registry's schemes in registry order.
const std::vector<Precision>& precision_table();
std::vector<std::string> precision_names();

// The precision called `name`, or the errors above.
const Precision& get_precision(std::string_view name, const std::string& flag = "--layer-precision-candidates");

// Validates a --layer-precision-candidates list (order kept). Every name must
// be known (get_precision); duplicates, an empty list, or a list holding only
// "native" (nothing to search) are kUsage.
std::vector<Precision> parse_precision_candidates(const std::vector<std::string>& names,
                                                  const std::string& flag = "--layer-precision-candidates");

// Validates --kv-cache-precision-candidates: "native" and/or "fp8" (the only
// KV-cache dtype of the registry), no duplicates, and "native" must be among
// them (fp8 alone is kUsage: the search needs the unquantized cache to
// compare with; use --kv-cache-scheme for a fixed fp8 cache). Returned in
// canonical order: native first.
std::vector<std::string> parse_kv_candidates(const std::vector<std::string>& names,
                                             const std::string& flag = "--kv-cache-precision-candidates");

// Stored bits of one [rows, cols] weight quantized with `p` in a model of
// dtype `model_dtype` (bf16, f16, f32), i.e. the bytes Quark's layout writes
// for it (codes, scales, zero points) times 8. Native: rows * cols *
// dtype_bits(model_dtype). Throws kUnsupported (from the layout rules) when
// the layout cannot hold the shape — see unfit_reason.
uint64_t stored_weight_bits(const Precision& p, uint64_t rows, uint64_t cols, DType model_dtype);

// Why `p` cannot store a [rows, cols] weight in Quark's layout (e.g. int4 with
// out_features % 8 != 0, a group size that does not divide in_features), or
// "" when it can.
std::string unfit_reason(const Precision& p, uint64_t rows, uint64_t cols, DType model_dtype);

// Stored bits per weight element on a [4096, 4096] weight: the nominal figure
// of the table (int4_wo_128 in bf16: 4 + 16/128 + 4/128 = 4.15625).
double nominal_bits_per_weight(const Precision& p, DType model_dtype = DType::kBF16);

}  // namespace qloom::perf
