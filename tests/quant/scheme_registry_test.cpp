// The scheme registry: every Quark --quant_scheme name resolves, and every
// spec field is pinned to what amd-quark 0.13 builds for that scheme
// (LLMTemplate.get("llama").get_config(scheme).to_dict(), dumped field by
// field); unknown names fail with a "did you mean"; default exclusions follow
// Quark's DEFAULT_TEMPLATES.
#include "qloom/quant/scheme_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using test::catch_error;

// The expected spec of one tensor, written out in Quark's JSON terms.
struct Want {
  QDtype dtype;
  QScheme qscheme;
  bool is_dynamic;
  int ch_axis;  // ignored for per-tensor (Quark writes null)
  int group_size;
  bool symmetric;  // ignored for MX (Quark writes null)
  ScaleFormat scale_format;
  const char* scale_type;  // "" = null
  const char* scale_calculation_mode;
  const char* observer_cls;
};

void expect_spec(const std::optional<QuantSpec>& got, const Want& w, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(got.has_value());
  const QuantSpec& s = *got;
  EXPECT_EQ(s.dtype, w.dtype);
  EXPECT_EQ(s.qscheme, w.qscheme);
  EXPECT_EQ(s.is_dynamic, w.is_dynamic);
  if (w.qscheme != QScheme::kPerTensor) {
    EXPECT_EQ(s.ch_axis, w.ch_axis);
  }
  EXPECT_EQ(s.group_size, w.group_size);
  if (w.scale_format != ScaleFormat::kE8M0) {
    EXPECT_EQ(s.symmetric, w.symmetric);
  }
  EXPECT_EQ(s.scale_format, w.scale_format);
  EXPECT_EQ(s.round_method, "half_even");
  EXPECT_EQ(s.scale_type, w.scale_type);
  EXPECT_EQ(s.scale_calculation_mode, w.scale_calculation_mode);
  EXPECT_EQ(s.observer_cls, w.observer_cls);
}

constexpr auto F = ScaleFormat::kFloat;
constexpr auto E8 = ScaleFormat::kE8M0;

TEST(SchemeRegistry, NamesAreQuarksInQuarksOrder) {
  const std::vector<std::string> want = {
      "int4_wo_32",  "int4_wo_64",       "int4_wo_128",     "int4_wo_per_channel",    "int4_wa_64",
      "uint4_wo_32", "uint4_wo_64",      "uint4_wo_128",    "uint4_wo_per_channel",   "int8",
      "fp8",         "ptpc_fp8",         "mxfp4",           "mxfp4_weight_only",      "mxfp6_e3m2",
      "mxfp6_e2m3",  "mxfp4_mxfp6_e2m3", "mxfp4_fp8",       "amdfp4",                 "amdfp4_g32",
      "int4_fp8",    "nvfp4",            "fp4_block16_scale_e4m3", "amdfp4_global16", "amdfp4_global32"};
  EXPECT_EQ(scheme_names(), want);
  for (const auto& n : want) {
    const SchemeDef* s = find_scheme(n);
    ASSERT_NE(s, nullptr) << n;
    EXPECT_EQ(s->name, n);
    EXPECT_FALSE(s->description.empty());
    EXPECT_EQ(&get_scheme(n), s);
    EXPECT_TRUE(s->linear.weight.has_value()) << n;
    EXPECT_FALSE(s->linear.output.has_value()) << n;  // only the KV cache has output specs
    EXPECT_FALSE(s->linear.bias.has_value()) << n;
  }
  EXPECT_EQ(find_scheme("FP8"), nullptr);  // exact, case-sensitive like Quark
  EXPECT_EQ(find_scheme(""), nullptr);
}

// amd-quark 0.13's FP4Block16ScaleE4M3Scheme / AmdFP4GlobalScaleScheme
// (ScaleQuantSpec lists) and AmdFP4Scheme, as its exported config.json
// writes them (demo model, tests/data/fp4_block).
TEST(SchemeRegistry, Fp4BlockSchemes) {
  constexpr auto F32 = ScaleFormat::kFloat32;
  for (const char* name : {"nvfp4", "fp4_block16_scale_e4m3", "amdfp4_global16", "amdfp4_global32"}) {
    SCOPED_TRACE(name);
    const auto& s = get_scheme(name).linear;
    const int g = std::string(name) == "amdfp4_global32" ? 32 : 16;
    const QDtype second = std::string(name).rfind("amdfp4", 0) == 0 ? QDtype::kFp8E5M3 : QDtype::kFp8E4M3;
    expect_spec(s.weight, {QDtype::kFp4, QScheme::kPerGroup, false, -1, g, true, F32, "float32", "", "PerBlockMXObserver"},
                "weight");
    expect_spec(s.input, {QDtype::kFp4, QScheme::kPerGroup, true, -1, g, true, F32, "float32", "", "PerBlockMXObserver"},
                "input");
    for (const auto* st : {&s.weight_stage2, &s.input_stage2}) {
      expect_spec(*st, {second, QScheme::kPerTensor, false, -1, 0, true, F, "float32", "", "PerTensorMinMaxObserver"},
                  "second stage");
      EXPECT_TRUE((*st)->is_scale_quant);
    }
    EXPECT_FALSE(s.weight->is_scale_quant);
  }
  EXPECT_EQ(get_scheme("nvfp4").linear, get_scheme("fp4_block16_scale_e4m3").linear);
  for (const char* name : {"amdfp4", "amdfp4_g32"}) {
    SCOPED_TRACE(name);
    const auto& s = get_scheme(name).linear;
    const int g = std::string(name) == "amdfp4" ? 16 : 32;
    const Want w{QDtype::kFp4, QScheme::kPerGroup, false, -1, g, true, ScaleFormat::kE5M3, "float8_e5m3", "",
                 "PerBlockMXObserver"};
    expect_spec(s.weight, w, "weight");
    Want in = w;
    in.is_dynamic = true;
    expect_spec(s.input, in, "input");
    EXPECT_FALSE(s.weight_stage2 || s.input_stage2);
  }
}

TEST(SchemeRegistry, Fp8) {
  const auto& s = get_scheme("fp8").linear;
  const Want w{QDtype::kFp8E4M3, QScheme::kPerTensor, false, -1, 0, true, F, "float", "",
               "PerTensorMinMaxObserver"};
  expect_spec(s.weight, w, "weight");
  expect_spec(s.input, w, "input");
}

TEST(SchemeRegistry, PtpcFp8) {
  const auto& s = get_scheme("ptpc_fp8").linear;
  expect_spec(s.weight,
              {QDtype::kFp8E4M3, QScheme::kPerChannel, false, 0, 0, true, F, "float", "", "PerChannelMinMaxObserver"},
              "weight");
  expect_spec(s.input,
              {QDtype::kFp8E4M3, QScheme::kPerChannel, true, 1, 0, true, F, "float", "", "PerChannelMinMaxObserver"},
              "input");
}

TEST(SchemeRegistry, Int8) {
  const auto& s = get_scheme("int8").linear;
  const Want w{QDtype::kInt8, QScheme::kPerTensor, false, -1, 0, true, F, "float", "", "PerTensorMinMaxObserver"};
  expect_spec(s.weight, w, "weight");
  expect_spec(s.input, w, "input");
}

TEST(SchemeRegistry, Int4AndUint4WeightOnly) {
  for (int g : {32, 64, 128}) {
    const std::string gs = std::to_string(g);
    const auto& i4 = get_scheme("int4_wo_" + gs).linear;
    expect_spec(i4.weight,
                {QDtype::kInt4, QScheme::kPerGroup, false, -1, g, true, F, "float", "", "PerGroupMinMaxObserver"},
                "int4_wo_" + gs);
    EXPECT_FALSE(i4.input.has_value());
    const auto& u4 = get_scheme("uint4_wo_" + gs).linear;
    expect_spec(u4.weight,
                {QDtype::kUInt4, QScheme::kPerGroup, false, -1, g, false, F, "float", "", "PerGroupMinMaxObserver"},
                "uint4_wo_" + gs);
    EXPECT_FALSE(u4.input.has_value());
  }
  expect_spec(get_scheme("int4_wo_per_channel").linear.weight,
              {QDtype::kInt4, QScheme::kPerChannel, false, 0, 0, true, F, "float", "", "PerChannelMinMaxObserver"},
              "int4_wo_per_channel");
  expect_spec(get_scheme("uint4_wo_per_channel").linear.weight,
              {QDtype::kUInt4, QScheme::kPerChannel, false, 0, 0, false, F, "float", "", "PerChannelMinMaxObserver"},
              "uint4_wo_per_channel");
}

TEST(SchemeRegistry, Mxfp4) {
  const Want w{QDtype::kFp4, QScheme::kPerGroup, false, -1, 32, true, E8, "float", "even", "PerBlockMXObserver"};
  Want in = w;
  in.is_dynamic = true;
  const auto& s = get_scheme("mxfp4").linear;
  expect_spec(s.weight, w, "mxfp4 weight");
  expect_spec(s.input, in, "mxfp4 input");
  const auto& wo = get_scheme("mxfp4_weight_only").linear;
  expect_spec(wo.weight, w, "mxfp4_weight_only weight");
  EXPECT_FALSE(wo.input.has_value());
}

TEST(SchemeRegistry, MxFp6AndMixedMx) {
  for (QDtype d : {QDtype::kFp6E3M2, QDtype::kFp6E2M3}) {
    const Want w{d, QScheme::kPerGroup, false, -1, 32, true, E8, "float", "even", "PerBlockMXObserver"};
    Want in = w;
    in.is_dynamic = true;
    const auto& s = get_scheme(d == QDtype::kFp6E3M2 ? "mxfp6_e3m2" : "mxfp6_e2m3").linear;
    expect_spec(s.weight, w, "mxfp6 weight");
    expect_spec(s.input, in, "mxfp6 input");
  }
  const auto& m = get_scheme("mxfp4_mxfp6_e2m3").linear;
  expect_spec(m.weight, {QDtype::kFp4, QScheme::kPerGroup, false, -1, 32, true, E8, "float", "even", "PerBlockMXObserver"},
              "mxfp4_mxfp6_e2m3 weight");
  expect_spec(m.input, {QDtype::kFp6E2M3, QScheme::kPerGroup, true, -1, 32, true, E8, "float", "even", "PerBlockMXObserver"},
              "mxfp4_mxfp6_e2m3 input");
}

TEST(SchemeRegistry, W4A8AndInt4Activations) {
  const auto& a = get_scheme("mxfp4_fp8").linear;
  expect_spec(a.weight, {QDtype::kFp4, QScheme::kPerGroup, false, -1, 32, true, E8, "float", "even", "PerBlockMXObserver"},
              "mxfp4_fp8 weight");
  // FP8E4M3PerTensorSpec(observer_method="min_max", is_dynamic=False): scale_type null.
  expect_spec(a.input, {QDtype::kFp8E4M3, QScheme::kPerTensor, false, -1, 0, true, F, "", "", "PerTensorMinMaxObserver"},
              "mxfp4_fp8 input");
  const auto& b = get_scheme("int4_fp8").linear;
  expect_spec(b.weight, {QDtype::kFp8E4M3, QScheme::kPerTensor, false, -1, 0, true, F, "float32", "", "PerTensorMinMaxObserver"},
              "int4_fp8 first stage");
  expect_spec(b.weight_stage2, {QDtype::kInt4, QScheme::kPerChannel, false, 0, 0, true, F, "float32", "", "PerChannelMinMaxObserver"},
              "int4_fp8 second stage");
  expect_spec(b.input, {QDtype::kFp8E4M3, QScheme::kPerTensor, true, -1, 0, true, F, "float32", "", "PerTensorMinMaxObserver"},
              "int4_fp8 input");
  const auto& c = get_scheme("int4_wa_64").linear;
  expect_spec(c.weight, {QDtype::kInt4, QScheme::kPerGroup, false, -1, 64, true, F, "float", "", "PerGroupMinMaxObserver"},
              "int4_wa_64 weight");
  expect_spec(c.input, {QDtype::kInt4, QScheme::kPerGroup, true, -1, 64, true, F, "float", "", "PerGroupMinMaxObserver"},
              "int4_wa_64 input");
  // The only progressive weight is int4_fp8's; the fp4 block schemes' second
  // stages quantize scales (is_scale_quant).
  for (const auto& n : scheme_names()) {
    const auto& l = get_scheme(n).linear;
    if (n != "int4_fp8") EXPECT_TRUE(!l.weight_stage2 || l.weight_stage2->is_scale_quant) << n;
  }
}

TEST(SchemeRegistry, KvCacheFp8) {
  // FP8E4M3PerTensorSpec(observer_method="min_max", is_dynamic=False) without
  // a scale_type: Quark writes "scale_type": null for the KV output spec.
  const QuantSpec kv = kv_cache_spec("fp8");
  expect_spec(kv, {QDtype::kFp8E4M3, QScheme::kPerTensor, false, -1, 0, true, F, "", "", "PerTensorMinMaxObserver"},
              "kv");
  EXPECT_EQ(kv_cache_dtype_names(), std::vector<std::string>{"fp8"});
  Error e = catch_error([] { kv_cache_spec("fp9"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--kv_cache_dtype");
  EXPECT_NE(e.message().find("'fp9'"), std::string::npos);
  EXPECT_NE(e.remedy().find("did you mean 'fp8'?"), std::string::npos);
}

TEST(SchemeRegistry, UnknownSchemeSuggestsNearMisses) {
  Error e = catch_error([] { get_scheme("int4_wo_12"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.file(), "");
  EXPECT_EQ(e.item(), "--quant_scheme");
  EXPECT_EQ(e.message(), "unknown scheme 'int4_wo_12'");
  // Nearest first (edit distance 1: int4_wo_32, int4_wo_128), at most three.
  EXPECT_EQ(e.remedy().rfind("did you mean 'int4_wo_32', 'int4_wo_128' or 'int4_wo_64'? known: ", 0), 0u)
      << e.remedy();
  // Every known name is listed.
  for (const auto& n : scheme_names()) EXPECT_NE(e.remedy().find(n), std::string::npos) << n;

  e = catch_error([] { get_scheme("FP8"); });  // wrong case
  EXPECT_EQ(e.remedy().rfind("did you mean 'fp8'", 0), 0u) << e.remedy();
  e = catch_error([] { get_scheme("mxfp4_weightonly"); });
  EXPECT_EQ(e.remedy().rfind("did you mean 'mxfp4_weight_only'", 0), 0u) << e.remedy();
  e = catch_error([] { get_scheme("uint4_wo"); });  // a prefix of several
  EXPECT_NE(e.remedy().find("'uint4_wo_32'"), std::string::npos) << e.remedy();
  e = catch_error([] { get_scheme("completely-different"); });
  EXPECT_EQ(e.remedy().rfind("known: ", 0), 0u) << e.remedy();  // no suggestion
}

TEST(SchemeRegistry, QuarkSchemesNotImplementedYetSaySo) {
  for (const char* n : {"mx6", "mx9", "bfp16"}) {
    EXPECT_EQ(find_scheme(n), nullptr);
    Error e = catch_error([&] { get_scheme(n); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << n;
    EXPECT_NE(e.message().find("cannot export"), std::string::npos) << e.message();
  }
  // No overlap between the two lists.
  for (const auto& n : quark_only_scheme_names()) EXPECT_EQ(find_scheme(n), nullptr) << n;
}

TEST(SchemeRegistry, SimulationOnlyBlockFormatsSayWhyTheyCannotBeExported) {
  for (const char* n : {"mx6", "mx9", "bfp16"}) {
    Error e = catch_error([&] { get_scheme(n); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << n;
    EXPECT_NE(e.message().find("cannot export it"), std::string::npos) << e.message();
    EXPECT_NE(e.remedy().find("mxfp6_e2m3"), std::string::npos) << e.remedy();
  }
}

TEST(SchemeRegistry, EditDistanceAndNearMisses) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("fp8", "fp8"), 0u);
  EXPECT_EQ(edit_distance("int8", "int4"), 1u);
  const std::vector<std::string> c = {"int8", "fp8", "int4_wo_32"};
  EXPECT_EQ(near_misses("int9", c), std::vector<std::string>{"int8"});
  EXPECT_EQ(near_misses("fp9", c), std::vector<std::string>{"fp8"});
  EXPECT_EQ(near_misses("nt8", {"int8", "int4", "fp8"}), (std::vector<std::string>{"int8", "int4", "fp8"}));
  EXPECT_EQ(near_misses("INT8", c), std::vector<std::string>{"int8"});
  EXPECT_EQ(near_misses("int9", c, 1), std::vector<std::string>{"int8"});
  EXPECT_TRUE(near_misses("zzzzzzzzzz", c).empty());
}

TEST(SchemeRegistry, DefaultExcludesFollowQuarkTemplates) {
  using V = std::vector<std::string>;
  EXPECT_EQ(default_exclude_layers("llama"), V{"lm_head"});
  EXPECT_EQ(default_exclude_layers("qwen2"), V{"lm_head"});
  EXPECT_EQ(default_exclude_layers("mixtral"), (V{"lm_head", "*.gate"}));
  EXPECT_EQ(default_exclude_layers("qwen2_moe"), (V{"lm_head", "*.gate", "*.shared_expert_gate"}));
  EXPECT_EQ(default_exclude_layers("qwen3_moe"), (V{"lm_head", "*.gate"}));
  EXPECT_EQ(default_exclude_layers("deepseek"), (V{"lm_head", "*.gate"}));
  EXPECT_EQ(default_exclude_layers("deepseek_v3"), (V{"lm_head", "*self_attn*", "*mlp.gate"}));
  EXPECT_EQ(default_exclude_layers("dbrx"), (V{"lm_head", "*router.layer"}));
  EXPECT_EQ(default_exclude_layers("gpt_oss"), (V{"lm_head", "*router*"}));
  EXPECT_EQ(default_exclude_layers("chatglm"), V{"transformer.output_layer"});
  EXPECT_EQ(default_exclude_layers("gemma3_text"), V{"*lm_head"});
  // No template: Quark's older example fallback.
  EXPECT_EQ(find_model_template("no_such_model"), nullptr);
  EXPECT_EQ(default_exclude_layers("no_such_model"), V{"lm_head"});

  const ModelTemplate* t = find_model_template("llama");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kv_layers, (V{"*k_proj", "*v_proj"}));
  EXPECT_EQ(find_model_template("phi3")->kv_layers, V{"*qkv_proj"});
  EXPECT_EQ(find_model_template("deepseek_v3")->kv_layers, V{"*kv_b_proj"});

  // Every template excludes some output head, and names are unique.
  auto names = model_template_names();
  EXPECT_GE(names.size(), 40u);
  auto sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  for (const auto& n : names) {
    const auto ex = default_exclude_layers(n);
    EXPECT_FALSE(ex.empty()) << n;
    EXPECT_FALSE(find_model_template(n)->kv_layers.empty()) << n;
  }
}

}  // namespace
}  // namespace qloom::quant
