#include "qloom/export/compressed_tensors_export.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/export/compressed_tensors_scheme.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/output_guard.h"
#include "qloom/model/config_check.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/quant/layer_selection.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;
using quant::QDtype;
using quant::QScheme;
using quant::QuantSpec;

struct ModulePlan {
  std::string module;
  QuantSpec weight;
  std::optional<QuantSpec> input;
  uint64_t out = 0, in = 0;
  DType scale_dtype = DType::kF32;
  std::string format;
  std::string group_key;  // the config group's JSON without targets
  nlohmann::ordered_json group;
};

struct KvPlan {
  std::string module;  // the k_proj / v_proj
  std::string name;    // <attention>.k_scale / .v_scale
};

// One entry of the output, in write order.
struct Job {
  enum Kind { kCopy, kModule, kKv } kind = kCopy;
  std::string name;  // kCopy
  size_t index = 0;  // kModule: into modules; kKv: into kv
};

struct Plan {
  std::vector<ModulePlan> modules;
  std::vector<KvPlan> kv;
  std::optional<QuantSpec> kv_spec;
  std::vector<std::string> ignore;
  std::vector<Job> jobs;
  std::vector<io::TensorSpec> specs;
  nlohmann::ordered_json qc;
  std::string format;
  size_t groups = 0;
};

const io::TensorInfo& need(const io::WeightIndex& w, const std::string& name, const std::string& file) {
  const io::TensorInfo* t = w.find(name);
  if (!t) throw Error(ErrorKind::kNotFound, file, name, "tensor missing from the Quark checkpoint", "re-export it");
  return *t;
}

// The weight's logical [out, in] from Quark's stored layout (quark_tensors.h).
std::pair<uint64_t, uint64_t> logical_shape(const std::string& m, const QuantSpec& w, const io::WeightIndex& idx,
                                            const std::string& file) {
  const std::vector<uint64_t>& ws = need(idx, m + ".weight", file).shape;
  const std::vector<uint64_t>& ss = need(idx, m + ".weight_scale", file).shape;
  if (ws.size() != 2) throw Error(ErrorKind::kInvalidInput, file, m + ".weight", "a quantized weight must be 2-D", "");
  const bool four = w.dtype == QDtype::kInt4 || w.dtype == QDtype::kUInt4;
  if (four && w.qscheme == QScheme::kPerGroup) {
    if (ss.size() != 2) throw Error(ErrorKind::kInvalidInput, file, m + ".weight_scale", "per-group scales must be 2-D", "");
    return {ss[1], ws[0]};
  }
  if (four) return {ws[0], ws[1] * 8};
  if (w.qscheme == QScheme::kPerGroup) return {ws[1], ws[0]};
  return {ws[0], ws[1]};
}

// Adds the quantized linear `module` (weight spec present) to the plan.
void plan_module(Plan& p, const std::string& module, const quant::LayerQuantSpec& spec, const io::WeightIndex& idx,
                 const std::string& file) {
  ModulePlan mp;
  mp.module = module;
  mp.weight = *spec.weight;
  mp.input = spec.input;
  const nlohmann::ordered_json wargs = ct_weight_args(mp.weight, module + ".weight");
  nlohmann::json iargs = nullptr;
  if (mp.input) iargs = ct_activation_args(*mp.input, module + ".input_tensors");
  mp.format = ct_format(mp.weight, mp.input ? &*mp.input : nullptr);
  std::tie(mp.out, mp.in) = logical_shape(module, mp.weight, idx, file);
  mp.scale_dtype = need(idx, module + ".weight_scale", file).dtype;
  if (mp.input && !mp.input->is_dynamic) need(idx, module + ".input_scale", file);
  nlohmann::ordered_json g;
  g["format"] = mp.format;
  g["input_activations"] = iargs;
  g["output_activations"] = nullptr;
  g["weights"] = wargs;
  mp.group_key = g.dump();
  mp.group = std::move(g);
  p.modules.push_back(std::move(mp));
}

// Quark's KV output spec on a k_proj / v_proj -> <attention>.k_scale / v_scale.
void plan_kv(Plan& p, const std::string& module, const QuantSpec& o, const std::string& file) {
  const std::string where = module + ".output_tensors";
  const nlohmann::ordered_json args = ct_kv_cache_args(o, where);
  if (p.kv_spec && !(*p.kv_spec == o))
    throw Error(ErrorKind::kUnsupported, file, where,
                "KV-cache specs differ between layers; compressed-tensors has one kv_cache_scheme for the model", "");
  p.kv_spec = o;
  p.qc["kv_cache_scheme"] = args;
  for (const char* proj : {"k", "v"}) {
    const std::string suffix = std::string(".") + proj + "_proj";
    if (module.size() > suffix.size() && module.ends_with(suffix)) {
      p.kv.push_back({module, module.substr(0, module.size() - suffix.size()) + "." + proj + "_scale"});
      return;
    }
  }
  throw Error(ErrorKind::kUnsupported, file, where,
              "an output (KV-cache) spec on a layer that is not a k_proj / v_proj; compressed-tensors puts k_scale / "
              "v_scale on the attention module, which needs separate k and v projections",
              "");
}

bool is_kv_proj(const std::string& m) { return m.ends_with(".k_proj") || m.ends_with(".v_proj"); }

// Linears, their specs and the KV layers, checked before anything is written.
void plan_layers(Plan& p, const io::ModelDir& dir, const nlohmann::json& qc, const std::string& file) {
  const io::WeightIndex& idx = dir.weights();
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& n : idx.tensor_names()) shapes.emplace_back(n, idx.find(n)->shape);
  size_t kv_projs = 0;
  std::set<std::string> linears;
  for (const quant::LinearLayer& layer : quant::find_linear_layers(shapes)) {
    const std::string& m = layer.module;
    linears.insert(m);
    if (is_kv_proj(m)) ++kv_projs;
    const auto spec = resolve_layer_quant_spec(qc, m, file);
    if (spec && spec->bias) throw Error(ErrorKind::kUnsupported, file, m + ".bias", "bias quantization", "");
    if (spec && spec->weight_stage2)
      throw Error(ErrorKind::kUnsupported, file, m + ".weight",
                  "a two-stage weight (int4_fp8, nvfp4, amdfp4_global*) has no compressed-tensors form", "");
    const bool quantized = spec && spec->weight && idx.find(m + ".weight_scale") != nullptr;
    if (quantized) plan_module(p, m, *spec, idx, file);
    else p.ignore.push_back(m);
    if (spec && spec->input && !quantized)
      throw Error(ErrorKind::kUnsupported, file, m + ".input_tensors",
                  "activation quantization on a linear whose weight is not quantized", "");
    if (spec && spec->output) plan_kv(p, m, *spec->output, file);
  }
  if (!p.kv.empty() && p.kv.size() != kv_projs)
    throw Error(ErrorKind::kUnsupported, file, "kv_cache_quant_config",
                std::to_string(p.kv.size()) + " of " + std::to_string(kv_projs) +
                    " k_proj / v_proj layers have a KV-cache spec; compressed-tensors' kv_cache_scheme covers all",
                "");
  // A tied lm_head is an nn.Linear without a tensor of its own; "Linear"
  // targets would reach it.
  if (!linears.count("lm_head")) p.ignore.push_back("lm_head");
}

void plan_config(Plan& p) {
  std::map<std::string, size_t> group_of;
  std::vector<nlohmann::ordered_json> groups;
  std::vector<std::vector<std::string>> targets;
  std::set<std::string> formats;
  for (const ModulePlan& m : p.modules) {
    auto [it, fresh] = group_of.emplace(m.group_key, groups.size());
    if (fresh) {
      groups.push_back(m.group);
      targets.emplace_back();
    }
    targets[it->second].push_back(m.module);
    formats.insert(m.format);
  }
  nlohmann::ordered_json cg = nlohmann::ordered_json::object();
  for (size_t i = 0; i < groups.size(); ++i) {
    nlohmann::ordered_json g = groups[i];
    g["targets"] = groups.size() == 1 ? std::vector<std::string>{"Linear"} : targets[i];
    cg["group_" + std::to_string(i)] = std::move(g);
  }
  p.groups = groups.size();
  p.format = formats.size() == 1 ? *formats.begin() : formats.empty() ? "dense" : "mixed-precision";
  nlohmann::ordered_json qc;
  qc["config_groups"] = std::move(cg);
  qc["format"] = p.format;
  qc["global_compression_ratio"] = nullptr;
  qc["ignore"] = p.ignore;
  qc["kv_cache_scheme"] = p.qc.contains("kv_cache_scheme") ? p.qc["kv_cache_scheme"] : nlohmann::ordered_json(nullptr);
  qc["quant_method"] = "compressed-tensors";
  qc["quantization_status"] = "compressed";
  qc["sparsity_config"] = nlohmann::ordered_json::object();
  qc["transform_config"] = nlohmann::ordered_json::object();
  qc["version"] = kCompressedTensorsVersion;
  p.qc = std::move(qc);
}

// Output order: the source's sorted tensor names; a quantized linear's
// tensors replace its weight, its Quark qparams are dropped, a KV layer's
// k_scale / v_scale come at its output_scale's place.
void plan_jobs(Plan& p, const io::WeightIndex& idx) {
  std::map<std::string, Job> at;  // source tensor -> job emitted there
  std::set<std::string> dropped;
  for (size_t i = 0; i < p.modules.size(); ++i) {
    const std::string& m = p.modules[i].module;
    at[m + ".weight"] = {Job::kModule, "", i};
    for (const char* s : {".weight_scale", ".weight_zero_point", ".input_scale", ".input_zero_point"}) dropped.insert(m + s);
  }
  for (size_t i = 0; i < p.kv.size(); ++i) {
    at[p.kv[i].module + ".output_scale"] = {Job::kKv, "", i};
    dropped.insert(p.kv[i].module + ".output_zero_point");
  }
  for (const std::string& n : idx.tensor_names()) {
    if (auto it = at.find(n); it != at.end()) {
      p.jobs.push_back(it->second);
      const Job& j = it->second;
      if (j.kind == Job::kModule) {
        const ModulePlan& m = p.modules[j.index];
        for (io::TensorSpec& s : ct_weight_specs(m.module, m.out, m.in, m.weight, m.scale_dtype, m.format))
          p.specs.push_back(std::move(s));
        if (m.input && !m.input->is_dynamic)
          p.specs.push_back({m.module + ".input_scale", idx.find(m.module + ".input_scale")->dtype, {1}});
      } else {
        p.specs.push_back({p.kv[j.index].name, idx.find(n)->dtype, {1}});
      }
    } else if (!dropped.count(n)) {
      p.jobs.push_back({Job::kCopy, n, 0});
      const io::TensorInfo* t = idx.find(n);
      p.specs.push_back({n, t->dtype, t->shape});
    }
  }
  for (const KvPlan& k : p.kv)
    if (!at.count(k.module + ".output_scale") || !idx.find(k.module + ".output_scale"))
      throw Error(ErrorKind::kInvalidInput, idx.dir().string(), k.module + ".output_scale",
                  "the KV-cache spec is static but the checkpoint has no output_scale", "re-export with calibrated scales");
}

void write_tensor(io::SafetensorsWriter& w, const ExportedTensor& t) { w.write(t.name, t.data); }

size_t write_job(io::SafetensorsWriter& w, const Plan& p, const Job& j, const io::ModelDir& dir, PackOrder order) {
  const io::WeightIndex& idx = dir.weights();
  const TensorLookup lookup = index_lookup(idx);
  if (j.kind == Job::kCopy) {
    w.write(j.name, idx.view(j.name).data);
    idx.release(j.name);
    return 1;
  }
  if (j.kind == Job::kKv) {
    const KvPlan& k = p.kv[j.index];
    const auto q = unpack_activation_qparams(k.module, ActivationRole::kOutput, lookup);
    if (q->zero_point != 0)
      throw Error(ErrorKind::kInvalidInput, dir.path().string(), k.module + ".output_zero_point",
                  "an fp8 KV scale with a non-zero zero point", "");
    write_tensor(w, ct_scalar_tensor(k.name, q->scale, idx.find(k.module + ".output_scale")->dtype));
    return 1;
  }
  const ModulePlan& m = p.modules[j.index];
  const quant::QuantizedTensor qt = unpack_quantized_weight(m.module, m.weight, lookup, order);
  if (qt.shape != std::vector<uint64_t>{m.out, m.in})
    throw Error(ErrorKind::kInternal, dir.path().string(), m.module + ".weight",
                "unpacked shape differs from the planned one", "");
  size_t n = 0;
  for (const ExportedTensor& t : ct_weight_tensors(m.module, qt, m.format)) {
    write_tensor(w, t);
    ++n;
  }
  if (m.input && !m.input->is_dynamic) {
    const auto q = unpack_activation_qparams(m.module, ActivationRole::kInput, lookup);
    if (q->zero_point != 0)
      throw Error(ErrorKind::kInvalidInput, dir.path().string(), m.module + ".input_zero_point",
                  "a symmetric activation spec with a non-zero zero point", "");
    write_tensor(w, ct_scalar_tensor(m.module + ".input_scale", q->scale, idx.find(m.module + ".input_scale")->dtype));
    ++n;
  }
  for (const char* s : {".weight", ".weight_scale", ".weight_zero_point"}) idx.release(m.module + s);
  return n;
}

Plan make_plan(const io::ModelDir& dir) {
  const std::string file = (dir.path() / "config.json").string();
  const auto it = dir.config().find("quantization_config");
  if (it == dir.config().end() || !it->is_object() || it->value("quant_method", "") != "quark")
    throw Error(ErrorKind::kInvalidInput, file, "quantization_config.quant_method",
                "not a Quark checkpoint (no quantization_config with quant_method \"quark\")",
                "pass the directory `qloom quantize` wrote");
  Plan p;
  plan_layers(p, dir, *it, file);
  if (p.modules.empty())
    throw Error(ErrorKind::kInvalidInput, file, "quantization_config", "no quantized linear in the checkpoint", "");
  plan_config(p);
  plan_jobs(p, dir.weights());
  return p;
}

}  // namespace

CtExportSummary export_compressed_tensors(const fs::path& quark_dir, const fs::path& out_dir,
                                          const CtExportOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const io::ModelDir dir = io::ModelDir::open(quark_dir, true);
  model::validate_config(dir.config(), (quark_dir / "config.json").string());
  check_output_location(out_dir, quark_dir);
  const Plan p = make_plan(dir);
  const PackOrder order = pack_order_of(dir.config()["quantization_config"]);

  if (opts.overwrite) io::check_replaceable_output(out_dir);  // only an empty dir or a checkpoint
  io::AtomicDir out(out_dir, opts.overwrite);
  io::WriterOptions wo;
  wo.max_shard_bytes = opts.max_shard_bytes;
  io::SafetensorsWriter w(out.staging(), p.specs, wo);
  size_t done = 0;
  for (const Job& j : p.jobs) {
    const size_t before = done;
    done += write_job(w, p, j, dir, order);
    if (opts.progress)
      for (size_t i = before; i < done; ++i) opts.progress(i + 1, p.specs.size(), p.specs[i].name);
  }
  w.finish();
  write_config_and_aux_files(dir, out.staging(), quantized_config_json(dir.config(), p.qc), w.files());
  out.commit();

  CtExportSummary s;
  s.format = p.format;
  s.config_groups = p.groups;
  s.linears_quantized = p.modules.size();
  s.kv_layers = p.kv.size() / 2;
  s.ignore = p.ignore;
  s.tensors_in = dir.weights().num_tensors();
  s.tensors_out = p.specs.size();
  for (const auto& e : fs::directory_iterator(out_dir)) s.files.push_back(e.path().filename().string());
  std::sort(s.files.begin(), s.files.end());
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace qloom::exporter
