// The quantization_config that AMD Quark writes into config.json when it
// exports a model in hf_format ("quant_method": "quark"), and its inverse for
// reading Quark checkpoints back.
//
// Target format: amd-quark 0.13 by default (QTensorConfig.to_dict has the 17
// keys below; exclude patterns are matched verbatim), or amd-quark 0.12.post1
// on request (QuarkFormat::k0_12: 16 keys, no zero_point_type, exclude
// patterns expanded). Every rule here was checked against those wheels'
// source and against config.json files they exported (tests/data/quark for
// 0.12.post1, tests/data/quark013 for 0.13); the file and function are cited
// next to each rule. Reading accepts amd-quark 0.9 .. 0.13.
//
// vLLM reads neither "version" nor "zero_point_type" (quark.py reads specs
// with dict.get), so every vLLM release loads both forms; the 0.12.post1
// form is for tools that compare the config with an 0.12 export.
//
// Key order: the functions return Quark's in-memory order (the order of its
// to_dict()). config.json itself is written by transformers' save_pretrained,
// which sorts every object's keys (json.dumps(indent=2, sort_keys=True));
// dump_hf_json() reproduces that, so the file's order is alphabetical. List
// order (exclude, algo_config, a two-stage spec) is kept.
//
// Implementation: quark_spec_json.cpp (tensor / layer specs),
// quark_config.cpp (the whole config, layer lookup), quark_patterns.cpp
// (exclude expansion, fnmatch), hf_json.cpp (config.json text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/quant_spec.h"

namespace qloom::exporter {

// The Quark release whose config form is written. Flag: --quark_format_version
// (--quark-format-version) 0.13 | 0.12.post1.
enum class QuarkFormat : uint8_t { k0_13, k0_12 };
// quark/version.py of the wheel the default form follows; written as
// "version" when QuarkConfigInput::quark_version is empty.
inline constexpr const char* kQuarkFormatVersion = "0.13";
// "0.13" / "0.12.post1".
const char* quark_format_version(QuarkFormat f);
// "0.13" -> k0_13; "0.12.post1" (or "0.12") -> k0_12; else kUsage.
QuarkFormat parse_quark_format(const std::string& v);
// QTensorConfig.max_input_numel default (4 * 1024 * 1024).
inline constexpr int64_t kQuarkMaxInputNumel = 4 * 1024 * 1024;

// One tensor spec as Quark's QTensorConfig.to_dict() writes it
// (quark/torch/quantization/config/config.py, QTensorConfig.to_dict), keys in
// this order:
//   dtype                 Dtype enum name: "int8", "uint8", "int4", "uint4",
//                         "fp8_e4m3", "fp8_e5m2", "fp8_e5m3", "fp4",
//                         "fp6_e2m3", "fp6_e3m2"
//   is_dynamic            bool
//   qscheme               "per_tensor" | "per_channel" | "per_group"
//   ch_axis               null for per_tensor (BaseQTensorConfig default None;
//                         the per-tensor Spec helpers never set it), else the
//                         int (0 for per-channel weights, 1 for per-token
//                         activations, -1 for per-group / MX)
//   group_size            the int for per_group, else null
//   block_size            the spec's block_size when > 0, else null
//   symmetric             bool; null for MX formats (OCP_MXSpec passes
//                         symmetric=None), i.e. scale_format e8m0
//   round_method          "half_even" (RoundType name); null when empty
//   scale_type            ScaleType name ("float", "float32",
//                         "float8_e5m3"...); null when empty — Quark's
//                         FP8 KV-cache spec has scale_type None
//                         (template.py _set_kv_cache_config builds
//                         FP8E4M3PerTensorSpec without scale_type)
//   zero_point_type       ZeroPointType name ("int32"); null when empty
//                         (0.13 only: not written in the 0.12 form)
//   scale_format          "e8m0" for MX, "e5m3" for AMD FP4, else null
//   scale_calculation_mode "even" for MX, else null (when empty)
//   mx_element_dtype      the spec's string, null when empty
//   observer_cls          class name, e.g. "PerTensorMinMaxObserver",
//                         "PerChannelMinMaxObserver", "PerGroupMinMaxObserver",
//                         "PerBlockMXObserver"; null when empty
//   is_scale_quant        bool (true: the second stage of a ScaleQuantSpec)
//   enable_buffer_reuse   bool
//   max_input_numel       the int (Quark's default 4194304)
nlohmann::ordered_json quant_spec_to_json(const quant::QuantSpec& spec, QuarkFormat f = QuarkFormat::k0_13);

// Strict inverse. `where` names the JSON location for errors (e.g.
// "quantization_config.global_quant_config.weight"), `file` the file (may be
// empty). Accepts the 13-key form of amd-quark 0.9-0.11, the 16-key form of
// 0.12, the 17-key form of 0.13 (zero_point_type "int32" or null) and the
// legacy "dynamic"/"axis" spellings Quark's own from_dict accepts. Throws
// qloom::Error: kInvalidInput for wrong JSON types, missing keys (dtype,
// qscheme, is_dynamic; ch_axis for per_channel/per_group; group_size for
// per_group) and unknown keys; kUnsupported for values qloom cannot represent
// (unknown dtype, a block_size (mx6 / mx9), scale_format other than
// e8m0 / e5m3 / null, an mx_element_dtype, zero_point_type float32).
// null symmetric reads as true; null round_method / scale_type /
// scale_calculation_mode / observer_cls / zero_point_type read as "";
// an absent zero_point_type (amd-quark <= 0.12) as "int32" (from_dict's
// default).
quant::QuantSpec quant_spec_from_json(const nlohmann::json& j, const std::string& where,
                                      const std::string& file = {});

// QLayerConfig.to_dict(): {input_tensors, output_tensors, weight, bias,
// target_device: null}, absent specs as null; a weight / input with a second
// stage (weight_stage2 / input_stage2: Quark's TwoStageSpec, progressive or
// scale-quant) as the list [first, second].
nlohmann::ordered_json layer_spec_to_json(const quant::LayerQuantSpec& spec,
                                          QuarkFormat f = QuarkFormat::k0_13);
// Inverse; a two-element list for weight / input_tensors fills the stage2
// field; any other list is kUnsupported. target_device must be null or absent.
quant::LayerQuantSpec layer_spec_from_json(const nlohmann::json& j, const std::string& where,
                                           const std::string& file = {});

// Quark's exclude expansion (QConfig.__post_init__, 0.12 only): every pattern that
// does not end with ".*" becomes p + ".*" followed by p; patterns ending with
// ".*" are kept once. Order and duplicates as given.
std::vector<std::string> expand_exclude(const std::vector<std::string>& exclude);

// Python fnmatch.fnmatch on POSIX (what Quark, vLLM and transformers use for
// layer patterns): '*' any run of characters (dots included), '?' one
// character, "[seq]" / "[!seq]" a character class, a '[' without its ']' a
// literal. Case-sensitive.
bool fnmatch(std::string_view name, std::string_view pattern);

struct QuarkConfigInput {
  quant::LayerQuantSpec global;
  // Layer-name pattern -> spec (Quark's layer_quant_config; fnmatch
  // patterns), in insertion order as Quark's dict keeps it (the first match
  // wins at quantize time; a repeated pattern keeps its first position and
  // takes the last spec). config.json sorts the keys when written.
  std::vector<std::pair<std::string, quant::LayerQuantSpec>> layer_quant_config;
  // Exclude patterns as given (--exclude_layers, or the model template's
  // defaults such as "lm_head"); expanded (expand_exclude) in the 0.12 form.
  std::vector<std::string> exclude;
  // The model's quantizable modules (Quark's LAYER_TO_QUANT_LAYER_MAP:
  // nn.Linear, nn.Embedding, nn.EmbeddingBag, nn.Conv2d, nn.ConvTranspose2d)
  // by full name in the model's module order (named_modules: for a llama
  // decoder model.embed_tokens, then per layer q/k/v/o_proj, gate/up/down_proj,
  // then lm_head — also when lm_head is tied and has no tensor of its own).
  // When given, "exclude" is written as Quark's quantize flow leaves it:
  // setup_config_per_layer (quantization/model_transformation.py) replaces
  // the patterns by the names of the modules they exclude (each once, in
  // module order); that is what real Quark checkpoints contain. When absent,
  // the expanded patterns (expand_exclude) are written, i.e. QConfig.to_dict()
  // of a config that never went through quantize_model.
  std::optional<std::vector<std::string>> quantizable_modules;
  std::optional<quant::QuantSpec> kv_cache;  // output spec of the KV layers
  std::vector<std::string> kv_cache_layers;   // e.g. "*k_proj", "*v_proj"
  nlohmann::ordered_json algo_config;         // null or a list of algo dicts
  // --attention_dtype fp8 (template.py _set_attention_config): the
  // softmax output spec (softmax_quant_spec), also set as the output spec of
  // the q projections (q_layers, e.g. "*q_proj"; an excluded one is skipped).
  std::optional<quant::QuantSpec> softmax;
  std::vector<std::string> q_layers;
  // QConfig.kv_cache_post_rope (written as is).
  bool kv_cache_post_rope = false;
  double min_kv_scale = 0.0;
  std::string pack_method = "reorder";        // "reorder" | "order"
  QuarkFormat format = QuarkFormat::k0_13;
  std::string quark_version;                  // empty: quark_format_version(format)
};

// The dict Quark puts under "quantization_config" (QConfig.to_dict() plus
// "export" = dataclasses.asdict(JsonExporterConfig), api.py
// QuarkSafetensorsExporter._prepare_quantization_config), keys in Quark's
// order:
//   global_quant_config, exclude (module names or patterns, see
//   QuarkConfigInput::quantizable_modules), algo_config, softmax_quant_spec
//   (null unless attention is quantized), quant_method "quark",
//   layer_type_quant_config ({}), layer_quant_config, kv_cache_quant_config,
//   kv_cache_post_rope, quant_mode "eager_mode", version,
//   export {weight_merge_groups: null, kv_cache_group, min_kv_scale,
//           weight_format "real_quantized", pack_method}.
// KV cache (template.py LLMTemplate._set_kv_cache_config): for each KV layer
// pattern, the layer's weight/input spec is resolved like Quark's
// get_layer_quant_config (first matching layer_quant_config pattern, else the
// global config; an excluded pattern gets no weight/input) and, when it came
// from the global config, refined by _resolve_projection_base_spec; then
// layer_quant_config[pattern] = {weight, input, output: kv spec} (unless
// excluded) and kv_cache_quant_config[pattern] = the same. export.kv_cache_group
// is kv_cache_layers when KV quantization is on, else [] (api.py
// SafetensorsExporter._export_impl). With quantizable_modules, a KV entry
// whose pattern matches an excluded module loses its weight / input specs
// (setup_kv_cache_config sets them to None on the shared config object).
// Attention (template.py _set_attention_config, after the KV cache): each q
// layer pattern resolved the same way, unless excluded, becomes
// layer_quant_config[pattern] = {weight, input, output: softmax spec}.
// Throws kUsage for a pack_method other than reorder/order, an algo_config
// that is neither null nor a list, kv_cache without kv_cache_layers, softmax
// without q_layers, or a negative / non-finite min_kv_scale.
nlohmann::ordered_json build_quantization_config(const QuarkConfigInput& in);

// The spec Quark applies to `module` (a module path such as
// "model.layers.0.self_attn.k_proj") under a quantization_config read from a
// checkpoint, following Quark's get_layer_quant_config
// (export/main_export/quant_config_parser.py): the first layer_quant_config
// pattern that fnmatches, else the global config; an excluded module gets
// nullopt, except that an excluded KV layer keeps its output (KV) spec.
// Throws like layer_spec_from_json.
// The ordered_json overload follows the config's insertion order (what
// quantize-time matching uses); the json one the sorted order of a file.
std::optional<quant::LayerQuantSpec> resolve_layer_quant_spec(const nlohmann::json& qc,
                                                               const std::string& module,
                                                               const std::string& file = {});
std::optional<quant::LayerQuantSpec> resolve_layer_quant_spec(const nlohmann::ordered_json& qc,
                                                               const std::string& module,
                                                               const std::string& file = {});
// quantization_config.softmax_quant_spec (attention fp8), nullopt when null
// or absent. Throws like quant_spec_from_json.
std::optional<quant::QuantSpec> softmax_quant_spec(const nlohmann::json& qc, const std::string& file = {});

// The source config.json with "quantization_config" set to `qc` (replacing
// one that is there). Values of the source are kept as they are; unlike
// transformers' save_pretrained, keys equal to the class defaults are not
// dropped and transformers_version is not rewritten, so removing
// quantization_config gives back the source config exactly (as JSON values).
// Throws kInvalidInput when the source is not a JSON object.
nlohmann::json quantized_config_json(const nlohmann::json& source_config,
                                     const nlohmann::ordered_json& qc);

// Serializes like transformers' PretrainedConfig.to_json_string:
// json.dumps(obj, indent=2, sort_keys=True) + "\n" (ensure_ascii, so non-ASCII
// and DEL are \u escapes; "," / ": " separators; floats as Python's repr:
// shortest round-trip digits, fixed notation from 1e-4 up to below 1e16, e.g.
// 1e-05, 10000.0, 1000000000000000.0, 1e+16). NaN / infinity (which Python
// would write as NaN / Infinity, not JSON) come out as null.
std::string dump_hf_json(const nlohmann::json& j);

}  // namespace qloom::exporter
