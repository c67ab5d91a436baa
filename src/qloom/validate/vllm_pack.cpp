// Rule "pack method": export.pack_method must be a value vLLM's W4A16 int4
// path accepts ("order" / "reorder"), and it must describe the bytes: vLLM
// unpacks every int32 word by the declared order (canonicalize_quark_packed_int4),
// so weights packed the other way load without error and compute garbage.
// The first int4 / uint4 weights are unpacked both ways and dequantized; the
// declared order must explain the source weight better than the other one.
#include <cmath>
#include <cstdio>

#include "qloom/core/convert.h"
#include "qloom/core/int4_pack.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/distortion.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/validate/checkpoint_pair.h"
#include "qloom/validate/vllm_rules.h"

namespace qloom::validate::vllm {

using json = nlohmann::json;

namespace {

// Weights compared per checkpoint, and the margin (dB) by which the other
// order must explain the source better before the declared one is called wrong.
constexpr size_t kModulesChecked = 3;
constexpr double kOrderMarginDb = 3.0;

std::string db(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f dB", x);
  return b;
}

bool is_int4(const quant::QuantSpec& s) {
  return s.dtype == quant::QDtype::kInt4 || s.dtype == quant::QDtype::kUInt4;
}

// SQNR of `module`'s weight read with `order` against the source weight.
double sqnr_as(const CheckpointView& v, const std::string& module, const quant::QuantSpec& spec, PackOrder order,
               const std::vector<float>& src) {
  const std::vector<float> deq =
      quant::dequantize(exporter::unpack_quantized_weight(module, spec, exporter::index_lookup(*v.weights), order), 1);
  if (deq.size() != src.size()) return -HUGE_VAL;
  return quant::measure_distortion(src.data(), deq.data(), deq.size()).sqnr_db;
}

// One module's byte check; appends a finding when the bytes contradict `pm`.
void check_module(const CheckpointView& v, const std::string& module, const quant::QuantSpec& spec,
                  const std::string& pm, RuleResult& r, std::vector<std::string>& lines) {
  const io::TensorInfo* si = v.source->find(module + ".weight");
  if (si == nullptr) return;
  std::vector<float> src(si->numel());
  to_f32(si->dtype, v.source->view(module + ".weight").data.data(), src.data(), src.size());
  const PackOrder declared = pm == "order" ? PackOrder::kSequential : PackOrder::kReorder;
  const PackOrder other = pm == "order" ? PackOrder::kReorder : PackOrder::kSequential;
  const std::string other_name = pm == "order" ? "reorder" : "order";
  const double as_declared = sqnr_as(v, module, spec, declared, src);
  const double as_other = sqnr_as(v, module, spec, other, src);
  lines.push_back(module + ": " + db(as_declared) + " read as '" + pm + "', " + db(as_other) + " as '" + other_name + "'");
  if (as_other > as_declared + kOrderMarginDb)
    r.findings.push_back({module + ".weight",
                          "its int32 words are packed '" + other_name + "' (dequantized that way it is " + db(as_other) +
                              " from the source, read as the declared '" + pm + "' only " + db(as_declared) +
                              "): vLLM unpacks by export.pack_method, loads without error and computes garbage",
                          "set quantization_config.export.pack_method to \"" + other_name + "\" or re-export"});
}

}  // namespace

RuleResult rule_pack_method(const CheckpointView& v) {
  RuleResult r{"pack_method", "export.pack_method vs the stored bytes", "", {}};
  const json& pmj = v.qc.is_object() && v.qc.contains("export") && v.qc["export"].is_object() &&
                            v.qc["export"].contains("pack_method")
                        ? v.qc["export"]["pack_method"]
                        : json();
  const std::string pm = pmj.is_string() ? pmj.get<std::string>() : pmj.dump();
  std::vector<std::pair<std::string, quant::QuantSpec>> int4;
  for (const std::string& m : v.quantized) {
    try {
      const auto spec = exporter::resolve_layer_quant_spec(v.qc, m);
      if (spec && spec->weight && is_int4(*spec->weight)) int4.emplace_back(m, *spec->weight);
    } catch (const std::exception&) {
      // An unreadable spec is reported by the scheme rule and step 5.
    }
  }
  if (int4.empty()) {
    r.checked = "no int4 / uint4 weights: export.pack_method (" + pm + ") is read only by vLLM's W4A16 int4 path";
    return r;
  }
  if (pm != "order" && pm != "reorder") {
    r.findings.push_back({"quantization_config.export.pack_method",
                          pm + ": vLLM's _is_w4a16_int4 accepts \"order\" or \"reorder\" only, so no scheme matches the " +
                              std::to_string(int4.size()) + " int4 / uint4 layers (NotImplementedError)",
                          "write \"reorder\" (Quark's default) or \"order\", whichever the weights were packed with"});
    return r;
  }
  if (v.source == nullptr || v.weights == nullptr) {
    r.checked = "export.pack_method \"" + pm + "\" is one vLLM accepts; bytes not compared (no source model given)";
    return r;
  }
  std::vector<std::string> lines;
  for (size_t i = 0; i < int4.size() && i < kModulesChecked; ++i) {
    try {
      check_module(v, int4[i].first, int4[i].second, pm, r, lines);
    } catch (const std::exception& e) {
      r.findings.push_back({int4[i].first + ".weight", "cannot be unpacked as '" + pm + "': " + describe_error(e),
                            "re-export the layer"});
    }
  }
  r.checked = "export.pack_method \"" + pm + "\" matches the stored int4 words (" +
              (lines.empty() ? std::string("no source weight to compare") : lines.front()) +
              (lines.size() > 1 ? "; " + std::to_string(lines.size() - 1) + " more agree" : "") + ")";
  return r;
}

}  // namespace qloom::validate::vllm
