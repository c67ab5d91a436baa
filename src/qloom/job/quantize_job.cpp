#include "qloom/job/quantize_job.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "qloom/core/error.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/job/model_export.h"
#include "qloom/job/quantize_plan.h"
#include "qloom/job/quantize_stream.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/config_check.h"
#include "qloom/quant/rotation.h"
#include "qloom/quant/rotation_stage.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::job {
namespace {

using Clock = std::chrono::steady_clock;

// Options qloom does not run (yet): refused with a clear reason.
void check_supported(const QuantizeOptions& o) {
  if (o.device != "cpu")
    throw Error(ErrorKind::kUnsupported, "", "--device", "qloom computes on the CPU only; got '" + o.device + "'",
                "pass --device cpu (or omit it)");
  (void)parse_export_formats(o.model_export);
  if (!o.kv_cache_dtype.empty()) (void)quant::kv_cache_spec(o.kv_cache_dtype);  // kUsage for unknown dtypes
  if (o.kv_cache_post_rope && o.kv_cache_dtype.empty())
    throw Error(ErrorKind::kUsage, "", "--kv_cache_post_rope", "--kv_cache_post_rope needs a KV cache dtype",
                "add --kv_cache_dtype fp8, or drop --kv_cache_post_rope");
  (void)exporter::parse_quark_format(o.quark_format_version);
}

exporter::ExportOptions export_options(const QuantizeOptions& o, const OutputPublisher& out) {
  exporter::ExportOptions eo;
  eo.overwrite = out.quark_overwrite();
  eo.max_shard_bytes = o.max_shard_bytes;
  eo.pack_order = pack_order_of(o);
  return eo;
}

// Static activation / KV scales and --quant_algo both run the layer-by-layer
// pipeline (one decoder layer in memory at a time), which produces the
// tensors layer after layer: the plan is written in that order.
std::vector<exporter::PlannedTensor> plan_tensors(const io::ModelDir& src, const JobPlan& plan, bool has_stages,
                                        bool& pipelined) {
  std::vector<exporter::PlannedTensor> tensors = exporter::plan_quark_export(src.weights(), plan.planned_modules);
  // --attention_dtype: every attention module's softmax-output scale
  // (Quark quantizes the softmax of each module named *attn / *attention,
  // excluded projections or not).
  if (plan.config.softmax)
    for (const auto& name : src.weights().tensor_names()) {
      static const std::string kO = ".self_attn.o_proj.weight";
      if (name.size() > kO.size() && name.compare(name.size() - kO.size(), kO.size(), kO) == 0)
        tensors.push_back(exporter::PlannedTensor::activation(name.substr(0, name.size() - std::string(".o_proj.weight").size()),
                                                    exporter::ActivationRole::kProbs, *plan.config.softmax));
    }
  const bool static_scales = std::any_of(tensors.begin(), tensors.end(),
                                         [](const exporter::PlannedTensor& p) { return p.kind == exporter::PlannedKind::kActivation; });
  pipelined = has_stages || static_scales;
  if (pipelined) sort_by_layer(tensors);
  return tensors;
}

// The rotation pre-pass (quant/rotation_stage.h), taken out of the stage
// list: it runs on the whole float model before calibration, so it must be
// the first algorithm (kUsage otherwise). Null without rotation.
std::unique_ptr<quant::RotationStage> take_rotation(std::vector<std::unique_ptr<quant::AlgorithmStage>>& stages) {
  std::unique_ptr<quant::RotationStage> rotation;
  for (size_t i = 0; i < stages.size(); ++i) {
    auto* r = dynamic_cast<quant::RotationStage*>(stages[i].get());
    if (r == nullptr) continue;
    if (i != 0)
      throw Error(ErrorKind::kUsage, "", "--quant_algo",
                  "rotation must come first (it rotates the float model that " + stages[0]->name() + " then fits)",
                  "pass --quant_algo rotation," + stages[0]->name());
    stages[i].release();
    rotation.reset(r);
    stages.erase(stages.begin());
    break;
  }
  return rotation;
}

// The rotated model, written next to the output directory and removed when
// the job ends; the quantization reads it instead of the source.
struct RotatedSource {
  std::unique_ptr<quant::ScratchDir> scratch;
  std::unique_ptr<io::ModelDir> dir;
};

RotatedSource rotate_source(const QuantizeOptions& o, const io::ModelDir& src, const quant::RotationStage& stage,
                            std::vector<std::string>& notes) {
  quant::ModelRotation rotation(src, stage.config());
  RotatedSource r;
  std::filesystem::path parent = std::filesystem::absolute(o.output_dir).parent_path();
  r.scratch = std::make_unique<quant::ScratchDir>(".qloom-rotated", parent);
  const std::filesystem::path dir = r.scratch->path() / "model";
  quant::write_rotated_model(rotation, dir, o.threads);
  r.dir = std::make_unique<io::ModelDir>(io::ModelDir::open(dir, /*open_weights=*/true));
  if (src.config().value("tie_word_embeddings", false) && src.weights().find("lm_head.weight") == nullptr)
    notes.push_back(
        "rotation untied lm_head from embed_tokens (lm_head.weight is written; config.json keeps "
        "tie_word_embeddings: true, as Quark writes it): transformers >= 5 and qloom load the checkpoint's "
        "lm_head, runtimes that honour the tie (vLLM's llama) would use the rotated embedding as lm_head and "
        "lose the final norm's weight");
  return r;
}

}  // namespace

QuantizeSummary quantize_model(const QuantizeOptions& o, const ProgressFn& progress,
                               const CalibrationProgressFn& calib_progress) {
  const auto t_start = Clock::now();
  QuantizeSummary sum;
  if (o.output_dir.empty())  // "" is no directory (it used to reach the exporter as an internal error)
    throw Error(ErrorKind::kUsage, "", "--output_dir", "is empty", "pass the directory to write the quantized model to");
  const io::ModelDir source = io::ModelDir::open(o.model_dir, /*open_weights=*/true);
  model::validate_config(source.config(), (o.model_dir / "config.json").string());  // every scheme, RTN too
  // 1. The --quant_algo stages (unknown or unimplemented names and bad
  //    configs fail here, before anything is written); the rotation pre-pass
  //    writes the rotated model, which the rest of the job quantizes.
  std::vector<AlgoConfigFile> config_files;
  std::vector<std::unique_ptr<quant::AlgorithmStage>> stages =
      build_algorithm_stages(o, source.model_type(), &config_files);
  const std::unique_ptr<quant::RotationStage> rotation = take_rotation(stages);
  check_supported(o);
  {
    QuantizeSummary precheck;  // refuses bad scheme / layer options before the rotation's work
    (void)select_modules(o, source, precheck);
  }
  RotatedSource rotated;
  std::vector<std::string> rotation_notes;
  if (rotation) rotated = rotate_source(o, source, *rotation, rotation_notes);
  const io::ModelDir& src = rotated.dir ? *rotated.dir : source;
  QuantizeOptions rotated_options = o;
  if (rotated.dir) rotated_options.model_dir = src.path();
  // 2. Which linear gets which spec.
  JobPlan plan = select_modules(o, src, sum);
  sum.warnings.insert(sum.warnings.end(), rotation_notes.begin(), rotation_notes.end());
  for (const auto& f : config_files) sum.algo_config_files.push_back({f.algo, f.path.string(), f.sha256});
  if (!stages.empty())
    for (const auto& [module, spec] : plan.modules)
      if (spec.weight_stage2)
        throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_algo",
                    module + " has a two-stage weight spec (int4_fp8, nvfp4, amdfp4_global*); qloom runs " + o.quant_algo +
                        " on single-stage weights only",
                    "quantize it with round-to-nearest (no --quant_algo), or choose a single-stage scheme");
  if (plan.modules.empty())
    throw Error(ErrorKind::kUsage, o.model_dir.string(), "--exclude_layers",
                "every linear layer is excluded; nothing would be quantized",
                "relax --exclude_layers / --layer_quant_scheme");
  // 3. The output location(s), checked and staged.
  OutputPublisher out(o, source.path());
  exporter::QuarkExporter ex(src, out.quark_dir(), export_options(o, out));
  for (const auto& p : ex.swept_partials())
    sum.warnings.push_back("removed " + p.string() + ", the staging directory of an earlier run that was killed");
  // 4. Layers the Quark layout cannot hold; 5. the quantization_config and
  //    the modules it gives tensors to; 6. the tensor list.
  drop_unfit_layers(o, src.weights(), ex.model_dtype(), pack_order_of(o), plan, sum);
  plan_config(o, src, plan);
  out.precheck(src.model_type(), plan.planned_modules);
  bool pipelined = false;
  ex.plan(plan_tensors(src, plan, !stages.empty(), pipelined));
  // 7. Every tensor, quantized (RTN or the pipeline's algorithm) or copied.
  TensorStream stream(rotated.dir ? rotated_options : o, src, ex, pipelined, plan.modules, std::move(stages),
                      plan.config, sum, calib_progress);
  stream.write_all(progress);
  if (rotation) {  // Quark lists the algorithms in the order they ran: rotation first
    nlohmann::ordered_json algos = nlohmann::ordered_json::array({rotation->algo_config()});
    if (plan.config.algo_config.is_array())
      for (const auto& a : plan.config.algo_config) algos.push_back(a);
    plan.config.algo_config = algos;
  }
  // 8. config.json (with algo_config once the pipeline ran), aux files.
  ex.finish(exporter::build_quantization_config(plan.config));
  sum.tensors_out = ex.output_specs().size();
  // Bits per quantized weight: everything written for quantized modules
  // (codes + scales + zero points) over their element count.
  sum.bits_per_weight =
      sum.params_quantized ? 8.0 * double(stream.quantized_bytes()) / double(sum.params_quantized) : 0;
  // 9. The other --model_export formats from the finished checkpoint; publish.
  out.publish(src.model_type(), sum);
  sum.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  return sum;
}

}  // namespace qloom::job
