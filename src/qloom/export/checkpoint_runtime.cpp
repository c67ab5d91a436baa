#include "qloom/export/checkpoint_runtime.h"

#include <cstring>
#include <unordered_map>

#include "qloom/core/error.h"
#include "qloom/export/attention_quant.h"
#include "qloom/export/fp4_block_tensors.h"
#include "qloom/export/native_linear.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/export/quark_progressive.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::exporter {
namespace {

constexpr std::string_view kWeightSuffix = ".weight";

// Activation quantization of one linear: spec + the checkpoint's static
// qparams; for a two-stage fp4 block input (nvfp4, amdfp4_global*) its
// second stage and the global scale the checkpoint stores (input_scale_2).
struct ActivationSim {
  quant::QuantSpec spec;
  std::optional<quant::StaticQParams> qparams;
  std::optional<quant::QuantSpec> stage2;
  float global_scale = 1.0f;
};
// A quantized weight's spec and, for two-stage specs, its second stage: a
// progressive one (int4_fp8) or a scale-quant one (nvfp4, amdfp4_global*).
struct WeightSpecs {
  quant::QuantSpec weight;
  std::optional<quant::QuantSpec> stage2;
  bool progressive() const { return stage2 && !stage2->is_scale_quant; }
};
struct ModuleSim {
  std::optional<ActivationSim> input, output;
};
using SimMap = std::unordered_map<std::string, ModuleSim>;

// A linear on a native kernel: its format and static input scale.
struct NativeLinear {
  NativeFormat format;
  std::optional<quant::StaticQParams> input;
};
using NativeMap = std::unordered_map<std::string, NativeLinear>;
using WeightSpecMap = std::unordered_map<std::string, WeightSpecs>;

// A Quark checkpoint: quantized weights dequantized to F32 on load (codes,
// scales and zero points exactly as stored), or handed to a native kernel
// (load_native) for the linears in `natives`; everything else as stored.
class QuarkWeightSource final : public engine::WeightSource {
 public:
  QuarkWeightSource(const io::ModelDir& dir, WeightSpecMap specs, NativeMap natives, PackOrder order)
      : dir_(dir),
        plain_(engine::plain_weight_source(dir)),
        specs_(std::move(specs)),
        natives_(std::move(natives)),
        order_(order) {}

  bool contains(const std::string& name) const override { return plain_->contains(name); }

  engine::HostTensor load(const std::string& name) const override {
    if (!std::string_view(name).ends_with(kWeightSuffix)) return plain_->load(name);
    const std::string module = name.substr(0, name.size() - kWeightSuffix.size());
    const auto it = specs_.find(module);
    if (it == specs_.end()) return plain_->load(name);
    std::vector<uint64_t> shape;
    std::vector<float> deq;
    if (it->second.progressive()) {  // int4_fp8
      const quant::ProgressiveTensor pt = unpack_progressive_weight(module, it->second.weight, *it->second.stage2,
                                                                    index_lookup(dir_.weights()), order_);
      shape = pt.second.shape;
      deq = quant::dequantize_progressive(pt, 1);
    } else {
      const quant::QuantizedTensor qt = unpack(module, it->second);
      shape = qt.shape;
      deq = quant::dequantize(qt, 1);
    }
    engine::HostTensor t;
    t.dtype = DType::kF32;
    t.shape.assign(shape.begin(), shape.end());
    t.bytes.resize(deq.size() * sizeof(float));
    std::memcpy(t.bytes.data(), deq.data(), t.bytes.size());
    return t;
  }

  std::optional<engine::QuantLinearData> load_native(const std::string& module) const override {
    const auto it = natives_.find(module);
    if (it == natives_.end()) return std::nullopt;
    return native_linear_data(module, it->second.format, unpack(module, specs_.at(module)), it->second.input);
  }

  void release(const std::string& name) const override { plain_->release(name); }

 private:
  quant::QuantizedTensor unpack(const std::string& module, const WeightSpecs& spec) const {
    return unpack_quantized_weight(module, spec.weight, index_lookup(dir_.weights()), order_, spec.stage2);
  }

  const io::ModelDir& dir_;
  std::unique_ptr<engine::WeightSource> plain_;
  WeightSpecMap specs_;
  NativeMap natives_;
  PackOrder order_;
};

std::optional<quant::StaticQParams> static_qparams(const std::string& module, ActivationRole role,
                                                   const quant::QuantSpec& spec, const TensorLookup& lookup,
                                                   const std::string& file) {
  if (spec.is_dynamic) return std::nullopt;
  const auto q = unpack_activation_qparams(module, role, lookup);
  if (!q) {
    throw Error(ErrorKind::kInvalidInput, file, module + "." + activation_role_prefix(role) + "_scale",
                "quantization_config gives this linear a static activation spec, but the checkpoint has no scale for it",
                "re-export the checkpoint with its calibrated scales");
  }
  return quant::StaticQParams{q->scale, q->zero_point};
}

void apply(const SimMap& sims, const engine::LinearSite& site, float* x, int64_t rows, int64_t cols, bool input) {
  const auto it = sims.find(site.module);
  if (it == sims.end()) return;
  const std::optional<ActivationSim>& a = input ? it->second.input : it->second.output;
  if (!a) return;
  if (a->stage2) quant::fake_quantize_fp4_block(x, rows, cols, a->spec, a->stage2, a->global_scale);
  else quant::fake_quantize_activation(x, rows, cols, a->spec, a->qparams);
}

// The simulated input of a two-stage spec: the dynamic first stage and the
// checkpoint's static global scale <module>.input_scale_2.
ActivationSim staged_input(const std::string& module, const quant::LayerQuantSpec& spec, const TensorLookup& lookup,
                           const std::string& file) {
  ActivationSim a{*spec.input, std::nullopt, spec.input_stage2, 1.0f};
  quant::check_fp4_block_specs(*spec.input, spec.input_stage2, module + ".input_tensors");
  const auto g = unpack_global_scale(scale2_tensor_name(module, ActivationRole::kInput), lookup);
  if (!g)
    throw Error(ErrorKind::kInvalidInput, file, scale2_tensor_name(module, ActivationRole::kInput),
                "quantization_config gives this linear a two-stage input spec, but the checkpoint has no global scale",
                "re-export the checkpoint with its calibrated scales");
  a.global_scale = *g;
  return a;
}


// What open_checkpoint_runtime gathers from the checkpoint's specs.
struct Collected {
  WeightSpecMap weight_specs;  // quantized linears
  NativeMap natives;                                               // those on native kernels
  std::shared_ptr<SimMap> sims = std::make_shared<SimMap>();       // simulated activations
  size_t quantized = 0;
  bool rows_independent = true;
  // k_proj / v_proj output (KV-cache) specs: module -> layer index.
  std::unordered_map<std::string, int> kv_outputs;
};

// "model.layers.N.self_attn.{k,v}_proj" -> N, else -1.
int kv_proj_layer(const std::string& module) {
  static constexpr std::string_view kPrefix = "model.layers.";
  if (!module.starts_with(kPrefix)) return -1;
  const size_t dot = module.find('.', kPrefix.size());
  if (dot == std::string::npos) return -1;
  const std::string_view rest = std::string_view(module).substr(dot);
  if (rest != ".self_attn.k_proj" && rest != ".self_attn.v_proj") return -1;
  try {
    return std::stoi(module.substr(kPrefix.size(), dot - kPrefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

bool is_static_fp8_per_tensor(const std::optional<quant::QuantSpec>& s) {
  return s && s->dtype == quant::QDtype::kFp8E4M3 && s->qscheme == quant::QScheme::kPerTensor && !s->is_dynamic;
}

// One linear's specs into `c`: its weight (dequantized or native) and its
// simulated input / output quantization.
void collect_linear(const std::string& module, int64_t in, const quant::LayerQuantSpec& spec, Runtime runtime,
                    const TensorLookup& lookup, const std::string& file, bool has_weight_scale, Collected& c) {
  std::optional<NativeFormat> native;
  if (spec.weight && has_weight_scale) {
    c.weight_specs.emplace(module, WeightSpecs{*spec.weight, spec.weight_stage2});
    ++c.quantized;
    // Two-stage weights (int4_fp8, nvfp4, amdfp4_global*) have no native kernel: dequantized.
    if (runtime == Runtime::kNative && !spec.weight_stage2) native = native_format(spec, in);
  }
  ModuleSim sim;
  for (const auto* act : {&spec.input, &spec.output})
    if (*act && (*act)->is_dynamic && (*act)->qscheme == quant::QScheme::kPerTensor) c.rows_independent = false;
  if (spec.input && spec.input_stage2) {
    sim.input = staged_input(module, spec, lookup, file);
  } else if (spec.input) {
    auto q = static_qparams(module, ActivationRole::kInput, *spec.input, lookup, file);
    if (native) c.natives.emplace(module, NativeLinear{*native, q});
    else sim.input = ActivationSim{*spec.input, q, std::nullopt, 1.0f};
  }
  else if (native) {
    c.natives.emplace(module, NativeLinear{*native, std::nullopt});
  }
  if (spec.output) {
    sim.output = ActivationSim{*spec.output, static_qparams(module, ActivationRole::kOutput, *spec.output, lookup, file),
                               std::nullopt, 1.0f};
    if (runtime == Runtime::kNative && is_static_fp8_per_tensor(spec.output) && kv_proj_layer(module) >= 0)
      c.kv_outputs.emplace(module, kv_proj_layer(module));
  }
  if (sim.input || sim.output) c.sims->emplace(module, std::move(sim));
}

Collected collect(const io::ModelDir& dir, const nlohmann::json& qc, Runtime runtime, const std::string& file) {
  const io::WeightIndex& w = dir.weights();
  const TensorLookup lookup = index_lookup(w);
  Collected c;
  // Only linear layers carry Quark specs (embeddings and norms never do,
  // whatever the global config says).
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& name : w.tensor_names()) shapes.emplace_back(name, w.find(name)->shape);
  for (const quant::LinearLayer& layer : quant::find_linear_layers(shapes)) {
    const auto spec = resolve_layer_quant_spec(qc, layer.module, file);
    if (!spec) continue;
    const bool has_scale = w.find(layer.module + ".weight_scale") != nullptr;
    // The logical width (stored 4-bit weights are packed, per-group ones transposed).
    int64_t in = layer.shape.size() == 2 ? static_cast<int64_t>(layer.shape[1]) : 0;
    if (spec->weight && has_scale) {
      const bool progressive = spec->weight_stage2 && !spec->weight_stage2->is_scale_quant;
      in = static_cast<int64_t>((progressive ? progressive_logical_shape(layer.module, *spec->weight_stage2, lookup)
                                             : logical_weight_shape(layer.module, *spec->weight, lookup))
                                    .second);
    }
    collect_linear(layer.module, in, *spec, runtime, lookup, file, has_scale, c);
  }
  return c;
}

// Native runtime: when every decoder layer's k_proj and v_proj carry a
// static fp8 output (KV-cache) scale, the engine keeps an fp8 KV cache with
// those scales instead of simulating them on the projections' outputs.
void take_fp8_kv_cache(const io::ModelDir& dir, Collected& c, CheckpointRuntime& rt) {
  const int64_t layers = dir.config().value("num_hidden_layers", int64_t{0});
  if (layers <= 0 || c.kv_outputs.size() != static_cast<size_t>(2 * layers)) return;
  std::vector<std::pair<float, float>> scales(static_cast<size_t>(layers), {0.0f, 0.0f});
  for (const auto& [module, layer] : c.kv_outputs) {
    if (layer >= layers) return;
    const float s = c.sims->at(module).output->qparams->scale;
    auto& pair = scales[static_cast<size_t>(layer)];
    (module.ends_with("k_proj") ? pair.first : pair.second) = s;
  }
  for (const auto& [k, v] : scales)
    if (!(k > 0.0f) || !(v > 0.0f)) return;
  for (const auto& [module, layer] : c.kv_outputs) {
    ModuleSim& sim = c.sims->at(module);
    sim.output.reset();
    if (!sim.input) c.sims->erase(module);
  }
  rt.kv_cache_fp8_scales = std::move(scales);
}

size_t count_sims(const SimMap& sims, bool input) {
  size_t n = 0;
  for (const auto& [module, sim] : sims) n += input ? sim.input.has_value() : sim.output.has_value();
  return n;
}

void install_hooks(const std::shared_ptr<SimMap>& sims, engine::ForwardHooks& hooks) {
  if (sims->empty()) return;
  hooks.linear_input = [sims](const engine::LinearSite& s, float* x, int64_t rows, int64_t cols) {
    apply(*sims, s, x, rows, cols, true);
  };
  hooks.linear_output = [sims](const engine::LinearSite& s, float* y, int64_t rows, int64_t cols) {
    apply(*sims, s, y, rows, cols, false);
  };
}

std::string describe(const CheckpointRuntime& rt, size_t quantized, size_t act_sim, size_t kv_sim) {
  std::string d = "quark (" + std::string(runtime_name(rt.runtime)) + "): " + std::to_string(quantized) +
                  " quantized linears";
  if (rt.runtime == Runtime::kNative) {
    d += ", " + std::to_string(rt.native_linears) + " on native kernels";
    if (rt.native_linears < quantized) d += ", " + std::to_string(quantized - rt.native_linears) + " dequantized";
  } else {
    d += " dequantized";
  }
  if (act_sim) d += ", " + std::to_string(act_sim) + " with simulated input quantization";
  if (kv_sim) d += ", " + std::to_string(kv_sim) + " with simulated output (KV cache) quantization";
  if (!rt.kv_cache_fp8_scales.empty()) d += ", fp8 KV cache";
  return d;
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

  Collected c = collect(dir, qc, runtime, file);
  if (runtime == Runtime::kNative) take_fp8_kv_cache(dir, c, rt);
  rt.native_linears = c.natives.size();
  rt.rows_independent = c.rows_independent;
  const size_t act_sim = count_sims(*c.sims, true), kv_sim = count_sims(*c.sims, false);
  rt.weights = std::make_unique<QuarkWeightSource>(dir, std::move(c.weight_specs), std::move(c.natives), order);
  install_hooks(c.sims, rt.hooks);
  const size_t attn_sim = install_attention_sim(dir, qc, rt.hooks, file);
  rt.description = describe(rt, c.quantized, act_sim, kv_sim);
  if (attn_sim) rt.description += ", " + std::to_string(attn_sim) + " attention softmax outputs simulated (fp8)";
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
