#include "qloom/export/quantize_job.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "qloom/core/convert.h"
#include "qloom/core/dtype.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/decoder_layout.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


// "int4 g128", "fp8 pc", "fp4 g32": what a weight becomes, for progress lines.
std::string spec_label(const quant::QuantSpec& w) {
  std::string s = quant::quant_dtype_name(w.dtype);
  if (w.qscheme == quant::QScheme::kPerGroup) s += " g" + std::to_string(w.group_size);
  else if (w.qscheme == quant::QScheme::kPerChannel) s += " pc";
  return s;
}

// Options that need the calibration engine; refused with a clear reason until it lands.
void check_supported(const QuantizeOptions& o, const quant::Selection& sel) {
  if (o.device != "cpu")
    throw Error(ErrorKind::kUnsupported, "", "--device", "qloom computes on the CPU only; got '" + o.device + "'",
                "pass --device cpu (or omit it)");
  if (o.model_export != "hf_format")
    throw Error(ErrorKind::kUnsupported, "", "--model_export", "only hf_format is written; got '" + o.model_export + "'",
                "pass --model_export hf_format");
  if (!o.quant_algo.empty())
    throw Error(ErrorKind::kUnsupported, "", "--quant_algo",
                "'" + o.quant_algo + "' needs layer-by-layer calibration, which qloom does not run yet",
                "omit --quant_algo for round-to-nearest quantization");
  if (!o.kv_cache_dtype.empty())
    throw Error(ErrorKind::kUnsupported, "", "--kv_cache_dtype",
                "an " + o.kv_cache_dtype + " KV cache needs static scales from calibration, which qloom does not run yet",
                "omit --kv_cache_dtype");
  for (const auto& c : sel.layers) {
    if (!c.spec) continue;
    for (const auto* a : {&c.spec->input, &c.spec->output}) {
      if (a->has_value() && !(*a)->is_dynamic)
        throw Error(ErrorKind::kUnsupported, "", "--quant_scheme",
                    "scheme '" + c.scheme + "' quantizes activations with static scales, which need "
                    "calibration data pushed through the model; qloom does not run calibration yet",
                    "use a weight-only or dynamic-activation scheme (int4_wo_128, uint4_wo_128, "
                    "ptpc_fp8, mxfp4, ...)");
    }
  }
}

// Quark's quantizable modules in the model's module order (embeddings, each
// layer's linears, lm_head — also when tied), for the families whose layout
// qloom knows; nullopt otherwise (the exclude list is then written as
// expanded patterns).
std::optional<std::vector<std::string>> quark_module_order(const nlohmann::json& config) {
  model::DecoderShape shape;
  try {
    shape = model::decoder_shape_from_config(config, "config.json");
  } catch (const Error&) {
    return std::nullopt;
  }
  std::vector<std::string> modules;
  for (const auto& t : model::decoder_tensors(shape)) {
    if (t.role != model::TensorRole::kEmbedding && t.role != model::TensorRole::kLinear &&
        t.role != model::TensorRole::kLmHead)
      continue;
    modules.push_back(t.name.substr(0, t.name.size() - std::string(".weight").size()));
  }
  if (shape.tie_word_embeddings) modules.push_back("lm_head");
  return modules;
}

}  // namespace

QuantizeSummary quantize_model(const QuantizeOptions& o, const ProgressFn& progress) {
  const auto t_start = Clock::now();
  QuantizeSummary sum;
  const io::ModelDir src = io::ModelDir::open(o.model_dir, /*open_weights=*/true);
  const io::WeightIndex& w = src.weights();

  std::vector<std::pair<std::string, std::vector<uint64_t>>> weights;
  for (const auto& name : w.tensor_names()) weights.emplace_back(name, w.find(name)->shape);
  const auto linears = quant::find_linear_layers(weights);

  quant::SelectionRequest req;
  req.model_type = src.model_type();
  req.quant_scheme = o.quant_scheme;
  req.layer_quant_scheme = o.layer_quant_scheme;
  req.exclude_layers = o.exclude_layers;
  const quant::Selection sel = quant::select_layers(linears, req);
  check_supported(o, sel);
  sum.warnings = sel.warnings;
  sum.exclude = sel.exclude;

  std::map<std::string, quant::LayerQuantSpec> modules;
  for (const auto& c : sel.layers) {
    if (c.spec) {
      modules[c.module] = *c.spec;
      ++sum.layers_quantized;
    } else {
      ++sum.layers_excluded;
    }
  }
  if (modules.empty())
    throw Error(ErrorKind::kUsage, o.model_dir.string(), "--exclude_layers",
                "every linear layer is excluded; nothing would be quantized",
                "relax --exclude_layers / --layer_quant_scheme");

  PackOrder order;
  if (o.pack_method == "reorder") order = PackOrder::kReorder;
  else if (o.pack_method == "order") order = PackOrder::kSequential;
  else throw Error(ErrorKind::kUsage, "", "--pack_method", "unknown pack method '" + o.pack_method + "'", "use reorder or order");

  ExportOptions eo;
  eo.overwrite = o.overwrite;
  eo.max_shard_bytes = o.max_shard_bytes;
  eo.pack_order = order;
  QuarkExporter ex(src, o.output_dir, eo);
  const DType model_dtype = ex.model_dtype();

  // Layers whose shape the Quark layout cannot hold (a group size that does
  // not divide in_features, int4 out_features not a multiple of 8): an error
  // naming them all, or excluded with a warning under --exclude_unsupported.
  std::vector<std::string> unsupported;
  std::string first_reason;
  for (auto it = modules.begin(); it != modules.end();) {
    try {
      (void)quark_weight_specs(it->first, w.find(it->first + ".weight")->shape, *it->second.weight,
                               model_dtype, order);
      ++it;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kUsage) throw;
      if (first_reason.empty()) first_reason = e.message();
      unsupported.push_back(it->first);
      it = modules.erase(it);
    }
  }
  if (!unsupported.empty()) {
    // Name them by layer-independent patterns ("*.mlp.down_proj") so the
    // suggested --exclude_layers stays short on deep models.
    std::vector<std::string> pats;
    for (const auto& m : unsupported) {
      std::string pat = m;
      const size_t layers = m.find(".layers.");
      if (layers != std::string::npos) {
        const size_t dot = m.find('.', layers + 8);
        if (dot != std::string::npos) pat = "*" + m.substr(dot);
      }
      if (std::find(pats.begin(), pats.end(), pat) == pats.end()) pats.push_back(pat);
    }
    std::string list, patterns;
    for (const auto& p : pats) {
      if (!list.empty()) list += ", ";
      list += p;
      patterns += " '" + p + "'";
    }
    if (!o.exclude_unsupported)
      throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_scheme",
                  std::to_string(unsupported.size()) + " layer(s) cannot be stored in this scheme's Quark layout (" +
                      first_reason + "): " + list,
                  "exclude them with --exclude_layers" + patterns +
                      ", or pass --exclude_unsupported to keep them in the source dtype");
    sum.warnings.push_back(std::to_string(unsupported.size()) + " layer(s) kept in the source dtype (" +
                           first_reason + "): " + list);
    sum.layers_quantized -= unsupported.size();
    sum.layers_excluded += unsupported.size();
    if (modules.empty())
      throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_scheme",
                  "no linear layer of this model fits the scheme's Quark layout", "choose another scheme");
  }
  ex.plan(plan_quark_export(w, modules));

  // Progress: weight bytes processed so far drive the ETA.
  uint64_t total_bytes = 0, done_bytes = 0;
  for (const auto& p : ex.planned())
    if (p.kind != PlannedKind::kActivation) total_bytes += w.find(p.kind == PlannedKind::kCopy ? p.name : p.module + ".weight")->nbytes();
  const size_t n_planned = ex.planned().size();
  std::vector<float> f32;
  uint64_t quantized_bytes = 0;  // output bytes of quantized modules
  size_t index = 0;
  for (const PlannedTensor& p : ex.planned()) {
    ++index;
    const auto t0 = Clock::now();
    TensorProgress tp;
    tp.index = index;
    tp.total = n_planned;
    if (p.kind == PlannedKind::kCopy) {
      const io::TensorView v = w.view(p.name);
      ex.write_plain(p.name, v);
      w.release(p.name);
      tp.name = p.name;
      tp.shape = format_shape(v.shape(), /*compact=*/true);
      tp.from = std::string(dtype_name(v.dtype()));
      tp.to = "copy";
      done_bytes += v.nbytes();
      sum.bytes_before += v.nbytes();
      sum.bytes_after += v.nbytes();
      ++sum.tensors_in;
    } else if (p.kind == PlannedKind::kQuantizedWeight) {
      const std::string name = p.module + ".weight";
      const io::TensorView v = w.view(name);
      const uint64_t rows = p.weight_shape[0], cols = p.weight_shape[1];
      f32.resize(rows * cols);
      to_f32(v.dtype(), v.data.data(), f32.data(), f32.size());
      const quant::QuantSpec& ws = p.spec;
      const DType scale_dtype = quant::quark_scale_dtype(ws, model_dtype);
      const quant::QuantizedTensor qt =
          quant::quantize_weight(f32.data(), rows, cols, ws, scale_dtype, name, model_dtype, o.threads);
      ex.write_quantized(p.module, qt);
      w.release(name);
      uint64_t out_bytes = 0;
      for (const auto& s : quark_weight_specs(p.module, p.weight_shape, ws, model_dtype, order)) out_bytes += s.nbytes();
      tp.name = name;
      tp.shape = format_shape(v.shape(), /*compact=*/true);
      tp.from = std::string(dtype_name(v.dtype()));
      tp.to = spec_label(ws);
      done_bytes += v.nbytes();
      sum.bytes_before += v.nbytes();
      sum.bytes_after += out_bytes;
      quantized_bytes += out_bytes;
      sum.params_quantized += rows * cols;
      ++sum.tensors_in;
    } else {
      throw Error(ErrorKind::kInternal, "", p.module, "static activation scales were planned without calibration");
    }
    tp.seconds = since(t0);
    const double elapsed = since(t_start);
    tp.eta_seconds = done_bytes ? elapsed * double(total_bytes - done_bytes) / double(done_bytes) : 0;
    if (progress) progress(tp);
  }

  QuarkConfigInput ci;
  ci.global = quant::find_scheme(o.quant_scheme)->linear;
  for (const auto& [pattern, scheme] : o.layer_quant_scheme) ci.layer_quant_config[pattern] = quant::find_scheme(scheme)->linear;
  ci.exclude = sel.exclude;
  ci.exclude.insert(ci.exclude.end(), unsupported.begin(), unsupported.end());
  ci.algo_config = nullptr;
  ci.quantizable_modules = quark_module_order(src.config());
  ci.min_kv_scale = o.min_kv_scale;
  ci.pack_method = o.pack_method;
  ex.finish(build_quantization_config(ci));

  sum.tensors_out = ex.output_specs().size();
  // Bits per quantized weight: everything written for quantized modules
  // (codes + scales + zero points) over their element count.
  sum.bits_per_weight = sum.params_quantized ? 8.0 * double(quantized_bytes) / double(sum.params_quantized) : 0;
  sum.seconds = since(t_start);
  return sum;
}

}  // namespace qloom::exporter
