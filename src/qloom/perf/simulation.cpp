#include "qloom/perf/simulation.h"

#include <chrono>
#include <mutex>
#include <set>

#include "qloom/core/error.h"
#include "qloom/engine/model.h"
#include "qloom/engine/weight_source.h"
#include "qloom/quant/progressive.h"
#include "qloom/quant/activation_observer.h"
#include "qloom/quant/calib_data.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "qloom/quant/weight_overlay.h"

namespace qloom::perf {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string parent_module(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? std::string() : module.substr(0, dot);
}

// Linear modules of the model matched by Quark's KV layer patterns.
std::set<std::string> kv_modules(const io::ModelDir& dir, const PartitionPlan& plan) {
  std::set<std::string> out;
  for (const std::string& name : dir.weights().tensor_names()) {
    if (!name.ends_with(".weight") || dir.weights().find(name)->shape.size() != 2) continue;
    const std::string module = name.substr(0, name.size() - 7);
    for (const std::string& p : plan.geometry.kv_layer_patterns)
      if (quant::module_matches(p, module)) out.insert(module);
  }
  return out;
}

// The module's shape from the plan's units; kUsage when it is not a unit linear.
const UnitModule& unit_module(const PartitionPlan& plan, const std::string& module) {
  for (const SearchUnit& u : plan.units)
    for (const UnitModule& m : u.modules)
      if (m.module == module) return m;
  throw Error(ErrorKind::kUsage, "", module, "not a searched linear of this model",
              "assign precisions only to the modules of the partition plan's units");
}

// Activation fake-quant of one linear: its spec and, when static, the scale.
struct ActSim {
  quant::QuantSpec spec;
  std::optional<quant::StaticQParams> qparams;
};

// The observed amax of `module`; a linear no window reached (an MoE expert no
// token was routed to) takes the largest amax of the same projection in its
// layer, else the largest of all — the exporter's calibration fallback.
float observed_amax(const std::map<std::string, float>& table, const std::string& module) {
  if (const auto it = table.find(module); it != table.end()) return it->second;
  const int layer = layer_of(module);
  const std::string leaf = module.substr(module.rfind('.') + 1);
  float same = -1.0f, any = 0.0f;
  for (const auto& [m, a] : table) {
    any = std::max(any, a);
    if (layer >= 0 && layer_of(m) == layer && m.substr(m.rfind('.') + 1) == leaf) same = std::max(same, a);
  }
  return same >= 0.0f ? same : any;
}

std::map<std::string, ActSim> input_sims(const PartitionPlan& plan, const Reference& ref, const Assignment& a) {
  std::map<std::string, ActSim> sims;
  const DType dt = plan.geometry.model_dtype;
  for (const auto& [module, p] : a.modules) {
    if (!p->quantizes_activations()) continue;
    const quant::QuantSpec& in = *p->spec->input;
    ActSim s{in, std::nullopt};
    if (!in.is_dynamic) {
      const float amax = observed_amax(ref.input_amax(), module);
      s.qparams = quant::StaticQParams{
          quant::static_scale_from_amax(amax, in, quant::quark_scale_dtype(in, dt), dt), 0};
    }
    sims.emplace(module, std::move(s));
  }
  return sims;
}

// fp8 KV cache: per attention block one scale, max over its k and v (Quark's
// kv_cache_group with min_kv_scale 0).
std::map<std::string, ActSim> kv_sims(const PartitionPlan& plan, const Reference& ref) {
  const quant::QuantSpec spec = quant::kv_cache_spec("fp8");
  const DType dt = plan.geometry.model_dtype;
  const DType sdt = quant::quark_scale_dtype(spec, dt);
  std::map<std::string, float> block;
  for (const auto& [module, amax] : ref.output_amax()) {
    const float s = quant::static_scale_from_amax(amax, spec, sdt, dt);
    auto [it, inserted] = block.emplace(parent_module(module), s);
    if (!inserted) it->second = std::max(it->second, s);
  }
  std::map<std::string, ActSim> sims;
  for (const auto& [module, amax] : ref.output_amax()) {
    const float s = block[parent_module(module)];
    sims.emplace(module, ActSim{spec, quant::StaticQParams{quant::kv_group_scale(s, s, 0.0f, sdt), 0}});
  }
  return sims;
}

void overlay_quantized(const engine::WeightSource& base, const PartitionPlan& plan, const Assignment& a,
                       unsigned threads, quant::WeightOverlay& overlay) {
  const DType dt = plan.geometry.model_dtype;
  for (const auto& [module, p] : a.modules) {
    const UnitModule& m = unit_module(plan, module);
    if (p->is_native()) continue;
    const std::string name = module + ".weight";
    const std::vector<float> w = quant::host_tensor_f32(base.load(name), name);
    const quant::QuantSpec& ws = *p->spec->weight;
    if (p->spec->weight_stage2) {  // progressive (int4_fp8)
      const quant::ProgressiveTensor pt =
          quant::quantize_progressive(w.data(), m.rows, m.cols, ws, *p->spec->weight_stage2, name, dt, threads);
      overlay.set_f32(name, {int64_t(m.rows), int64_t(m.cols)}, quant::dequantize_progressive(pt, threads));
      continue;
    }
    const quant::QuantizedTensor qt =
        quant::quantize_weight(w.data(), m.rows, m.cols, ws, quant::quark_scale_dtype(ws, dt), name, dt, threads);
    overlay.set_f32(name, {int64_t(m.rows), int64_t(m.cols)}, quant::dequantize(qt, threads));
  }
}

}  // namespace

std::shared_ptr<const Reference> Reference::build(const io::ModelDir& dir, const PartitionPlan& plan,
                                                  const WindowOptions& options) {
  const auto t0 = Clock::now();
  auto ref = std::make_shared<Reference>();
  ref->options_ = options;
  const quant::CalibrationData data =
      quant::load_calibration_data(dir.path(), {options.dataset, options.windows, options.seq_len});
  ref->windows_ = data.samples;
  ref->source_ = data.source;
  std::set<std::string> inputs, outputs = kv_modules(dir, plan);
  for (const SearchUnit& u : plan.units)
    for (const UnitModule& m : u.modules) inputs.insert(m.module);
  engine::LoadOptions lo;
  lo.threads = options.threads;
  const auto model = engine::Model::load(dir.path(), lo);
  ref->vocab_ = model->config().vocab_size;
  std::mutex mu;  // hooks may run on several threads (MoE experts)
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& s, float* x, int64_t rows, int64_t cols) {
    if (!inputs.count(s.module)) return;
    const float a = quant::abs_max(x, rows * cols);
    std::lock_guard<std::mutex> lock(mu);
    quant::record_amax(ref->input_amax_, s.module, a);
  };
  hooks.linear_output = [&](const engine::LinearSite& s, float* y, int64_t rows, int64_t cols) {
    if (!outputs.count(s.module)) return;
    const float a = quant::abs_max(y, rows * cols);
    std::lock_guard<std::mutex> lock(mu);
    quant::record_amax(ref->output_amax_, s.module, a);
  };
  size_t longest = 0;
  for (const auto& w : ref->windows_) longest = std::max(longest, w.size());
  auto cache = model->new_cache(int64_t(longest));
  for (const auto& w : ref->windows_) {
    cache->clear();
    ref->logits_.push_back(model->forward(w, *cache, false, &hooks));
  }
  ref->seconds_ = since(t0);
  return ref;
}

int64_t Reference::scored_tokens() const {
  int64_t n = 0;
  for (const auto& w : windows_) n += w.empty() ? 0 : int64_t(w.size()) - 1;
  return n;
}

SimulationResult simulate(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                          const Assignment& assignment, unsigned threads, const StopFn& stop) {
  const auto t0 = Clock::now();
  SimulationResult r;
  const auto base = engine::plain_weight_source(dir);
  quant::WeightOverlay overlay(*base);
  overlay_quantized(*base, plan, assignment, threads, overlay);
  const std::map<std::string, ActSim> in = input_sims(plan, ref, assignment);
  const std::map<std::string, ActSim> out = assignment.kv_fp8 ? kv_sims(plan, ref) : std::map<std::string, ActSim>{};
  engine::LoadOptions lo;
  lo.threads = threads;
  const auto model = engine::Model::load(dir.path(), lo, &overlay);
  engine::ForwardHooks hooks;
  if (!in.empty())
    hooks.linear_input = [&](const engine::LinearSite& s, float* x, int64_t rows, int64_t cols) {
      if (const auto it = in.find(s.module); it != in.end())
        quant::fake_quantize_activation(x, rows, cols, it->second.spec, it->second.qparams);
    };
  if (!out.empty())
    hooks.linear_output = [&](const engine::LinearSite& s, float* y, int64_t rows, int64_t cols) {
      if (const auto it = out.find(s.module); it != out.end())
        quant::fake_quantize_activation(y, rows, cols, it->second.spec, it->second.qparams);
    };
  eval::KldStats stats;
  const int64_t vocab = ref.vocab();
  size_t longest = 1;
  for (const auto& w : ref.windows()) longest = std::max(longest, w.size());
  auto cache = model->new_cache(int64_t(longest));
  for (size_t i = 0; i < ref.windows().size(); ++i) {
    if (stop && stop()) {
      r.stopped = true;
      break;
    }
    const std::vector<int32_t>& toks = ref.windows()[i];
    cache->clear();
    const std::vector<float> lq = model->forward(toks, *cache, false, &hooks);
    const std::vector<float>& lb = ref.base_logits(i);
    for (size_t t = 1; t < toks.size(); ++t) {
      const size_t row = (t - 1) * size_t(vocab);
      stats.add(lb.data() + row, lq.data() + row, vocab, toks[t]);
    }
    ++r.windows_done;
  }
  r.summary = eval::summarize(stats);
  r.seconds = since(t0);
  return r;
}

}  // namespace qloom::perf
