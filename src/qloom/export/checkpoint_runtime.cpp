#include "qloom/export/checkpoint_runtime.h"

#include <cstring>
#include <unordered_map>

#include "qloom/core/error.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::exporter {
namespace {

constexpr std::string_view kWeightSuffix = ".weight";

// Activation quantization of one linear: spec + the checkpoint's static qparams.
struct ActivationSim {
  quant::QuantSpec spec;
  std::optional<quant::StaticQParams> qparams;
};
struct ModuleSim {
  std::optional<ActivationSim> input, output;
};
using SimMap = std::unordered_map<std::string, ModuleSim>;

// A Quark checkpoint: quantized weights dequantized to F32 on load (codes,
// scales and zero points exactly as stored), everything else as stored.
class QuarkWeightSource final : public engine::WeightSource {
 public:
  QuarkWeightSource(const io::ModelDir& dir, std::unordered_map<std::string, quant::QuantSpec> specs,
                    PackOrder order)
      : dir_(dir), plain_(engine::plain_weight_source(dir)), specs_(std::move(specs)), order_(order) {}

  bool contains(const std::string& name) const override { return plain_->contains(name); }

  engine::HostTensor load(const std::string& name) const override {
    if (!std::string_view(name).ends_with(kWeightSuffix)) return plain_->load(name);
    const std::string module = name.substr(0, name.size() - kWeightSuffix.size());
    const auto it = specs_.find(module);
    if (it == specs_.end()) return plain_->load(name);
    const quant::QuantizedTensor qt = unpack_quantized_weight(module, it->second, index_lookup(dir_.weights()), order_);
    engine::HostTensor t;
    t.dtype = DType::kF32;
    t.shape.assign(qt.shape.begin(), qt.shape.end());
    const std::vector<float> deq = quant::dequantize(qt, 1);
    t.bytes.resize(deq.size() * sizeof(float));
    std::memcpy(t.bytes.data(), deq.data(), t.bytes.size());
    return t;
  }

  void release(const std::string& name) const override { plain_->release(name); }

 private:
  const io::ModelDir& dir_;
  std::unique_ptr<engine::WeightSource> plain_;
  std::unordered_map<std::string, quant::QuantSpec> specs_;
  PackOrder order_;
};

std::optional<quant::StaticQParams> static_qparams(const std::string& module, ActivationRole role,
                                                   const quant::QuantSpec& spec, const TensorLookup& lookup,
                                                   const std::string& file) {
  if (spec.is_dynamic) return std::nullopt;
  const auto q = unpack_activation_qparams(module, role, lookup);
  if (!q) {
    const char* what = role == ActivationRole::kInput ? ".input_scale" : ".output_scale";
    throw Error(ErrorKind::kInvalidInput, file, module + what,
                "quantization_config gives this linear a static activation spec, but the checkpoint has no scale for it",
                "re-export the checkpoint with its calibrated scales");
  }
  return quant::StaticQParams{q->scale, q->zero_point};
}

void apply(const SimMap& sims, const engine::LinearSite& site, float* x, int64_t rows, int64_t cols, bool input) {
  const auto it = sims.find(site.module);
  if (it == sims.end()) return;
  const std::optional<ActivationSim>& a = input ? it->second.input : it->second.output;
  if (a) quant::fake_quantize_activation(x, rows, cols, a->spec, a->qparams);
}

}  // namespace

const char* runtime_name(Runtime r) { return r == Runtime::kNative ? "native" : "simulate"; }

Runtime parse_runtime(const std::string& text, const std::string& flag) {
  if (text == "simulate") return Runtime::kSimulate;
  if (text == "native") return Runtime::kNative;
  throw Error(ErrorKind::kUsage, "", flag, "\"" + text + "\" is not a runtime", "use native or simulate");
}

void CheckpointRuntime::apply_to(engine::LoadOptions& options) const {
  options.kv_cache_fp8_scales = kv_cache_fp8_scales;
}

CheckpointRuntime open_checkpoint_runtime(const io::ModelDir& dir, Runtime runtime) {
  CheckpointRuntime rt;
  rt.runtime = runtime;
  const nlohmann::json& cfg = dir.config();
  const auto qc_it = cfg.find("quantization_config");
  if (qc_it == cfg.end() || qc_it->is_null()) {
    rt.weights = engine::plain_weight_source(dir);
    rt.description = "unquantized";
    return rt;
  }
  const std::string file = (dir.path() / "config.json").string();
  const nlohmann::json& qc = *qc_it;
  if (!qc.is_object() || qc.value("quant_method", "") != "quark")
    throw Error(ErrorKind::kUnsupported, file, "quantization_config.quant_method",
                "only Quark checkpoints (quant_method \"quark\") can be evaluated",
                "evaluate the unquantized source, or export with qloom quantize");
  const PackOrder order = pack_order_of(qc);

  const io::WeightIndex& w = dir.weights();
  const TensorLookup lookup = index_lookup(w);
  std::unordered_map<std::string, quant::QuantSpec> weight_specs;
  auto sims = std::make_shared<SimMap>();
  size_t quantized = 0, act_sim = 0, kv_sim = 0;
  // Only linear layers carry Quark specs (embeddings and norms never do,
  // whatever the global config says).
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& name : w.tensor_names()) shapes.emplace_back(name, w.find(name)->shape);
  for (const quant::LinearLayer& layer : quant::find_linear_layers(shapes)) {
    const std::string& module = layer.module;
    const auto spec = resolve_layer_quant_spec(qc, module, file);
    if (!spec) continue;
    if (spec->weight && w.find(module + ".weight_scale") != nullptr) {
      weight_specs.emplace(module, *spec->weight);
      ++quantized;
    }
    ModuleSim sim;
    for (const auto* act : {&spec->input, &spec->output})
      if (*act && (*act)->is_dynamic && (*act)->qscheme == quant::QScheme::kPerTensor) rt.rows_independent = false;
    if (spec->input) {
      sim.input = ActivationSim{*spec->input, static_qparams(module, ActivationRole::kInput, *spec->input, lookup, file)};
      ++act_sim;
    }
    if (spec->output) {
      sim.output = ActivationSim{*spec->output, static_qparams(module, ActivationRole::kOutput, *spec->output, lookup, file)};
      ++kv_sim;
    }
    if (sim.input || sim.output) sims->emplace(module, std::move(sim));
  }
  rt.weights = std::make_unique<QuarkWeightSource>(dir, std::move(weight_specs), order);
  if (!sims->empty()) {
    rt.hooks.linear_input = [sims](const engine::LinearSite& s, float* x, int64_t rows, int64_t cols) {
      apply(*sims, s, x, rows, cols, true);
    };
    rt.hooks.linear_output = [sims](const engine::LinearSite& s, float* y, int64_t rows, int64_t cols) {
      apply(*sims, s, y, rows, cols, false);
    };
  }
  rt.description = "quark: " + std::to_string(quantized) + " quantized linears dequantized";
  if (act_sim) rt.description += ", " + std::to_string(act_sim) + " with simulated input quantization";
  if (kv_sim) rt.description += ", " + std::to_string(kv_sim) + " with simulated output (KV cache) quantization";
  return rt;
}

LoadedModel load_for_eval(const std::filesystem::path& model_dir, const engine::LoadOptions& options,
                          Runtime runtime) {
  LoadedModel m;
  m.dir = std::make_unique<io::ModelDir>(io::ModelDir::open(model_dir));
  m.runtime = open_checkpoint_runtime(*m.dir, runtime);
  engine::LoadOptions opts = options;
  m.runtime.apply_to(opts);
  m.model = engine::Model::load(model_dir, opts, m.runtime.weights.get());
  return m;
}

}  // namespace qloom::exporter
