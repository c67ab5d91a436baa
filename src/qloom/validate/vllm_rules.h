// Validation step 6, "loads in vLLM": a static check of the rules vLLM's
// Quark loader applies when it reads a checkpoint, so that a checkpoint that
// was written fine but that vLLM would refuse (or load with the wrong
// scheme) fails here, naming the layer or field and what to change.
//
// Read from vLLM 0.33.0 (commit 4ba787ec9, the PyPI release; files
// vllm/model_executor/layers/quantization/quark/quark.py, quark/utils.py,
// quark/schemes/*.py, utils/config_utils.py, utils/ocp_mx_utils.py,
// kv_cache.py, models/llama.py). What that loader does, as these rules model it:
//  - exclude: QuarkConfig.get_quant_method_target -> should_ignore_layer: an
//    entry excludes a layer when it equals the layer name, or is "re:<regex>"
//    and re.match()es it; globs are NOT expanded. A fused layer
//    (qkv_proj, gate_up_proj) is excluded when an entry matches its own name,
//    else when every shard is; some shards only -> ValueError.
//  - layer config (_find_matched_config): layer_quant_config in key order,
//    a key without '*' matching when the layer name is a substring of it, a
//    key with '*' by fnmatch; then layer_type_quant_config, looked up by the
//    layer's Python class (type(module)), which never equals a JSON key; then
//    global_quant_config. A fused layer resolves each shard (q/k/v_proj,
//    gate/up_proj) and raises ValueError unless all are deep-equal.
//  - from_config: export.kv_cache_group patterns must match
//    layer_quant_config keys (fnmatchcase); those entries' output_tensors
//    must be deep-equal and not null; they become the KV-cache spec and are
//    then cleared, as is layer_quant_config["*q_proj"].output_tensors.
//    QuarkKVCacheMethod accepts dtype fp8_e4m3, qscheme per_tensor only; the
//    scales are <k|v>_proj.output_scale, scalars (KVCacheScaleParameter).
//  - _get_scheme_cls_from_config: a config with truthy output_tensors or
//    bias raises NotImplementedError; otherwise the (weight, input_tensors)
//    pair must satisfy one of _is_nvfp4, _is_fp8_w8a8, _is_w8a8_int8,
//    _is_w4a16_int4, _is_w4a8_mxfp4_fp8, _is_w_ocp_mx_a_x.
//  - export.pack_method: read only by the W4A16 int4 path (must be "order" or
//    "reorder"; canonicalize_quark_packed_int4 reads nibble i of a word as
//    element [0,4,1,5,2,6,3,7][i] for "reorder", element i for "order").
// Fused groups follow LlamaForCausalLM.packed_modules_mapping
// (qkv_proj: q/k/v_proj, gate_up_proj: gate/up_proj), which most vLLM
// decoder models share. MoE experts (FusedMoE) and routers are not checked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/io/weight_index.h"

namespace qloom::validate::vllm {

inline constexpr const char* kVllmVersion = "0.33.0";
inline constexpr const char* kVllmCommit = "4ba787ec9";

// One thing vLLM would refuse or get wrong.
struct Finding {
  std::string where;  // the layer, or the quantization_config field
  std::string what;   // what vLLM does with it
  std::string fix;    // what to change
};

struct RuleResult {
  std::string id;     // "lookup_order", "fused_modules", ...
  std::string title;  // "layer-config lookup order", ...
  std::string checked;  // one line: what was checked (reported when no finding)
  std::vector<Finding> findings;
  bool ok() const { return findings.empty(); }
};

// What the rules read. `linears` are the modules vLLM builds as linear layers
// (LinearBase) from this checkpoint: every module with a 2-D "<m>.weight"
// except embeddings, lm_head, MoE experts and routers, in checkpoint order.
struct CheckpointView {
  nlohmann::json qc;                       // quantization_config
  std::vector<std::string> linears;
  std::vector<std::string> quantized;      // linears with "<m>.weight_scale"
  std::vector<std::string> quantized_embeddings;  // embed / lm_head with a weight_scale
  const io::WeightIndex* weights = nullptr;  // the quantized checkpoint's tensors
  const io::WeightIndex* source = nullptr;   // the source model's, may be null
  bool is_quantized(const std::string& module) const;
};

// Builds the view from a checkpoint's tensors and its quantization_config.
CheckpointView make_view(const nlohmann::json& qc, const io::WeightIndex& weights,
                         const io::WeightIndex* source);

// --- vLLM's semantics, as the rules use them -------------------------------

// Python's deep_compare of quark/utils.py: same JSON type (int and float
// differ, as do bool and int), same keys, equal elements.
bool deep_compare(const nlohmann::json& a, const nlohmann::json& b);
// The first field where a and b differ, "weight.qscheme: per_tensor / per_channel".
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path = "");
// Python truthiness of a JSON value (null, false, 0, "", [], {} are false).
bool truthy(const nlohmann::json& v);
// obj[key] as Python's dict.get: null when obj is not an object or lacks key.
const nlohmann::json& get(const nlohmann::json& obj, const char* key);

// should_ignore_layer for one (unfused) layer name: the matching exclude
// entry, or nullopt. An invalid "re:" regex is reported through *error.
std::optional<std::string> excluded_by(const nlohmann::json& qc, const std::string& layer,
                                       std::string* error = nullptr);

// Where vLLM finds a layer's config, after from_config's KV-cache edit.
struct Resolved {
  std::string source;      // "layer_quant_config['*k_proj']" or "global_quant_config"
  nlohmann::json config;   // the config dict (null when absent)
};
// The quantization_config as vLLM holds it after from_config (KV output specs cleared).
nlohmann::json after_from_config(const nlohmann::json& qc);
// _find_matched_config of an unfused layer on `qc` (pass after_from_config(...)).
Resolved vllm_lookup(const nlohmann::json& qc, const std::string& layer);
// Quark's own lookup (fnmatch on layer_quant_config keys, then global), for comparison.
Resolved quark_lookup(const nlohmann::json& qc, const std::string& layer);

// A fused vLLM layer and its shards present in the checkpoint.
struct FusedGroup {
  std::string name;                 // "model.layers.0.self_attn.qkv_proj"
  std::vector<std::string> shards;  // "...q_proj", "...k_proj", "...v_proj"
};
std::vector<FusedGroup> fused_groups(const std::vector<std::string>& linears);

// The vLLM scheme class a (weight, input_tensors) pair selects.
struct SchemeMatch {
  std::string scheme;       // "QuarkW8A8Fp8", ... ; empty: none
  std::string error;        // vLLM's exception when it raises instead
  std::string min_version;  // first vLLM release that accepts this pair
  int min_capability = 0;   // the scheme's get_min_capability (sm 89 = 8.9)
};
SchemeMatch match_scheme(const nlohmann::json& config, const nlohmann::json& qc);

// --- the rules -------------------------------------------------------------
RuleResult rule_lookup_order(const CheckpointView& v);
RuleResult rule_fused_modules(const CheckpointView& v);
RuleResult rule_kv_cache(const CheckpointView& v);
RuleResult rule_output_and_bias(const CheckpointView& v);
RuleResult rule_pack_method(const CheckpointView& v);
RuleResult rule_scheme_pairs(const CheckpointView& v);

// All six, in this order.
std::vector<RuleResult> run_rules(const CheckpointView& v);

}  // namespace qloom::validate::vllm
