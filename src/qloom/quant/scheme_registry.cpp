#include "qloom/quant/scheme_registry.h"

#include <algorithm>
#include <cctype>

#include "qloom/core/strings.h"
#include "qloom/core/error.h"

namespace qloom::quant {
namespace {

// ---- spec builders ---------------------------------------------------------------
// Each mirrors one Quark DataTypeSpec.to_quantization_spec() (amd-quark 0.13,
// quark/torch/quantization/config/config.py) with the arguments template.py
// passes. Fields not set keep QuantSpec's defaults, which are Quark's
// (round_method "half_even", scale_type "float", scale_format null, ...).

// FP8E4M3PerTensorSpec(observer_method="min_max", scale_type=..., is_dynamic=...):
// symmetric=True, round_method=half_even, qscheme=per_tensor. FP8Scheme passes
// scale_type="float"; the KV-cache spec passes none, so scale_type is null.
QuantSpec fp8_per_tensor(bool dynamic, const char* scale_type) {
  QuantSpec s;
  s.dtype = QDtype::kFp8E4M3;
  s.qscheme = QScheme::kPerTensor;
  s.is_dynamic = dynamic;
  s.symmetric = true;
  s.round_method = "half_even";
  s.scale_type = scale_type;
  s.observer_cls = "PerTensorMinMaxObserver";
  return s;
}

// FP8E4M3PerChannelSpec(is_dynamic, ch_axis): symmetric=True,
// scale_type="float", round_method="half_even", PerChannelMinMaxObserver.
QuantSpec fp8_per_channel(bool dynamic, int ch_axis) {
  QuantSpec s;
  s.dtype = QDtype::kFp8E4M3;
  s.qscheme = QScheme::kPerChannel;
  s.is_dynamic = dynamic;
  s.ch_axis = ch_axis;
  s.symmetric = true;
  s.observer_cls = "PerChannelMinMaxObserver";
  return s;
}

// Int8PerTensorSpec(observer_method="min_max", symmetric=True,
// scale_type="float", round_method="half_even", is_dynamic=False).
QuantSpec int8_per_tensor() {
  QuantSpec s;
  s.dtype = QDtype::kInt8;
  s.qscheme = QScheme::kPerTensor;
  s.is_dynamic = false;
  s.symmetric = true;
  s.observer_cls = "PerTensorMinMaxObserver";
  return s;
}

// Int4PerGroupSpec / Uint4PerGroupSpec(ch_axis=-1, is_dynamic=False,
// scale_type="float", group_size=G): symmetric True (int4) / False (uint4),
// round_method="half_even", PerGroupMinMaxObserver.
QuantSpec int4_per_group(bool is_unsigned, int group_size) {
  QuantSpec s;
  s.dtype = is_unsigned ? QDtype::kUInt4 : QDtype::kInt4;
  s.qscheme = QScheme::kPerGroup;
  s.is_dynamic = false;
  s.ch_axis = -1;
  s.group_size = group_size;
  s.symmetric = !is_unsigned;
  s.observer_cls = "PerGroupMinMaxObserver";
  return s;
}

// Int4PerChannelSpec / Uint4PerChannelSpec(is_dynamic=False, ch_axis=0):
// symmetric True (int4) / False (uint4), scale_type="float",
// round_method="half_even", PerChannelMinMaxObserver.
QuantSpec int4_per_channel(bool is_unsigned) {
  QuantSpec s;
  s.dtype = is_unsigned ? QDtype::kUInt4 : QDtype::kInt4;
  s.qscheme = QScheme::kPerChannel;
  s.is_dynamic = false;
  s.ch_axis = 0;
  s.symmetric = !is_unsigned;
  s.observer_cls = "PerChannelMinMaxObserver";
  return s;
}

// OCP_MXFP4Spec(ch_axis=-1, is_dynamic): dtype fp4, qscheme per_group,
// group_size 32, scale_format "e8m0", scale_calculation_mode "even",
// round_method half_even, scale_type float, PerBlockMXObserver. Quark leaves
// "symmetric" null (OCP_MX_SPEC_KWARGS); the exporter writes null for MX
// specs, so the value here (true) is never serialized.
QuantSpec ocp_mxfp4(bool dynamic) {
  QuantSpec s;
  s.dtype = QDtype::kFp4;
  s.qscheme = QScheme::kPerGroup;
  s.is_dynamic = dynamic;
  s.ch_axis = -1;
  s.group_size = 32;
  s.symmetric = true;
  s.scale_format = ScaleFormat::kE8M0;
  s.scale_calculation_mode = "even";
  s.observer_cls = "PerBlockMXObserver";
  return s;
}

// OCP_MXFP6E2M3Spec / OCP_MXFP6E3M2Spec(ch_axis=-1, is_dynamic): the MXFP4
// spec with dtype fp6_e2m3 / fp6_e3m2 (same OCP_MX_SPEC_KWARGS).
QuantSpec ocp_mxfp6(QDtype fp6, bool dynamic) {
  QuantSpec s = ocp_mxfp4(dynamic);
  s.dtype = fp6;
  return s;
}

// Int4PerGroupSpec(ch_axis=-1, is_dynamic=True, group_size=G) without a
// scale_type argument: the dataclass default "float" (int4_wa_64's input).
QuantSpec int4_per_group_dynamic(int group_size) {
  QuantSpec s = int4_per_group(false, group_size);
  s.is_dynamic = true;
  return s;
}

// INT4_FP8Scheme: the weight is ProgressiveSpec(first_stage=
// FP8E4M3PerTensorSpec(min_max, scale_type="float32", static), second_stage=
// Int4PerChannelSpec(symmetric, scale_type="float32", half_even, ch_axis=0,
// static)); the input FP8E4M3PerTensorSpec(min_max, scale_type="float32",
// dynamic).
LayerQuantSpec int4_fp8_progressive() {
  LayerQuantSpec l;
  l.weight = fp8_per_tensor(false, "float32");
  QuantSpec second = int4_per_channel(false);
  second.scale_type = "float32";
  l.weight_stage2 = second;
  l.input = fp8_per_tensor(true, "float32");
  return l;
}

// FP4PerGroupSpec(ch_axis=-1, group_size=G, is_dynamic, scale_type="float32"):
// dtype fp4, PerBlockMXObserver, symmetric None, scale_format "float32",
// no scale_calculation_mode, half_even, per_group. The first stage of
// nvfp4 / amdfp4_global*: f32 group scales that the second stage quantizes.
QuantSpec fp4_per_group_f32(int group_size, bool dynamic) {
  QuantSpec s;
  s.dtype = QDtype::kFp4;
  s.qscheme = QScheme::kPerGroup;
  s.is_dynamic = dynamic;
  s.ch_axis = -1;
  s.group_size = group_size;
  s.scale_format = ScaleFormat::kFloat32;
  s.scale_type = "float32";
  s.observer_cls = "PerBlockMXObserver";
  return s;
}

// AmdFP4Spec(ch_axis=-1, group_size=16|32, is_dynamic): dtype fp4,
// PerBlockMXObserver, symmetric None, scale_type "float8_e5m3",
// scale_format "e5m3", half_even, per_group.
QuantSpec amd_fp4(int group_size, bool dynamic) {
  QuantSpec s = fp4_per_group_f32(group_size, dynamic);
  s.scale_format = ScaleFormat::kE5M3;
  s.scale_type = "float8_e5m3";
  return s;
}

// The second stage of ScaleQuantSpec: FP8E4M3PerTensorSpec /
// FP8E5M3PerTensorSpec(observer_method="min_max", is_dynamic=False,
// scale_type="float32") with is_scale_quant=True: a static per-tensor
// (global) scale for the first stage's group scales.
QuantSpec scale_stage(QDtype dtype) {
  QuantSpec s = fp8_per_tensor(false, "float32");
  s.dtype = dtype;
  s.is_scale_quant = true;
  return s;
}

// ScaleQuantSpec(first=FP4PerGroupSpec(G, "float32"), second=scale_stage)
// for the weight (static) and the input (dynamic first stage, static
// calibrated second stage): FP4Block16ScaleE4M3Scheme (nvfp4) and
// AmdFP4GlobalScaleScheme (amdfp4_global16/32).
LayerQuantSpec fp4_scale_quant(int group_size, QDtype scale_dtype) {
  LayerQuantSpec l;
  l.weight = fp4_per_group_f32(group_size, false);
  l.weight_stage2 = scale_stage(scale_dtype);
  l.input = fp4_per_group_f32(group_size, true);
  l.input_stage2 = scale_stage(scale_dtype);
  return l;
}

LayerQuantSpec weight_only(QuantSpec w) {
  LayerQuantSpec l;
  l.weight = std::move(w);
  return l;
}
LayerQuantSpec weight_and_input(QuantSpec w, QuantSpec in) {
  LayerQuantSpec l;
  l.weight = std::move(w);
  l.input = std::move(in);
  return l;
}

// Registry order = Quark's QuantizationSchemeCollection._collect_supported_schemes.
std::vector<SchemeDef> build_schemes() {
  std::vector<SchemeDef> v;
  auto g = [](int gs) { return std::to_string(gs); };
  for (int gs : {32, 64, 128})
    v.push_back({"int4_wo_" + g(gs), weight_only(int4_per_group(false, gs)),
                 "W4A16: int4 symmetric weights, one scale per " + g(gs) +
                     " input elements (Int4WeightOnlyScheme)"});
  v.push_back({"int4_wo_per_channel", weight_only(int4_per_channel(false)),
               "W4A16: int4 symmetric weights, one scale per output channel"});
  v.push_back({"int4_wa_64", weight_and_input(int4_per_group(false, 64), int4_per_group_dynamic(64)),
               "W4A4: int4 symmetric weights and dynamic int4 activations, one scale per 64 input "
               "elements (Int4WeightAndActivationScheme)"});
  for (int gs : {32, 64, 128})
    v.push_back({"uint4_wo_" + g(gs), weight_only(int4_per_group(true, gs)),
                 "W4A16: uint4 asymmetric weights (scale + zero point) per " + g(gs) +
                     " input elements (Uint4WeightOnlyScheme)"});
  v.push_back({"uint4_wo_per_channel", weight_only(int4_per_channel(true)),
               "W4A16: uint4 asymmetric weights, scale + zero point per output channel"});
  v.push_back({"int8", weight_and_input(int8_per_tensor(), int8_per_tensor()),
               "W8A8: int8 symmetric per-tensor weights and static per-tensor activations"});
  v.push_back({"fp8", weight_and_input(fp8_per_tensor(false, "float"), fp8_per_tensor(false, "float")),
               "W8A8: fp8 e4m3 per-tensor weights and static per-tensor activations"});
  v.push_back({"ptpc_fp8", weight_and_input(fp8_per_channel(false, 0), fp8_per_channel(true, 1)),
               "W8A8: fp8 e4m3 per-channel weights, dynamic per-token activations"});
  v.push_back({"mxfp4", weight_and_input(ocp_mxfp4(false), ocp_mxfp4(true)),
               "OCP MXFP4: fp4 e2m1 weights and dynamic activations, e8m0 scale per 32 elements"});
  v.push_back({"mxfp4_weight_only", weight_only(ocp_mxfp4(false)),
               "OCP MXFP4 weights only (e8m0 scale per 32 elements), activations unquantized"});
  v.push_back({"mxfp6_e3m2", weight_and_input(ocp_mxfp6(QDtype::kFp6E3M2, false), ocp_mxfp6(QDtype::kFp6E3M2, true)),
               "OCP MXFP6 e3m2: fp6 weights and dynamic activations, e8m0 scale per 32 elements"});
  v.push_back({"mxfp6_e2m3", weight_and_input(ocp_mxfp6(QDtype::kFp6E2M3, false), ocp_mxfp6(QDtype::kFp6E2M3, true)),
               "OCP MXFP6 e2m3: fp6 weights and dynamic activations, e8m0 scale per 32 elements"});
  v.push_back({"mxfp4_mxfp6_e2m3", weight_and_input(ocp_mxfp4(false), ocp_mxfp6(QDtype::kFp6E2M3, true)),
               "OCP MXFP4 weights, dynamic MXFP6 e2m3 activations (e8m0 scales per 32 elements)"});
  // MXFP4_FP8Scheme: FP8E4M3PerTensorSpec(observer_method="min_max",
  // is_dynamic=False) without scale_type, so scale_type is null.
  v.push_back({"mxfp4_fp8", weight_and_input(ocp_mxfp4(false), fp8_per_tensor(false, "")),
               "W4A8: OCP MXFP4 weights, static per-tensor fp8 e4m3 activations (calibrated)"});
  v.push_back({"amdfp4", weight_and_input(amd_fp4(16, false), amd_fp4(16, true)),
               "AMD FP4: fp4 e2m1 weights and dynamic activations, e5m3 scale per 16 elements (AmdFP4Scheme)"});
  v.push_back({"amdfp4_g32", weight_and_input(amd_fp4(32, false), amd_fp4(32, true)),
               "AMD FP4: fp4 e2m1 weights and dynamic activations, e5m3 scale per 32 elements (AmdFP4Scheme)"});
  v.push_back({"int4_fp8", int4_fp8_progressive(),
               "W4A8: int4 per-channel weights quantized progressively (fp8 e4m3 per tensor, then int4), "
               "dynamic per-tensor fp8 activations"});
  const std::string nvfp4_desc =
      "NVFP4: fp4 e2m1 weights and dynamic activations per 16 elements, fp8 e4m3 group scales under a "
      "per-tensor f32 global scale (static; q/k/v and gate/up share it)";
  v.push_back({"nvfp4", fp4_scale_quant(16, QDtype::kFp8E4M3), nvfp4_desc + " (FP4Block16ScaleE4M3Scheme)"});
  v.push_back({"fp4_block16_scale_e4m3", fp4_scale_quant(16, QDtype::kFp8E4M3),
               nvfp4_desc + "; Quark's legacy alias of nvfp4"});
  for (int gs : {16, 32})
    v.push_back({"amdfp4_global" + g(gs), fp4_scale_quant(gs, QDtype::kFp8E5M3),
                 "AMD FP4: fp4 e2m1 weights and dynamic activations per " + g(gs) +
                     " elements, e5m3 group scales under a per-tensor f32 global scale (AmdFP4GlobalScaleScheme)"});
  return v;
}

const std::vector<SchemeDef>& schemes() {
  static const std::vector<SchemeDef> v = build_schemes();
  return v;
}

// Quark's DEFAULT_TEMPLATES (amd-quark 0.13 wheel,
// quark/torch/quantization/config/template.py): model_type ->
// (exclude_layers_name, kv_layers_name), in Quark's order.
const std::vector<ModelTemplate>& templates() {
  static const std::vector<ModelTemplate> v = {
    {"chatglm", {"transformer.output_layer"}, {"*query_key_value"}},
    {"cohere", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"dbrx", {"lm_head", "*router.layer"}, {"*Wqkv"}},
    {"deepseek", {"lm_head", "*.gate"}, {"*k_proj", "*v_proj"}},
    {"deepseek_v2", {"lm_head", "*self_attn*", "*mlp.gate"}, {"*kv_b_proj"}},
    {"deepseek_v3", {"lm_head", "*self_attn*", "*mlp.gate"}, {"*kv_b_proj"}},
    {"deepseek_v32", {"lm_head", "*mlp.gate", "model.layers.61.*", "*self_attn*"}, {"*kv_b_proj"}},
    {"deepseek_v4", {"*attn*", "embed", "head", "*ffn.gate*", "hc_*", "mtp.*"}, {"*wkv"}},
    {"deepseek_vl_v2", {"lm_head", "model.sam_model*", "model.vision_model*", "model.projector*"}, {"*k_proj", "*v_proj"}},
    {"gemma2", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"gemma3", {"*vision_tower*", "*multi_modal_projector*", "*lm_head"}, {"*language_model.*k_proj", "*language_model.*v_proj"}},
    {"gemma3_text", {"*lm_head"}, {"*k_proj", "*v_proj"}},
    {"gemma4", {"*vision_tower*", "*embed_vision*", "*audio_tower*", "*embed_audio*", "*multi_modal_projector*", "*lm_head", "*router.proj"}, {"*language_model.*k_proj", "*language_model.*v_proj"}},
    {"gemma4_unified", {"*embed_vision*", "*vision_embedder*", "*embed_audio*", "*lm_head"}, {"*language_model.*k_proj", "*language_model.*v_proj"}},
    {"glm4_moe", {"lm_head", "*mlp.gate", "*self_attn*", "*shared_experts.*", "*mlp.down_proj", "*mlp.gate_proj", "*mlp.up_proj"}, {"*k_proj", "*v_proj"}},
    {"glm4_moe_lite", {"lm_head", "*self_attn*", "*mlp.gate"}, {"*kv_a_proj_with_mqa", "*kv_b_proj"}},
    {"glm_moe_dsa", {"*self_attn*", "*mlp.gate", "*lm_head", "*mlp.gate_proj", "*mlp.up_proj", "*mlp.down_proj"}, {"*kv_a_proj_with_mqa", "*kv_b_proj"}},
    {"glm5_next", {"*self_attn*", "*mlp.gate", "*mlp.gate_proj", "*mlp.up_proj", "*mlp.down_proj", "*visual*", "*lm_head*", "model.language_model.layers.45.*"}, {"*self_attn.kv_b_proj"}},
    {"gptj", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"gpt_oss", {"lm_head", "*router*"}, {"*k_proj", "*v_proj"}},
    {"granitemoehybrid", {"lm_head", "*router*"}, {"*k_proj", "*v_proj"}},
    {"grok-1", {"lm_head", "*.gate"}, {"*k_proj", "*v_proj"}},
    {"hunyuan_v1_dense", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"instella", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"kimi_k2", {"*self_attn*", "*mlp.gate", "*lm_head", "*mlp.gate_proj", "*mlp.up_proj", "*mlp.down_proj", "*shared_experts*"}, {"*kv_a_proj_with_mqa", "*kv_b_proj"}},
    {"kimi_k25", {"*self_attn*", "*mlp.gate", "*lm_head", "*mlp.gate_proj", "*mlp.up_proj", "*mlp.down_proj", "*shared_experts*", "*mm_projector*", "*vision_tower*"}, {"*kv_a_proj_with_mqa", "*kv_b_proj"}},
    {"kimi_k3", {"*block_sparse_moe.gate*", "*block_sparse_moe.routed_expert_down_proj*", "*block_sparse_moe.routed_expert_up_proj*", "*lm_head*", "*vision_tower*", "*mm_projector*", "*self_attention_res_proj*", "*mlp_res_proj*", "*output_attn_res_proj*", "*self_attn.*_conv1d*"}, {"*self_attn.k_proj", "*self_attn.v_proj", "*self_attn.kv_a_proj_with_mqa"}},
    {"lfm2", {"lm_head", "*conv.in_proj", "*conv.out_proj"}, {"*self_attn.k_proj", "*self_attn.v_proj"}},
    {"llama", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"llama4", {"multi_modal_projector*", "*feed_forward.router", "vision_model*", "*lm_head"}, {"*language_model.*.k_proj", "*language_model.*.v_proj"}},
    {"minimax_m2", {"lm_head", "*block_sparse_moe.gate*", "*self_attn*"}, {"*k_proj", "*v_proj"}},
    {"minimax_m3_vl", {"*lm_head", "*vision_tower*", "*multi_modal_projector*", "*patch_merge_mlp*", "*block_sparse_moe.gate", "*self_attn*"}, {"*language_model.*k_proj", "*language_model.*v_proj"}},
    {"mistral", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"mixtral", {"lm_head", "*.gate"}, {"*k_proj", "*v_proj"}},
    {"mllama", {"*lm_head", "*patch_embedding", "multi_modal_projector"}, {"*language_model.*k_proj", "*language_model.*v_proj"}},
    {"muse_glimmer", {"*vision_tower*", "*vision_adapter*", "*vision_projection*", "lm_head"}, {"*language_model.*k_proj", "*language_model.*v_proj"}},
    {"olmo", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"opt", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"phi", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"phi3", {"lm_head"}, {"*qkv_proj"}},
    {"qwen", {"lm_head"}, {"*c_attn"}},
    {"qwen2", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"qwen2_moe", {"lm_head", "*.gate", "*.shared_expert_gate"}, {"*k_proj", "*v_proj"}},
    {"qwen3", {"lm_head"}, {"*k_proj", "*v_proj"}},
    {"qwen3_moe", {"lm_head", "*.gate"}, {"*k_proj", "*v_proj"}},
    {"qwen3_next", {"lm_head", "mtp.fc", "*linear_attn.in_proj_ba", "*linear_attn.in_proj_qkvz", "*mlp.gate", "*mlp.shared_expert_gate", "*self_attn.k_proj", "*self_attn.q_proj", "*self_attn.v_proj"}, {"*qkvz"}},
    {"qwen3_vl_moe", {"lm_head", "*mlp.gate", "*.visual.*"}, {"*k_proj", "*v_proj"}},
    {"qwen3_5_moe", {"lm_head", "model.visual.*", "mtp.*", "*mlp.gate", "*shared_expert_gate*", "*.linear_attn.*", "*.self_attn.*", "*.shared_expert.*"}, {"*k_proj", "*v_proj"}},
    {"qwen3_5", {"lm_head", "model.visual.*", "*mtp*"}, {"*self_attn.k_proj", "*self_attn.v_proj"}},
    {"qwen4_exp", {"lm_head", "model.visual.*", "mtp.*", "*mlp.gate", "*shared_expert_gate*", "*.linear_attn.*", "*.self_attn.*", "*hyper_connection*", "*.ple.*"}, {"*self_attn.k_proj", "*self_attn.v_proj"}},
    {"qwen4_exp_text", {"lm_head", "model.visual.*", "mtp.*", "*mlp.gate", "*shared_expert_gate*", "*.linear_attn.*", "*.self_attn.*", "*hyper_connection*", "*.ple.*"}, {"*self_attn.k_proj", "*self_attn.v_proj"}},
  };
  return v;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

// "did you mean 'a' or 'b'? " prefix for a remedy, or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const auto near = near_misses(name, candidates);
  if (near.empty()) return {};
  std::string s = "did you mean ";
  for (size_t i = 0; i < near.size(); ++i) {
    if (i) s += i + 1 == near.size() ? " or " : ", ";
    s += "'" + near[i] + "'";
  }
  return s + "? ";
}

}  // namespace

const SchemeDef* find_scheme(std::string_view name) {
  for (const auto& s : schemes())
    if (s.name == name) return &s;
  return nullptr;
}

const std::vector<std::string>& quark_only_scheme_names() {
  // LLMTemplate.get_supported_schemes() of amd-quark 0.13 minus the above.
  static const std::vector<std::string> v = {"mx6", "mx9", "bfp16"};
  return v;
}

const SchemeDef& get_scheme(std::string_view name) {
  if (const SchemeDef* s = find_scheme(name)) return *s;
  const auto known = scheme_names();
  if (name == "mx6" || name == "mx9" || name == "bfp16")
    throw Error(ErrorKind::kUnsupported, "", "--quant_scheme",
                "scheme '" + std::string(name) +
                    "' is a Quark simulation-only block format: amd-quark 0.13 cannot export it to a "
                    "real-quantized checkpoint (its RealQuantizer rejects mx6, mx9 and bfp16), and no "
                    "runtime loads it, so qloom does not write one",
                "for OCP MX block formats that export and serve, use mxfp6_e2m3, mxfp6_e3m2, mxfp4 or "
                "mxfp4_fp8");
  const auto& later = quark_only_scheme_names();
  if (std::find(later.begin(), later.end(), name) != later.end())
    throw Error(ErrorKind::kUnsupported, "", "--quant_scheme",
                "scheme '" + std::string(name) + "' is a Quark scheme that qloom does not implement yet",
                "choose one of: " + join(known, ", "));
  throw Error(ErrorKind::kUsage, "", "--quant_scheme", "unknown scheme '" + std::string(name) + "'",
              did_you_mean(name, known) + "known: " + join(known, ", "));
}

std::vector<std::string> scheme_names() {
  std::vector<std::string> v;
  for (const auto& s : schemes()) v.push_back(s.name);
  return v;
}

std::vector<std::string> kv_cache_dtype_names() { return {"fp8"}; }

QuantSpec kv_cache_spec(std::string_view kv_dtype) {
  // LLMTemplate._set_kv_cache_config: FP8E4M3PerTensorSpec(observer_method=
  // "min_max", is_dynamic=False) as output_tensors of every kv_layers_name
  // pattern; _SUPPORTED_KV_CACHE_SCHEMES = ["fp8"].
  if (kv_dtype == "fp8") return fp8_per_tensor(false, "");
  const auto known = kv_cache_dtype_names();
  throw Error(ErrorKind::kUsage, "", "--kv_cache_dtype",
              "unknown KV-cache dtype '" + std::string(kv_dtype) + "'",
              did_you_mean(kv_dtype, known) + "known: " + join(known, ", "));
}

const ModelTemplate* find_model_template(std::string_view model_type) {
  for (const auto& t : templates())
    if (t.model_type == model_type) return &t;
  return nullptr;
}

std::vector<std::string> model_template_names() {
  std::vector<std::string> v;
  for (const auto& t : templates()) v.push_back(t.model_type);
  return v;
}

std::vector<std::string> default_exclude_layers(std::string_view model_type) {
  if (const ModelTemplate* t = find_model_template(model_type)) return t->exclude_layers;
  return {"lm_head"};
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> near_misses(std::string_view name, const std::vector<std::string>& candidates,
                                     size_t max_results) {
  const std::string lname = lower_ascii(name);
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, candidate index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string lc = lower_ascii(candidates[i]);
    // Case-insensitive match, or the name as a whole "_"-separated prefix
    // ("int4_wo" -> "int4_wo_32") ranks first.
    size_t d = lc == lname ? 0 : edit_distance(lname, lc);
    if (d > limit && !lname.empty() && lc.size() > lname.size() && lc.compare(0, lname.size(), lname) == 0 &&
        lc[lname.size()] == '_')
      d = limit;
    if (d <= limit) scored.emplace_back(d, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [d, i] : scored) {
    if (out.size() == max_results) break;
    out.push_back(candidates[i]);
  }
  return out;
}

}  // namespace qloom::quant
