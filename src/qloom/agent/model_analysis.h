// Intake (seed 001 Step 1, seed 003 "Model intake"): model_analysis.json from
// a model's config.json alone — never its weights, never any other file.
//
// Contract:
//   - analyze_model reads exactly <config_dir>/config.json (a local model
//     directory, or a hub snapshot that may hold nothing else). It throws
//     qloom::Error: kNotFound when config_dir is not a directory or has no
//     config.json (file = that path); kInvalidInput when config.json cannot
//     be read, is not JSON, is not an object, or a known field has the wrong
//     type or a non-positive size (item = the field). A config that lacks a
//     fact the analysis needs (model_type, hidden_size, ...) is not an error:
//     the analysis is "partial" with an "incomplete_config" risk naming the
//     fields (seed 003 Recovery: "mark analysis_status as partial, record a
//     risk, and ask for the missing fact").
//   - Linear layers are derived from the config, in HF module naming, as
//     groups {name with "{i}" (layer) and "{e}" (expert), layers, experts,
//     out_features, in_features, count}:
//       per decoder layer: attention q,k,v,o (phi3: qkv_proj + o_proj; MLA:
//       q_proj or q_a_proj + q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj)
//       + a dense MLP gate,up,down (phi3: gate_up_proj + down_proj), or in an
//       MoE layer the router + experts x 3 (+ a shared expert's 3 and
//       qwen2_moe's shared_expert_gate); plus lm_head unless the embeddings
//       are tied. Embeddings are not linear layers. Vision / audio towers of
//       multimodal configs are not counted (the templates exclude them).
//     For model types qloom's engine runs, the shapes use the engine's
//     config parsing (model/model_config.h: transformers' per-type
//     defaults, MoE layer selection) and match the checkpoint's tensors;
//     otherwise the layout is assumed (risk "layout_assumed").
//     "quantization_target_count" = linear layers not matched by the model
//     type's default exclusions (quant::default_exclude_layers).
//   - Estimates from the config: parameters = embeddings + linear layers +
//     norms + biases; weights bytes = parameters x bytes of torch_dtype
//     (bfloat16 / float16 2, float32 4, unknown 2).
//   - Risks (fixed order, each {id, severity low|medium|high, message,
//     recovery_hint}): incomplete_config, already_quantized, remote_code,
//     unsupported_architecture, engine_config_unsupported,
//     rope_scaling_unsupported, no_quark_template, moe, large_model (> 70e9
//     parameters), multimodal, layout_assumed, tied_embeddings.
//     compatibility: "unsupported" with incomplete_config or
//     already_quantized; else "warning" with any medium / high risk; else "ok".
//   - Deterministic: same config + spec + environment -> identical JSON.
// The JSON validates against schemas/model_analysis.schema.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::agent {

// model_spec: the model as the user gave it (HF id "org/name[@rev]", local
// path as written, ...); recorded as model.model_path. config_dir: the
// directory holding config.json. source is "hub" when config_dir is a
// huggingface_hub cache snapshot (.../models--<org>--<name>/snapshots/<commit>,
// what io::resolve_model_path returns for a hub id) and model_spec parses as
// a hub id; hub_revision is then the snapshot's commit. Otherwise "local".
// resolved_path = the absolute, normalized config_dir.
// environment: collect_environment_json() (stored as is).
nlohmann::ordered_json analyze_model(const std::string& model_spec, const std::filesystem::path& config_dir,
                                     const nlohmann::ordered_json& environment);

// The same analysis from an already parsed config.json object (no file
// access): `config_file` is used in messages and recorded, `source` is
// "local" | "hub", `resolved_path` is recorded as model.resolved_path.
// Throws kInvalidInput as analyze_model does.
nlohmann::ordered_json analyze_config(const nlohmann::json& config, const std::string& config_file,
                                      const std::string& model_spec, const std::string& source,
                                      const std::string& resolved_path, const nlohmann::ordered_json& environment);

// Seed 001's "Model Analysis:" block, aligned (two-space indent, labels
// padded to 18 columns): Model path, Model type, Hidden layers, Linear
// layers, MoE, Exclude defaults, Risks, Compatibility, then Parameters and
// qloom engine. Ends with a newline.
std::string render_analysis_summary(const nlohmann::json& analysis);

// One linear layer of the analysed model.
struct LinearModule {
  std::string name;           // "model.layers.3.mlp.experts.7.up_proj", "lm_head"
  uint64_t out_features = 0;
  uint64_t in_features = 0;
  int64_t layer = -1;         // decoder layer index, -1 outside the layers
};

// Every linear layer of an analysis (quantization_targets.groups expanded:
// "{i}" over the group's layers, "{e}" over 0..experts-1), in group order,
// layer-major. Empty for a partial analysis. Throws kInvalidInput (file
// "model_analysis.json") when the groups are malformed.
std::vector<LinearModule> expand_linear_modules(const nlohmann::json& analysis);

// "0-3,5,7-9" <-> {0,1,2,3,5,7,8,9} (sorted, distinct). parse throws
// kInvalidInput naming `what` on a malformed list.
std::string format_layer_ranges(const std::vector<int64_t>& layers);
std::vector<int64_t> parse_layer_ranges(const std::string& ranges, const std::string& what);

}  // namespace qloom::agent
