// analyze_model: config.json -> model_analysis.json (see model_analysis.h):
// the facts read from the config, the risks in their documented order and
// the artifact. The shape and the linear layers are derived in
// model_analysis_dims.cpp and model_analysis_layout.cpp.
#include "qloom/agent/model_analysis.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "qloom/agent/model_analysis_internal.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/model/architecture.h"
#include "qloom/model/config_check.h"
#include "qloom/model/model_config.h"
#include "qloom/io/hub_id.h"
#include "qloom/io/json_read.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent {
namespace detail {
namespace {

using json = nlohmann::json;
using oj = nlohmann::ordered_json;

constexpr double kLargeModelParams = 70e9;

// ---- small readers -----------------------------------------------------------------

struct Risk {
  std::string id, severity, message, hint;
};

oj risk_json(const Risk& r) {
  return oj{{"id", r.id}, {"severity", r.severity}, {"message", r.message}, {"recovery_hint", r.hint}};
}

std::string dtype_of(const Fields& f) {
  if (auto v = f.string("torch_dtype")) return *v;
  if (auto v = f.string("dtype")) return *v;
  return "";
}

uint64_t dtype_bytes(const std::string& dt) {
  if (dt == "float32" || dt == "fp32") return 4;
  if (dt == "float64") return 8;
  return 2;  // bfloat16, float16, unknown
}

// Rope types the engine implements (engine/rope_config.cpp).
bool engine_rope_type(const std::string& t) { return t == "default" || t == "linear" || t == "llama3"; }

// The engine's error item names a RoPE field: "rope_scaling[.x]" (4.x form) or
// "rope_parameters[.layer_type][.x]" (5.x form).
bool rope_item(const std::string& item) {
  return item.rfind("rope_scaling", 0) == 0 || item.rfind("rope_parameters", 0) == 0;
}

std::string rope_dict_type(const json& d) {
  auto t = d.find("rope_type");
  if (t == d.end() || t->is_null()) t = d.find("type");
  return (t != d.end() && t->is_string()) ? t->get<std::string>() : std::string("default");
}

// rope_parameters, flat or per layer type: the first type qloom's engine
// lacks, else the full-attention (or only) type.
std::string rope_parameters_type(const json& p) {
  if (!p.contains("full_attention") && !p.contains("sliding_attention")) return rope_dict_type(p);
  std::string first;
  for (const char* lt : {"full_attention", "sliding_attention"}) {
    if (!p.contains(lt) || !p[lt].is_object()) continue;
    const std::string t = rope_dict_type(p[lt]);
    if (!engine_rope_type(t)) return t;
    if (first.empty()) first = t;
  }
  return first.empty() ? "default" : first;
}

// Model types whose experts are fused 3-D parameters rather than nn.Linear
// modules in transformers (Quark needs its MoE preparation for them).
bool fused_experts_type(const std::string& t) {
  return t == "gpt_oss" || t == "llama4" || t == "dbrx" || t == "granitemoe" || t == "granitemoehybrid";
}

std::string loading_class(const std::string& model_type) {
  // quark-torch-model-intake "Special Loading Requirements".
  if (model_type == "deepseek_vl_v2") return "AutoModel";
  if (model_type == "mllama") return "MllamaForConditionalGeneration";
  return "AutoModelForCausalLM";
}

oj opt_int(const std::optional<int64_t>& v) { return v ? oj(*v) : oj(nullptr); }

// ---- the facts of a config -----------------------------------------------------------

// What analyze_config learns from a config, before the risks and the JSON.
struct ConfigFacts {
  std::string model_type;
  std::vector<std::string> architectures;
  std::string torch_dtype;
  std::vector<std::string> missing;  // facts the config does not state
  // The engine's view: does it run this config (calibration, evaluation)?
  bool engine_ok = false, engine_type = false;
  std::string engine_detail, engine_item;
  Dims d;
  bool partial = false;
  Layout layout;
  const quant::ModelTemplate* tmpl = nullptr;
  std::vector<std::string> excl;  // default exclusions
  oj groups = oj::array();
  uint64_t excluded_total = 0;    // linear layers the default exclusions take out
  uint64_t params = 0, weight_bytes = 0;
  std::vector<std::string> mm;    // multimodal signals
  std::optional<std::string> rope_type, quant_method;
  bool remote_code = false;
};

std::string read_model_type(const json& config, const Fields& f) {
  auto it = config.find("model_type");
  if (it == config.end() || it->is_null()) return std::string();
  if (!it->is_string()) f.bad("model_type", "must be a string");
  return it->get<std::string>();
}

std::vector<std::string> read_architectures(const json& config, const Fields& f) {
  std::vector<std::string> architectures;
  if (auto it = config.find("architectures"); it != config.end() && !it->is_null()) {
    if (!it->is_array()) f.bad("architectures", "must be a list of class names");
    for (const auto& a : *it) {
      if (!a.is_string()) f.bad("architectures", "must be a list of class names");
      architectures.push_back(a.get<std::string>());
    }
  }
  return architectures;
}

// The engine's parse of the config (engine_ok / detail / item set). A
// supported type that fails only on its RoPE scaling still has the engine's
// layout: the shapes come from a parse without rope_scaling.
std::optional<model::ModelConfig> engine_parse(const json& config, const std::string& config_file, ConfigFacts& x) {
  std::optional<model::ModelConfig> mc;
  x.engine_type = model::find_architecture(x.model_type) != nullptr;
  model::validate_config(config, config_file);  // bad values are errors, whatever the engine supports
  try {
    mc = model::ModelConfig::parse(config, config_file);
    x.engine_ok = true;
    x.engine_detail = "qloom's engine runs model_type \"" + x.model_type +
                      "\": calibration (static scales, GPTQ / AWQ / SmoothQuant) and evaluation are available";
  } catch (const Error& e) {
    x.engine_detail = e.message();
    x.engine_item = e.item();
  }
  if (!mc && x.engine_type && rope_item(x.engine_item)) {
    json no_rope = config;
    no_rope.erase("rope_scaling");
    no_rope.erase("rope_parameters");
    try {
      mc = model::ModelConfig::parse(no_rope, config_file);
    } catch (const Error&) {
    }
  }
  return mc;
}

// Default exclusions and how many linear layers they take out (per group).
void count_exclusions(ConfigFacts& x) {
  x.tmpl = quant::find_model_template(x.model_type);
  x.excl = quant::default_exclude_layers(x.model_type);
  for (const Group& g : x.layout.groups) {
    uint64_t ex = 0;
    for_each_module(g, [&](const std::string& name, int64_t) {
      for (const auto& p : x.excl)
        if (quant::module_matches(p, name)) {
          ++ex;
          break;
        }
    });
    x.excluded_total += ex;
    x.groups.push_back(group_json(g, ex));
  }
}

std::vector<std::string> multimodal_signals(const json& config, const std::vector<std::string>& architectures) {
  std::vector<std::string> mm;
  for (const char* key : {"vision_config", "audio_config", "vision_tower", "visual", "mm_projector_type",
                          "image_token_index", "image_token_id"})
    if (config.contains(key)) mm.emplace_back(key);
  for (const auto& a : architectures)
    if (a.find("ForConditionalGeneration") != std::string::npos || a.find("Vision") != std::string::npos ||
        a.find("VL") != std::string::npos)
      mm.push_back("architectures: " + a);
  return mm;
}

std::optional<std::string> rope_scaling_type(const Fields& f) {
  std::optional<std::string> rope_type;
  if (const json* rs = f.find("rope_scaling")) {
    if (!rs->is_object()) f.bad("rope_scaling", "must be an object or null");
    rope_type = rope_dict_type(*rs);
  }
  if (const json* rp = f.find("rope_parameters"); rp && !rope_type) {  // transformers 5
    if (!rp->is_object()) f.bad("rope_parameters", "must be an object or null");
    rope_type = rope_parameters_type(*rp);
  }
  return rope_type;
}

std::optional<std::string> quantization_method(const json& config) {
  std::optional<std::string> quant_method;
  if (auto it = config.find("quantization_config"); it != config.end() && !it->is_null()) {
    auto qm = it->is_object() ? it->find("quant_method") : it->end();
    quant_method = (it->is_object() && qm != it->end() && qm->is_string()) ? qm->get<std::string>() : "unknown";
  }
  return quant_method;
}

// Reads the config in a fixed order (the first malformed field is the one
// reported).
ConfigFacts read_facts(const json& config, const std::string& config_file) {
  const Fields f{config, config_file};
  ConfigFacts x;
  x.model_type = read_model_type(config, f);
  if (x.model_type.empty()) x.missing.emplace_back("model_type");
  x.architectures = read_architectures(config, f);
  x.torch_dtype = dtype_of(f);
  const std::optional<model::ModelConfig> mc = engine_parse(config, config_file, x);
  x.d = mc ? dims_from_engine(*mc) : dims_from_config(f, x.model_type, x.missing);
  x.partial = !x.missing.empty();
  if (!x.partial) x.layout = build_layout(x.d);
  count_exclusions(x);
  x.params = x.layout.linear_params + x.layout.other_params;
  x.weight_bytes = x.params * dtype_bytes(x.torch_dtype);
  x.mm = multimodal_signals(config, x.architectures);
  x.rope_type = rope_scaling_type(f);
  x.quant_method = quantization_method(config);
  x.remote_code = config.contains("auto_map");
  return x;
}

// ---- risks, in the documented order ----------------------------------------------------

// The config's own risks: incomplete, already quantized, remote code, what
// the engine cannot run.
void config_risks(const ConfigFacts& x, std::vector<Risk>& risks) {
  if (x.partial)
    risks.push_back({"incomplete_config", "high",
                     "config.json does not state " + join_with(x.missing, ", ") +
                         "; the linear layers and sizes cannot be derived",
                     "use the model's complete Hugging Face config.json, or name the missing facts"});
  if (x.quant_method)
    risks.push_back({"already_quantized", "high",
                     "config.json has a quantization_config (quant_method \"" + *x.quant_method +
                         "\"): the checkpoint is already quantized",
                     "start from the unquantized (bf16 / fp16 / fp32) checkpoint"});
  if (x.remote_code)
    risks.push_back({"remote_code", x.engine_type ? "medium" : "high",
                     "config.json has auto_map: the model ships custom modeling code, which qloom never executes",
                     x.engine_type ? "qloom uses its own implementation of model_type \"" + x.model_type +
                                         "\"; check that the custom code does not change the layout"
                                   : "use a checkpoint of an architecture transformers (and qloom) implement natively"});
  if (!x.model_type.empty() && !x.engine_type)
    risks.push_back({"unsupported_architecture", "high",
                     "qloom's engine does not run model_type \"" + x.model_type + "\" (supported: " +
                         model::supported_model_types() +
                         "): calibration (static activation / KV scales, GPTQ, AWQ, SmoothQuant) and "
                         "evaluation are unavailable",
                     "use a weight-only scheme without an algorithm (RTN: int4_wo_*, uint4_wo_*, ptpc_fp8, "
                     "mxfp4_weight_only), or a supported architecture"});
  if (x.engine_type && !x.engine_ok && !rope_item(x.engine_item))
    risks.push_back({"engine_config_unsupported", "high",
                     "qloom's engine cannot run this config: " + x.engine_detail,
                     "use a weight-only RTN scheme, or fix / replace the config"});
  if (x.rope_type && !engine_rope_type(*x.rope_type))
    risks.push_back({"rope_scaling_unsupported", "high",
                     "rope_scaling type \"" + *x.rope_type +
                         "\" is not implemented by qloom's engine (default, linear, llama3): calibration and "
                         "evaluation are unavailable",
                     "use a weight-only RTN scheme, or a checkpoint without this RoPE scaling"});
}

// The model's risks: no Quark template, MoE, size, multimodal, an assumed
// layout, tied embeddings.
void model_risks(const ConfigFacts& x, std::vector<Risk>& risks) {
  const Dims& d = x.d;
  if (!x.model_type.empty() && !x.tmpl)
    risks.push_back({"no_quark_template", "medium",
                     "Quark has no template for model_type \"" + x.model_type +
                         "\": the default exclusions fall back to [lm_head]",
                     "review the exclusions (routers, vision towers, ...) at the plan checkpoint"});
  if (d.experts > 0 && !x.partial)
    risks.push_back({"moe", "medium",
                     "mixture of experts: " + std::to_string(d.experts) + " experts" +
                         (d.experts_per_tok > 0 ? ", " + std::to_string(d.experts_per_tok) + " per token" : "") +
                         "; an expert receives calibration tokens only when routed (unrouted experts fall back "
                         "to RTN), routers stay unquantized",
                     "use more calibration samples if many experts go unrouted"});
  if (!x.partial && double(x.params) > kLargeModelParams)
    risks.push_back({"large_model", "medium",
                     "about " + format_count(x.params) + " parameters (> 70B): long calibration and large output",
                     "check the disk and time estimates in the plan; prefer RTN or fewer calibration samples"});
  if (!x.mm.empty())
    risks.push_back({"multimodal", "medium",
                     "multimodal config (" + join_with(x.mm, ", ") +
                         "): only the language model's linear layers are counted and quantized",
                     "keep vision / audio towers excluded (the Quark template does)"});
  if (!x.partial && !d.from_engine)
    risks.push_back({"layout_assumed", "low",
                     "layer names and shapes assume the Hugging Face " + d.layout +
                         " layout (not checked by qloom's engine); counts are estimates",
                     "compare with the checkpoint's tensor names before relying on per-layer patterns"});
  if (!x.partial && d.tie)
    risks.push_back({"tied_embeddings", "low",
                     "lm_head is tied to the input embeddings: it is not stored separately and stays in the "
                     "source dtype",
                     ""});
}

std::string compatibility_of(const std::vector<Risk>& risks) {
  std::string compatibility = "ok";
  for (const auto& r : risks) {
    if (r.id == "incomplete_config" || r.id == "already_quantized") compatibility = "unsupported";
    else if ((r.severity == "high" || r.severity == "medium") && compatibility == "ok") compatibility = "warning";
  }
  return compatibility;
}

// ---- the artifact ----------------------------------------------------------------------

oj moe_json(const Dims& d) {
  if (d.experts <= 0) return nullptr;
  uint64_t moe_layers = 0;
  for (uint8_t b : d.layer_moe) moe_layers += b;
  return {{"num_experts", d.experts},
          {"experts_per_token", d.experts_per_tok > 0 ? oj(d.experts_per_tok) : oj(nullptr)},
          {"moe_intermediate_size", d.moe_inter > 0 ? oj(d.moe_inter) : oj(nullptr)},
          {"shared_expert_intermediate_size", d.shared_inter > 0 ? oj(d.shared_inter) : oj(nullptr)},
          {"moe_layers", moe_layers}};
}

// model_analysis.json's "model" object.
oj model_json(const ConfigFacts& x, const std::string& config_file, const std::string& model_spec,
              const std::string& source, const std::string& resolved_path) {
  const Dims& d = x.d;
  oj m;
  m["model_path"] = model_spec;
  m["resolved_path"] = resolved_path;
  m["source"] = source;
  std::optional<io::HubId> hub = source == "hub" ? io::parse_hub_id(model_spec) : std::nullopt;
  m["hub_repo_id"] = hub ? oj(hub->repo_id()) : oj(nullptr);
  m["hub_revision"] = hub ? oj(hub->revision) : oj(nullptr);
  m["config_file"] = config_file;
  m["model_type"] = x.model_type;
  m["architectures"] = x.architectures;
  m["loading_class"] = loading_class(x.model_type);
  m["trust_remote_code"] = x.remote_code;
  auto known = [&](int64_t v) { return x.partial && v == 0 ? oj(nullptr) : oj(v); };
  m["num_hidden_layers"] = known(d.layers);
  m["hidden_size"] = known(d.hidden);
  m["intermediate_size"] = d.inter > 0 ? oj(d.inter) : oj(nullptr);
  m["num_attention_heads"] = known(d.heads);
  m["num_key_value_heads"] = known(d.kv_heads);
  m["head_dim"] = known(d.head_dim);
  m["vocab_size"] = known(d.vocab);
  m["max_position_embeddings"] = d.max_position > 0 ? oj(d.max_position) : opt_int(std::nullopt);
  m["torch_dtype"] = x.torch_dtype.empty() ? oj(nullptr) : oj(x.torch_dtype);
  m["tie_word_embeddings"] = d.tie;
  m["rope_scaling_type"] = x.rope_type ? oj(*x.rope_type) : oj(nullptr);
  m["is_moe"] = d.experts > 0;
  m["moe"] = moe_json(d);
  m["is_multimodal"] = !x.mm.empty();
  m["multimodal_signals"] = x.mm;
  m["quantization_config"] = x.quant_method ? oj(*x.quant_method) : oj(nullptr);
  m["estimated_parameters"] = x.partial ? oj(nullptr) : oj(x.params);
  m["estimated_weights_bytes"] = x.partial ? oj(nullptr) : oj(x.weight_bytes);
  m["estimated_size_gb"] = x.partial ? oj(nullptr) : oj(std::round(double(x.weight_bytes) / 1e7) / 100.0);
  return m;
}

// model_analysis.json's "quantization_targets" object.
oj targets_json(const ConfigFacts& x) {
  const bool partial = x.partial;
  oj t;
  t["linear_layer_count"] = partial ? oj(nullptr) : oj(x.layout.linear_count);
  t["linear_layer_formula"] = partial ? oj(nullptr) : oj(x.layout.formula);
  t["quantization_target_count"] = partial ? oj(nullptr) : oj(x.layout.linear_count - x.excluded_total);
  t["exclude_defaults"] = x.excl;
  t["exclude_defaults_source"] = x.tmpl ? "quark_template" : "fallback";
  t["has_non_linear_experts"] = fused_experts_type(x.model_type);
  t["needs_moe_preparation"] = x.d.experts > 0 || fused_experts_type(x.model_type);
  t["layout"] = partial ? oj(nullptr) : oj(x.d.layout);
  t["layout_source"] = partial ? oj(nullptr) : oj(x.d.from_engine ? "engine" : "assumed");
  t["linear_parameters"] = partial ? oj(nullptr) : oj(x.layout.linear_params);
  t["groups"] = x.groups;
  return t;
}

}  // namespace
}  // namespace detail

nlohmann::ordered_json analyze_config(const nlohmann::json& config, const std::string& config_file,
                                      const std::string& model_spec, const std::string& source,
                                      const std::string& resolved_path, const nlohmann::ordered_json& environment) {
  using namespace detail;
  if (!config.is_object())
    throw_invalid(config_file, "", "config.json must hold a JSON object",
                  "fix config.json (it must be the model's Hugging Face config)");
  const ConfigFacts x = read_facts(config, config_file);
  std::vector<Risk> risks;
  config_risks(x, risks);
  model_risks(x, risks);

  oj j;
  j["analysis_status"] = x.partial ? "partial" : "complete";
  j["model"] = model_json(x, config_file, model_spec, source, resolved_path);
  j["quantization_targets"] = targets_json(x);
  const bool usable = x.engine_ok && !x.quant_method;
  j["engine"] = {{"supported", x.engine_ok},
                 {"calibration", usable},
                 {"evaluation", usable},
                 {"detail", x.engine_detail}};
  j["risks"] = oj::array();
  for (const auto& r : risks) j["risks"].push_back(risk_json(r));
  j["compatibility"] = compatibility_of(risks);
  j["environment"] = environment;
  return j;
}

nlohmann::ordered_json analyze_model(const std::string& model_spec, const std::filesystem::path& config_dir,
                                     const nlohmann::ordered_json& environment) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(config_dir, ec))
    throw_not_found(config_dir.string(), "", "model directory not found (or not a directory)",
                    "pass an existing local model directory or a Hugging Face id (org/name)");
  const fs::path file = config_dir / "config.json";
  if (!fs::exists(file, ec))
    throw_not_found(file.string(), "", "the model directory has no config.json",
                    "point at the directory that holds the model's config.json");
  if (!fs::is_regular_file(file, ec))
    throw_invalid(file.string(), "", "config.json is not a regular file", "replace it with the model's config.json");
  io::JsonReadOptions opts;
  opts.remedy = "fix config.json (it must be the model's Hugging Face config) or re-download it";
  const nlohmann::json config = io::read_json_file(file, opts);

  fs::path resolved = fs::absolute(config_dir, ec).lexically_normal();
  if (ec) resolved = config_dir.lexically_normal();
  if (resolved.filename().empty()) resolved = resolved.parent_path();  // "dir/" -> "dir"
  // A hub model is read from a huggingface_hub cache snapshot:
  // .../models--<org>--<name>/snapshots/<commit>.
  const bool snapshot = resolved.parent_path().filename() == "snapshots" &&
                        resolved.parent_path().parent_path().filename().string().rfind("models--", 0) == 0;
  const std::string source = snapshot && io::parse_hub_id(model_spec) ? "hub" : "local";
  nlohmann::ordered_json j = analyze_config(config, file.string(), model_spec, source, resolved.string(), environment);
  if (source == "hub") j["model"]["hub_revision"] = resolved.filename().string();
  return j;
}

}  // namespace qloom::agent
