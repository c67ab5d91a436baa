#include "qloom/export/quantize_job.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "qloom/core/convert.h"
#include "qloom/core/dtype.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/export/algo_config_file.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/decoder_layout.h"
#include "qloom/engine/model.h"
#include "qloom/engine/weight_source.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/pipeline.h"
#include "qloom/quant/calib_data.h"
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

// Options qloom does not run (yet): refused with a clear reason.
void check_supported(const QuantizeOptions& o) {
  if (o.device != "cpu")
    throw Error(ErrorKind::kUnsupported, "", "--device", "qloom computes on the CPU only; got '" + o.device + "'",
                "pass --device cpu (or omit it)");
  if (o.model_export != "hf_format")
    throw Error(ErrorKind::kUnsupported, "", "--model_export", "only hf_format is written; got '" + o.model_export + "'",
                "pass --model_export hf_format");
  if (!o.kv_cache_dtype.empty()) (void)quant::kv_cache_spec(o.kv_cache_dtype);  // kUsage for unknown dtypes
}

// The attention block a KV projection belongs to ("model.layers.3.self_attn"):
// Quark merges the output scales of one kv_cache_group per block.
// Layers the Quark layout cannot hold, grouped by layer-independent pattern
// ("*.mlp.down_proj", so the suggested --exclude_layers stays short on deep
// models), shape and their own reason.
struct UnfitLayers {
  std::string pattern;
  std::vector<uint64_t> shape;
  std::string reason;
  size_t count = 0;
};

std::string layer_pattern(const std::string& module) {
  const size_t layers = module.find(".layers.");
  if (layers == std::string::npos) return module;
  const size_t dot = module.find('.', layers + 8);
  return dot == std::string::npos ? module : "*" + module.substr(dot);
}

void add_unfit(std::vector<UnfitLayers>& unfit, const std::string& module,
               const std::vector<uint64_t>& shape, const std::string& reason) {
  const std::string pat = layer_pattern(module);
  for (auto& u : unfit)
    if (u.pattern == pat && u.shape == shape && u.reason == reason) {
      ++u.count;
      return;
    }
  unfit.push_back({pat, shape, reason, 1});
}

// "*.mlp.gate_proj x5 [172, 64]: int4 weights need out_features divisible by 8, ..."
std::string unfit_text(const UnfitLayers& u) {
  std::string shape;
  for (const auto d : u.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return u.pattern + (u.count > 1 ? " x" + std::to_string(u.count) : "") + " [" + shape + "]: " + u.reason;
}

std::string parent_module(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? std::string() : module.substr(0, dot);
}

using ScaleMap = std::map<std::pair<std::string, ActivationRole>, float>;

// The static scales of the activation entries of `plan` from observed amax.
// A module no calibration token reached (an MoE expert nobody routed to)
// takes the largest amax seen by modules of the same kind in its layer,
// else the largest in `table` (counted in `fallbacks`).
// KV cache: per attention block, k and v share max(k, v, min_kv_scale).
ScaleMap scales_from_amax(const QuantizeOptions& o, const std::vector<PlannedTensor>& plan,
                          const std::map<std::string, float>& input_amax,
                          const std::map<std::string, float>& output_amax, DType model_dtype, uint64_t& fallbacks) {
  auto amax_of = [&](const std::map<std::string, float>& table, const std::string& module) {
    if (auto it = table.find(module); it != table.end()) return it->second;
    ++fallbacks;
    const std::string leaf = module.substr(module.rfind('.') + 1);
    const size_t layers = module.find(".layers.");
    const std::string layer_prefix =
        layers == std::string::npos ? std::string() : module.substr(0, module.find('.', layers + 8) + 1);
    float same_layer = -1.0f, anywhere = 0.0f;
    for (const auto& [m, a] : table) {
      anywhere = std::max(anywhere, a);
      if (!layer_prefix.empty() && m.rfind(layer_prefix, 0) == 0 && m.substr(m.rfind('.') + 1) == leaf)
        same_layer = std::max(same_layer, a);
    }
    return same_layer >= 0.0f ? same_layer : anywhere;
  };
  ScaleMap scales;
  std::map<std::string, quant::QuantSpec> out_specs;
  for (const auto& p : plan) {
    if (p.kind != PlannedKind::kActivation) continue;
    const DType sdt = quant::quark_scale_dtype(p.spec, model_dtype);
    if (p.role == ActivationRole::kInput) {
      scales[{p.module, p.role}] =
          quant::static_scale_from_amax(amax_of(input_amax, p.module), p.spec, sdt, model_dtype);
    } else {
      out_specs[p.module] = p.spec;
    }
  }
  std::map<std::string, float> block_scale;
  for (const auto& [module, spec] : out_specs) {
    const DType sdt = quant::quark_scale_dtype(spec, model_dtype);
    const float s = quant::static_scale_from_amax(amax_of(output_amax, module), spec, sdt, model_dtype);
    auto [it, inserted] = block_scale.emplace(parent_module(module), s);
    if (!inserted) it->second = std::max(it->second, s);
  }
  for (const auto& [module, spec] : out_specs) {
    const DType sdt = quant::quark_scale_dtype(spec, model_dtype);
    const float s = block_scale[parent_module(module)];
    scales[{module, ActivationRole::kOutput}] = quant::kv_group_scale(s, s, static_cast<float>(o.min_kv_scale), sdt);
  }
  return scales;
}

void warn_scale_fallbacks(uint64_t fallbacks, QuantizeSummary& sum) {
  if (fallbacks)
    sum.warnings.push_back(std::to_string(fallbacks) +
                           " activation scale(s) had no calibration tokens (e.g. MoE experts never routed to) and "
                           "took the largest amax of the same projection in their layer");
}

quant::CalibrationData load_calibration(const QuantizeOptions& o, QuantizeSummary& sum) {
  quant::CalibrationRequest req;
  req.dataset = o.dataset;
  req.num_samples = o.num_calib_data;
  req.seq_len = o.seq_len;
  quant::CalibrationData data = quant::load_calibration_data(o.model_dir, req);
  for (const auto& n : data.notes) sum.warnings.push_back("calibration: " + n);
  return data;
}

// Decoder layer of a tensor or module name ("model.layers.3.mlp..." -> 3);
// the embedding sorts before layer 0, everything else after the last layer.
int64_t layer_key(const std::string& name) {
  if (name.rfind("model.embed_tokens", 0) == 0) return -1;
  const size_t at = name.find(".layers.");
  if (at == std::string::npos) return INT64_MAX;
  const size_t b = at + 8, e = name.find('.', b);
  try {
    return std::stoll(name.substr(b, e == std::string::npos ? std::string::npos : e - b));
  } catch (const std::exception&) {
    return INT64_MAX;
  }
}

int64_t layer_key(const PlannedTensor& p) { return layer_key(p.kind == PlannedKind::kCopy ? p.name : p.module); }

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

// Writes `value` (a tensor the pipeline changed, checkpoint form) in place
// of the source tensor `v`: same name, dtype and shape.
void write_changed(QuarkExporter& ex, const io::TensorView& v, const quant::FloatTensor& value) {
  if (value.values.size() != v.numel())
    throw Error(ErrorKind::kInternal, "", v.name(), "a changed layer tensor has another element count than the source");
  std::vector<std::byte> bytes(v.nbytes());
  from_f32(v.dtype(), value.values.data(), bytes.data(), value.values.size());
  io::TensorView changed = v;
  changed.data = bytes;
  ex.write_plain(v.name(), changed);
}

}  // namespace

QuantizeSummary quantize_model(const QuantizeOptions& o, const ProgressFn& progress,
                               const CalibrationProgressFn& calib_progress) {
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
  check_supported(o);
  // --quant_algo: the stages of the layer-by-layer pipeline, configured from
  // --quant_algo_config_file (unknown or unimplemented names and bad configs
  // fail here, before anything is written).
  std::vector<AlgoConfigFile> config_files;
  std::vector<std::unique_ptr<quant::AlgorithmStage>> stages =
      build_algorithm_stages(o, src.model_type(), &config_files);
  sum.warnings = sel.warnings;
  for (const auto& f : config_files) sum.algo_config_files.push_back({f.algo, f.path.string(), f.sha256});
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
  for (const auto& p : ex.swept_partials())
    sum.warnings.push_back("removed " + p.string() + ", the staging directory of an earlier run that was killed");

  // Layers whose shape the Quark layout cannot hold (a group size that does
  // not divide in_features, int4 out_features not a multiple of 8): an error
  // naming them all, or excluded with a warning under --exclude_unsupported.
  std::vector<std::string> unsupported;
  std::vector<UnfitLayers> unfit;  // by pattern, shape and reason, in model order
  for (auto it = modules.begin(); it != modules.end();) {
    const auto& shape = w.find(it->first + ".weight")->shape;
    try {
      (void)quark_weight_specs(it->first, shape, *it->second.weight, model_dtype, order);
      ++it;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kUsage) throw;
      add_unfit(unfit, it->first, shape, e.message());
      unsupported.push_back(it->first);
      it = modules.erase(it);
    }
  }
  if (!unsupported.empty()) {
    std::string list, patterns;
    std::vector<std::string> seen;
    for (const auto& u : unfit) {
      if (!list.empty()) list += "; ";
      list += unfit_text(u);
      if (std::find(seen.begin(), seen.end(), u.pattern) != seen.end()) continue;
      seen.push_back(u.pattern);
      patterns += " '" + u.pattern + "'";
    }
    if (!o.exclude_unsupported)
      throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_scheme",
                  std::to_string(unsupported.size()) + " layer(s) cannot be stored in this scheme's Quark layout: " +
                      list,
                  "exclude them with --exclude_layers" + patterns +
                      ", or pass --exclude_unsupported to keep them in the source dtype");
    sum.warnings.push_back(std::to_string(unsupported.size()) + " layer(s) kept in the source dtype: " + list);
    sum.layers_quantized -= unsupported.size();
    sum.layers_excluded += unsupported.size();
    if (modules.empty())
      throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_scheme",
                  "no linear layer of this model fits the scheme's Quark layout", "choose another scheme");
  }
  // The quantization_config first: every module's exported tensors follow
  // from it (KV layers get their output spec there), so the checkpoint and
  // its config cannot disagree.
  QuarkConfigInput ci;
  ci.global = quant::find_scheme(o.quant_scheme)->linear;
  for (const auto& [pattern, scheme] : o.layer_quant_scheme) ci.layer_quant_config[pattern] = quant::find_scheme(scheme)->linear;
  ci.exclude = sel.exclude;
  ci.exclude.insert(ci.exclude.end(), unsupported.begin(), unsupported.end());
  ci.algo_config = nullptr;
  ci.quantizable_modules = quark_module_order(src.config());
  ci.min_kv_scale = o.min_kv_scale;
  ci.pack_method = o.pack_method;
  if (!o.kv_cache_dtype.empty()) {
    ci.kv_cache = quant::kv_cache_spec(o.kv_cache_dtype);
    const quant::ModelTemplate* t = quant::find_model_template(src.model_type());
    ci.kv_cache_layers = t && !t->kv_layers.empty() ? t->kv_layers : std::vector<std::string>{"*k_proj", "*v_proj"};
  }
  const nlohmann::ordered_json qc = build_quantization_config(ci);
  const nlohmann::json qc_plain = nlohmann::json::parse(qc.dump());
  std::map<std::string, quant::LayerQuantSpec> planned_modules;
  for (const auto& c : sel.layers) {
    auto spec = resolve_layer_quant_spec(qc_plain, c.module);
    if (!spec) continue;
    if (!modules.count(c.module)) spec->weight.reset();  // excluded (or unsupported): only a KV spec remains
    if (spec->weight || (spec->input && !spec->input->is_dynamic) || (spec->output && !spec->output->is_dynamic))
      planned_modules[c.module] = *spec;
  }
  if (!o.kv_cache_dtype.empty()) {
    bool any_kv = false;
    for (const auto& [m, l] : planned_modules) any_kv = any_kv || l.output.has_value();
    if (!any_kv)
      throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--kv_cache_dtype",
                  "no linear of this model matches the KV-cache layer patterns", "omit --kv_cache_dtype");
  }
  std::vector<PlannedTensor> plan = plan_quark_export(w, planned_modules);
  // Static activation / KV scales and --quant_algo both run the
  // layer-by-layer pipeline: one decoder layer in memory at a time.
  const bool static_scales_planned = std::any_of(plan.begin(), plan.end(), [](const PlannedTensor& p) {
    return p.kind == PlannedKind::kActivation;
  });
  const bool pipelined = !stages.empty() || static_scales_planned;
  // The pipeline produces layer after layer: write in that order.
  if (pipelined)
    std::stable_sort(plan.begin(), plan.end(),
                     [](const PlannedTensor& a, const PlannedTensor& b) { return layer_key(a) < layer_key(b); });
  ex.plan(std::move(plan));
  ScaleMap static_scales;

  // --quant_algo: layer-by-layer calibration; layer L runs when its first
  // tensor is due, and its static scales come from the same pass.
  std::unique_ptr<engine::WeightSource> pipe_source;
  std::unique_ptr<quant::CalibrationPipeline> pipe;
  std::optional<quant::LayerResult> layer_out;
  uint64_t scale_fallbacks = 0;
  if (pipelined) {
    quant::PipelineRequest pr;
    pr.model_dir = o.model_dir;
    pipe_source = engine::plain_weight_source(src);
    pr.weights = pipe_source.get();
    for (const auto& p : ex.planned()) {
      if (p.kind == PlannedKind::kQuantizedWeight && layer_key(p) >= 0 && layer_key(p) != INT64_MAX)
        pr.weight_specs[p.module] = p.spec;
      if (p.kind == PlannedKind::kActivation)
        (p.role == ActivationRole::kInput ? pr.observe_inputs : pr.observe_outputs).insert(p.module);
    }
    pr.model_dtype = model_dtype;
    for (const auto& name : w.tensor_names()) pr.tensor_dtypes[name] = w.find(name)->dtype;
    pr.threads = o.threads;
    const quant::CalibrationData data = load_calibration(o, sum);
    sum.calib_source = data.source;
    pipe = std::make_unique<quant::CalibrationPipeline>(std::move(pr), data, std::move(stages), calib_progress);
  }
  auto layer_entries = [&](int64_t layer) {
    std::vector<PlannedTensor> v;
    for (const auto& p : ex.planned())
      if (p.kind == PlannedKind::kActivation && layer_key(p) == layer) v.push_back(p);
    return v;
  };
  auto run_until = [&](int64_t layer) {  // runs the pipeline through `layer` (INT64_MAX: to the end)
    while (pipe && pipe->next_layer() < pipe->num_layers() && (!layer_out || layer_out->layer < layer)) {
      layer_out = pipe->run_layer(pipe->next_layer());
      const ScaleMap s = scales_from_amax(o, layer_entries(layer_out->layer), layer_out->input_amax,
                                          layer_out->output_amax, model_dtype, scale_fallbacks);
      static_scales.insert(s.begin(), s.end());
    }
    if (pipe && layer == INT64_MAX && pipe->next_layer() == pipe->num_layers()) {
      const auto head_amax = pipe->finish();
      const ScaleMap s = scales_from_amax(o, layer_entries(INT64_MAX), head_amax, {}, model_dtype, scale_fallbacks);
      static_scales.insert(s.begin(), s.end());
      layer_out.reset();
      const quant::PipelineSummary& ps = pipe->summary();
      sum.calibrated = true;
      sum.calib_samples = ps.samples;
      sum.calib_tokens = ps.tokens;
      sum.calib_seconds = ps.seconds;
      sum.algo_linears = ps.algo_linears;
      sum.algo_fallbacks = ps.algo_fallbacks;
      sum.rtn_linears = ps.rtn_linears;
      sum.unrouted_experts = ps.unrouted_experts;
      sum.scaled_groups = ps.scaled_groups;
      sum.unscaled_groups = ps.unscaled_groups;
      sum.layer_seconds = ps.layer_seconds;
      sum.calib_activation_bytes = ps.activation_bytes;
      sum.warnings.insert(sum.warnings.end(), ps.warnings.begin(), ps.warnings.end());
      warn_scale_fallbacks(scale_fallbacks, sum);
      if (!pipe->stages().empty()) {  // null without an algorithm, as Quark writes it
        nlohmann::ordered_json algos = nlohmann::ordered_json::array();
        for (const auto& st : pipe->stages()) algos.push_back(st->algo_config());
        ci.algo_config = algos;
      }
      pipe.reset();
    }
  };

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
    if (pipe && layer_key(p) >= 0) run_until(layer_key(p));
    TensorProgress tp;
    tp.index = index;
    tp.total = n_planned;
    if (p.kind == PlannedKind::kCopy) {
      const io::TensorView v = w.view(p.name);
      const quant::FloatTensor* changed = nullptr;
      if (layer_out)
        if (auto it = layer_out->float_tensors.find(p.name); it != layer_out->float_tensors.end()) changed = &it->second;
      if (changed != nullptr) {
        // A tensor a stage changed (a norm or producer linear AWQ /
        // SmoothQuant folded scales into): its new value, in the source dtype
        // (exact: the pipeline rounded it so).
        write_changed(ex, v, *changed);
      } else {
        ex.write_plain(p.name, v);
      }
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
      const quant::QuantSpec& ws = p.spec;
      const DType scale_dtype = quant::quark_scale_dtype(ws, model_dtype);
      if (layer_out && layer_out->weights.count(p.module)) {  // from the pipeline (GPTQ or RTN)
        ex.write_quantized(p.module, layer_out->weights.at(p.module));
        layer_out->weights.erase(p.module);
      } else {
        f32.resize(rows * cols);
        to_f32(v.dtype(), v.data.data(), f32.data(), f32.size());
        const quant::QuantizedTensor qt =
            quant::quantize_weight(f32.data(), rows, cols, ws, scale_dtype, name, model_dtype, o.threads);
        ex.write_quantized(p.module, qt);
      }
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
      const auto it = static_scales.find({p.module, p.role});
      if (it == static_scales.end())
        throw Error(ErrorKind::kInternal, "", p.module, "a static activation scale was planned but not calibrated");
      ex.write_activation(p.module, p.role, it->second, 0);
      ++sum.static_scales;
      tp.name = p.module + (p.role == ActivationRole::kInput ? ".input_scale" : ".output_scale");
      tp.shape = "[]";
      tp.from = "calibrated";
      tp.to = spec_label(p.spec);
    }
    tp.seconds = since(t0);
    const double elapsed = since(t_start);
    tp.eta_seconds = done_bytes ? elapsed * double(total_bytes - done_bytes) / double(done_bytes) : 0;
    if (progress) progress(tp);
  }

  if (pipelined) {
    run_until(INT64_MAX);  // (normally done by the post-layer tensors)
    ex.finish(build_quantization_config(ci));  // now with algo_config
  } else {
    ex.finish(qc);
  }

  sum.tensors_out = ex.output_specs().size();
  // Bits per quantized weight: everything written for quantized modules
  // (codes + scales + zero points) over their element count.
  sum.bits_per_weight = sum.params_quantized ? 8.0 * double(quantized_bytes) / double(sum.params_quantized) : 0;
  sum.seconds = since(t_start);
  return sum;
}

}  // namespace qloom::exporter
