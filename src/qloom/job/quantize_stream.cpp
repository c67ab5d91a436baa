#include "qloom/job/quantize_stream.h"

#include <algorithm>
#include <climits>
#include <map>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/job/quantize_plan.h"
#include "qloom/export/quark_progressive.h"
#include "qloom/quant/progressive.h"
#include "qloom/quant/calib_data.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::job {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// "int4 g128", "fp8 pc", "fp4 g32": what a weight becomes, for progress lines.
std::string spec_label(const quant::QuantSpec& w) {
  std::string s = quant::quant_dtype_name(w.dtype);
  if (w.qscheme == quant::QScheme::kPerGroup) s += " g" + std::to_string(w.group_size);
  else if (w.qscheme == quant::QScheme::kPerChannel) s += " pc";
  return s;
}

std::string parent_module(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? std::string() : module.substr(0, dot);
}

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

// The amax of `module` in `table`; a module no calibration token reached (an
// MoE expert nobody routed to) takes the largest amax seen by modules of the
// same kind in its layer, else the largest in `table` (counted in `fallbacks`).
float amax_of(const std::map<std::string, float>& table, const std::string& module, uint64_t& fallbacks) {
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
}

using ScaleMap = std::map<std::pair<std::string, exporter::ActivationRole>, float>;

bool is_kv_module(const std::string& module, const std::vector<std::string>& kv_patterns) {
  for (const auto& p : kv_patterns)
    if (exporter::fnmatch(module, p)) return true;
  return false;
}

// The static scales of the activation entries of `plan` from observed amax.
// KV cache (outputs of the kv_patterns layers): per attention block, k and v
// share max(k, v, min_kv_scale). Other outputs (q_proj under
// --attention_dtype) and softmax outputs (kProbs) get their own scale.
ScaleMap scales_from_amax(const QuantizeOptions& o, const std::vector<exporter::PlannedTensor>& plan, const LayerAmax& amax,
                          const std::vector<std::string>& kv_patterns, DType model_dtype, uint64_t& fallbacks) {
  ScaleMap scales;
  std::map<std::string, quant::QuantSpec> out_specs;
  for (const auto& p : plan) {
    if (p.kind != exporter::PlannedKind::kActivation) continue;
    if (p.spec2) {  // the static global scale of a dynamic fp4 block input (input_scale_2)
      const float a = amax_of(p.role == exporter::ActivationRole::kInput ? amax.input : amax.output, p.module, fallbacks);
      scales[{p.module, p.role}] = quant::fp4_global_scale(quant::detail::round_to(model_dtype, a), *p.spec2);
      continue;
    }
    const DType sdt = quant::quark_scale_dtype(p.spec, model_dtype);
    const std::map<std::string, float>* table = &amax.input;
    if (p.role == exporter::ActivationRole::kOutput) {
      // Quark's post-RoPE export writes each cache quantizer's own scale over
      // the grouped ones (export/api.py, alias_only_cache): no k/v max, no
      // min_kv_scale.
      if (is_kv_module(p.module, kv_patterns) && !o.kv_cache_post_rope) {
        out_specs[p.module] = p.spec;
        continue;
      }
      table = &amax.output;
    } else if (p.role == exporter::ActivationRole::kProbs) {
      table = &amax.probs;
    }
    scales[{p.module, p.role}] =
        quant::static_scale_from_amax(amax_of(*table, p.module, fallbacks), p.spec, sdt, model_dtype);
  }
  const std::map<std::string, float>& output_amax = amax.output;
  std::map<std::string, float> block_scale;
  for (const auto& [module, spec] : out_specs) {
    const DType sdt = quant::quark_scale_dtype(spec, model_dtype);
    const float s = quant::static_scale_from_amax(amax_of(output_amax, module, fallbacks), spec, sdt, model_dtype);
    auto [it, inserted] = block_scale.emplace(parent_module(module), s);
    if (!inserted) it->second = std::max(it->second, s);
  }
  for (const auto& [module, spec] : out_specs) {
    const DType sdt = quant::quark_scale_dtype(spec, model_dtype);
    const float s = block_scale[parent_module(module)];
    scales[{module, exporter::ActivationRole::kOutput}] = quant::kv_group_scale(s, s, static_cast<float>(o.min_kv_scale), sdt);
  }
  return scales;
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

// Writes `value` (a tensor the pipeline changed, checkpoint form) in place
// of the source tensor `v`: same name, dtype and shape.
void write_changed(exporter::QuarkExporter& ex, const io::TensorView& v, const quant::FloatTensor& value) {
  if (value.values.size() != v.numel())
    throw Error(ErrorKind::kInternal, "", v.name(), "a changed layer tensor has another element count than the source");
  std::vector<std::byte> bytes(v.nbytes());
  from_f32(v.dtype(), value.values.data(), bytes.data(), value.values.size());
  io::TensorView changed = v;
  changed.data = bytes;
  ex.write_plain(v.name(), changed);
}

void copy_pipeline_summary(const quant::PipelineSummary& ps, QuantizeSummary& sum) {
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
}

}  // namespace

int64_t layer_key(const exporter::PlannedTensor& p) { return layer_key(p.kind == exporter::PlannedKind::kCopy ? p.name : p.module); }

bool calibration_in_bf16(const std::string& data_type, DType model_dtype) {
  if (data_type == "float32") return false;
  if (data_type == "bfloat16") return true;
  if (data_type == "auto" && model_dtype != DType::kF16) return model_dtype == DType::kBF16;
  throw Error(ErrorKind::kUnsupported, "", "--data_type",
              "calibration in float16 is not emulated by qloom (data_type '" + data_type + "')",
              "use --data_type float32 (qloom's default) or bfloat16");
}

void sort_by_layer(std::vector<exporter::PlannedTensor>& plan) {
  std::stable_sort(plan.begin(), plan.end(),
                   [](const exporter::PlannedTensor& a, const exporter::PlannedTensor& b) { return layer_key(a) < layer_key(b); });
}

namespace {

// --kv_cache_post_rope: a key projection's KV scale is observed on the keys
// after RoPE (Quark's cache integration observes them in Cache.update).
// A fused qkv_proj's one output scale also covers the values, which RoPE
// does not touch: refused rather than scaled from the keys alone.
bool post_rope_key(const QuantizeOptions& o, const exporter::PlannedTensor& p) {
  if (!o.kv_cache_post_rope) return false;
  const std::string_view m = p.module;
  if (m.ends_with(".qkv_proj"))
    throw Error(ErrorKind::kUnsupported, "", p.module,
                "--kv_cache_post_rope needs separate k_proj / v_proj (this model fuses them into qkv_proj)",
                "drop --kv_cache_post_rope: the KV scales are then observed on qkv_proj's output");
  return m.ends_with(".k_proj");
}

}  // namespace

TensorStream::TensorStream(const QuantizeOptions& o, const io::ModelDir& src, exporter::QuarkExporter& ex, bool pipelined,
                           const std::map<std::string, quant::LayerQuantSpec>& modules,
                           std::vector<std::unique_ptr<quant::AlgorithmStage>> stages, exporter::QuarkConfigInput& config,
                           QuantizeSummary& sum, const CalibrationProgressFn& calib_progress)
    : o_(o), src_(src), ex_(ex), config_(config), sum_(sum), model_dtype_(ex.model_dtype()),
      order_(pack_order_of(o)),
      fp4_(src, ex.planned(), o.quant_scheme),
      t_start_(Clock::now()) {
  const io::WeightIndex& w = src.weights();
  for (const auto& p : ex.planned())
    if (p.kind != exporter::PlannedKind::kActivation)
      total_bytes_ += w.find(p.kind == exporter::PlannedKind::kCopy ? p.name : p.module + ".weight")->nbytes();
  if (!pipelined) return;
  quant::PipelineRequest pr;
  pr.model_dir = o.model_dir;
  pipe_source_ = engine::plain_weight_source(src);
  pr.weights = pipe_source_.get();
  for (const auto& p : ex.planned()) {
    if (Fp4BlockWeights::handles(p) && !stages.empty())
      throw Error(ErrorKind::kUnsupported, "", "--quant_algo",
                  "the fp4 block schemes (nvfp4, amdfp4*) are quantized by round-to-nearest only in qloom",
                  "drop --quant_algo, or use mxfp4 / int4 schemes with an algorithm");
    // fp4 block weights (two-stage global scales over sibling linears) are
    // quantized by write_weight; RTN calibration runs on the float layer.
    if (p.kind == exporter::PlannedKind::kQuantizedWeight && layer_key(p) >= 0 && layer_key(p) != INT64_MAX &&
        !Fp4BlockWeights::handles(p)) {
      pr.weight_specs[p.module] = p.spec;
      if (const auto m = modules.find(p.module); m != modules.end() && m->second.input)
        pr.input_specs[p.module] = *m->second.input;
    }
    if (p.kind == exporter::PlannedKind::kActivation)
      (p.role == exporter::ActivationRole::kInput                           ? pr.observe_inputs
       : p.role == exporter::ActivationRole::kOutput && post_rope_key(o, p) ? pr.observe_rotated_keys
       : p.role == exporter::ActivationRole::kOutput                        ? pr.observe_outputs
                                                                  : pr.observe_probs)
          .insert(p.module);
  }
  pr.model_dtype = model_dtype_;
  pr.bf16_activations = calibration_in_bf16(o.data_type, model_dtype_);
  for (const auto& name : w.tensor_names()) pr.tensor_dtypes[name] = w.find(name)->dtype;
  pr.threads = o.threads;
  const quant::CalibrationData data = load_calibration(o, sum);
  sum.calib_source = data.source;
  pipe_ = std::make_unique<quant::CalibrationPipeline>(std::move(pr), data, std::move(stages), calib_progress);
}

TensorStream::~TensorStream() = default;

void TensorStream::add_scales(int64_t layer, const LayerAmax& amax) {
  std::vector<exporter::PlannedTensor> entries;
  for (const auto& p : ex_.planned())
    if (p.kind == exporter::PlannedKind::kActivation && layer_key(p) == layer) entries.push_back(p);
  const std::vector<std::string> kv = config_.kv_cache ? config_.kv_cache_layers : std::vector<std::string>{};
  const ScaleMap s = scales_from_amax(o_, entries, amax, kv, model_dtype_, scale_fallbacks_);
  static_scales_.insert(s.begin(), s.end());
}

// Runs the pipeline through `layer` (INT64_MAX: to the end).
void TensorStream::run_until(int64_t layer) {
  while (pipe_ && pipe_->next_layer() < pipe_->num_layers() && (!layer_out_ || layer_out_->layer < layer)) {
    layer_out_ = pipe_->run_layer(pipe_->next_layer());
    add_scales(layer_out_->layer, {layer_out_->input_amax, layer_out_->output_amax, layer_out_->probs_amax});
  }
  if (pipe_ && layer == INT64_MAX && pipe_->next_layer() == pipe_->num_layers()) finish_pipeline();
}

void TensorStream::finish_pipeline() {
  add_scales(INT64_MAX, {pipe_->finish(), {}, {}});
  layer_out_.reset();
  copy_pipeline_summary(pipe_->summary(), sum_);
  if (scale_fallbacks_)
    sum_.warnings.push_back(std::to_string(scale_fallbacks_) +
                            " activation scale(s) had no calibration tokens (e.g. MoE experts never routed to) and "
                            "took the largest amax of the same projection in their layer");
  if (!pipe_->stages().empty()) {  // null without an algorithm, as Quark writes it
    nlohmann::ordered_json algos = nlohmann::ordered_json::array();
    for (const auto& st : pipe_->stages()) algos.push_back(st->algo_config());
    config_.algo_config = algos;
  }
  pipe_.reset();
}

void TensorStream::write_copy(const exporter::PlannedTensor& p, TensorProgress& tp) {
  const io::WeightIndex& w = src_.weights();
  const io::TensorView v = w.view(p.name);
  const quant::FloatTensor* changed = nullptr;
  if (layer_out_)
    if (auto it = layer_out_->float_tensors.find(p.name); it != layer_out_->float_tensors.end()) changed = &it->second;
  // A tensor a stage changed (a norm or producer linear AWQ / SmoothQuant
  // folded scales into): its new value, in the source dtype (exact: the
  // pipeline rounded it so).
  if (changed != nullptr) write_changed(ex_, v, *changed);
  else ex_.write_plain(p.name, v);
  w.release(p.name);
  tp.name = p.name;
  tp.shape = format_shape(v.shape(), /*compact=*/true);
  tp.from = std::string(dtype_name(v.dtype()));
  tp.to = "copy";
  done_bytes_ += v.nbytes();
  sum_.bytes_before += v.nbytes();
  sum_.bytes_after += v.nbytes();
  ++sum_.tensors_in;
}

void TensorStream::write_weight(const exporter::PlannedTensor& p, TensorProgress& tp) {
  const io::WeightIndex& w = src_.weights();
  const std::string name = p.module + ".weight";
  const io::TensorView v = w.view(name);
  const uint64_t rows = p.weight_shape[0], cols = p.weight_shape[1];
  const quant::QuantSpec& ws = p.spec;
  if (p.progressive()) {  // int4_fp8: RTN, two stages (quant/progressive.h)
    f32_.resize(rows * cols);
    to_f32(v.dtype(), v.data.data(), f32_.data(), f32_.size());
    ex_.write_progressive(p.module, quant::quantize_progressive(f32_.data(), rows, cols, ws, *p.spec2, name,
                                                                model_dtype_, o_.threads));
  } else if (layer_out_ && layer_out_->weights.count(p.module)) {  // from the pipeline (GPTQ or RTN)
    ex_.write_quantized(p.module, layer_out_->weights.at(p.module));
    layer_out_->weights.erase(p.module);
  } else {
    f32_.resize(rows * cols);
    to_f32(v.dtype(), v.data.data(), f32_.data(), f32_.size());
    if (Fp4BlockWeights::handles(p)) {
      ex_.write_quantized(p.module, fp4_.quantize(p, f32_.data(), model_dtype_, o_.threads));
    } else {
      const DType scale_dtype = quant::quark_scale_dtype(ws, model_dtype_);
      ex_.write_quantized(p.module, quant::quantize_weight(f32_.data(), rows, cols, ws, scale_dtype, name,
                                                           model_dtype_, o_.threads));
    }
  }
  w.release(name);
  uint64_t out_bytes = 0;
  for (const auto& s : p.progressive()
                           ? exporter::progressive_weight_specs(p.module, p.weight_shape, ws, *p.spec2, model_dtype_, order_)
                           : exporter::quark_weight_specs(p.module, p.weight_shape, ws, model_dtype_, order_, p.spec2))
    out_bytes += s.nbytes();
  tp.name = name;
  tp.shape = format_shape(v.shape(), /*compact=*/true);
  tp.from = std::string(dtype_name(v.dtype()));
  tp.to = p.progressive() ? spec_label(*p.spec2) + " via " + spec_label(ws) : spec_label(ws);
  done_bytes_ += v.nbytes();
  sum_.bytes_before += v.nbytes();
  sum_.bytes_after += out_bytes;
  quantized_bytes_ += out_bytes;
  sum_.params_quantized += rows * cols;
  ++sum_.tensors_in;
}

void TensorStream::write_scale(const exporter::PlannedTensor& p, TensorProgress& tp) {
  const auto it = static_scales_.find({p.module, p.role});
  if (it == static_scales_.end())
    throw Error(ErrorKind::kInternal, "", p.module, "a static activation scale was planned but not calibrated");
  ex_.write_activation(p.module, p.role, it->second, 0);
  ++sum_.static_scales;
  tp.name = p.name;
  tp.shape = "[]";
  tp.from = "calibrated";
  tp.to = spec_label(p.spec);
}

void TensorStream::write_all(const ProgressFn& progress) {
  const size_t n_planned = ex_.planned().size();
  size_t index = 0;
  for (const exporter::PlannedTensor& p : ex_.planned()) {
    const auto t0 = Clock::now();
    // Layer L of the pipeline runs when its first tensor is due.
    if (pipe_ && layer_key(p) >= 0) run_until(layer_key(p));
    TensorProgress tp;
    tp.index = ++index;
    tp.total = n_planned;
    if (p.kind == exporter::PlannedKind::kCopy) write_copy(p, tp);
    else if (p.kind == exporter::PlannedKind::kQuantizedWeight) write_weight(p, tp);
    else write_scale(p, tp);
    tp.seconds = since(t0);
    const double elapsed = since(t_start_);
    tp.eta_seconds = done_bytes_ ? elapsed * double(total_bytes_ - done_bytes_) / double(done_bytes_) : 0;
    if (progress) progress(tp);
  }
  run_until(INT64_MAX);  // (normally done by the post-layer tensors)
}

}  // namespace qloom::job
