// amd-quark 0.13's quantization_config form (qloom's default): the 17-key
// tensor spec, verbatim exclude patterns, two-stage specs, the attention
// (softmax / q_proj output) entries, insertion-ordered layer_quant_config,
// compared with what amd-quark 0.13 itself wrote for the demo model
// (tests/data/quark013/demo_fp8_kv_attention_qc.json, see the README there).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "export/quark_test_specs.h"
#include "qloom/core/error.h"
#include "qloom/export/attention_quant.h"
#include "qloom/export/quark_config.h"
#include "qloom/io/json_read.h"
#include "qloom/quant/gptq_stage.h"
#include "support/expect_error.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using namespace qloom;
using namespace qloom::exporter;
using qloom::test::catch_error;

json plain(const ordered_json& j) { return json::parse(j.dump()); }

std::vector<std::string> keys_of(const ordered_json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  return k;
}

TEST(Quark013Spec, SeventeenKeysInQuarkOrder) {
  const ordered_json j = quant_spec_to_json(test::fp8_per_tensor());
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{
                            "dtype", "is_dynamic", "qscheme", "ch_axis", "group_size", "block_size", "symmetric",
                            "round_method", "scale_type", "zero_point_type", "scale_format",
                            "scale_calculation_mode", "mx_element_dtype", "observer_cls", "is_scale_quant",
                            "enable_buffer_reuse", "max_input_numel"}));
  EXPECT_EQ(j["zero_point_type"], "int32");
  EXPECT_EQ(keys_of(quant_spec_to_json(test::fp8_per_tensor(), QuarkFormat::k0_12)).size(), 16u);
  // An empty zero_point_type is Quark's None.
  quant::QuantSpec s = test::fp8_per_tensor();
  s.zero_point_type.clear();
  EXPECT_TRUE(quant_spec_to_json(s)["zero_point_type"].is_null());
  // Absent (<= 0.12) reads as from_dict's default, int32; null stays null.
  json old = plain(quant_spec_to_json(test::fp8_per_tensor(), QuarkFormat::k0_12));
  EXPECT_EQ(quant_spec_from_json(old, "w").zero_point_type, "int32");
  old["zero_point_type"] = nullptr;
  EXPECT_EQ(quant_spec_from_json(old, "w").zero_point_type, "");
}

TEST(Quark013Spec, NewDtypesScaleFormatsAndFieldsRoundTrip) {
  quant::QuantSpec s = test::fp8_per_tensor();
  s.dtype = quant::QDtype::kFp8E5M3;
  s.scale_type = "float32";
  s.is_scale_quant = true;
  s.enable_buffer_reuse = true;
  s.max_input_numel = 1024;
  const ordered_json j = quant_spec_to_json(s);
  EXPECT_EQ(j["dtype"], "fp8_e5m3");
  EXPECT_EQ(j["is_scale_quant"], true);
  EXPECT_EQ(j["enable_buffer_reuse"], true);
  EXPECT_EQ(j["max_input_numel"], 1024);
  EXPECT_EQ(quant_spec_from_json(plain(j), "w"), s);

  quant::QuantSpec g = test::mxfp4();
  g.scale_format = quant::ScaleFormat::kE5M3;  // AMD FP4: e5m3 group scales
  g.group_size = 16;
  g.scale_type = "float8_e5m3";
  const ordered_json gj = quant_spec_to_json(g);
  EXPECT_EQ(gj["scale_format"], "e5m3");
  EXPECT_TRUE(gj["symmetric"].is_null());  // AmdFP4Spec passes symmetric=None, as OCP MX does
  EXPECT_EQ(quant_spec_from_json(plain(gj), "w"), g);
}

TEST(Quark013Spec, TwoStageSpecsAreLists) {
  // int4_fp8 (ProgressiveSpec): weight [fp8 per tensor, int4 per channel].
  quant::LayerQuantSpec l;
  l.weight = test::fp8_per_tensor();
  l.weight_stage2 = test::int4_per_channel();
  l.input = test::fp8_per_tensor();
  quant::QuantSpec scale_stage = test::fp8_per_tensor();
  scale_stage.is_scale_quant = true;
  l.input_stage2 = scale_stage;  // a ScaleQuantSpec second stage (nvfp4 form)
  const ordered_json j = layer_spec_to_json(l);
  ASSERT_TRUE(j["weight"].is_array());
  ASSERT_EQ(j["weight"].size(), 2u);
  EXPECT_EQ(j["weight"][0]["dtype"], "fp8_e4m3");
  EXPECT_EQ(j["weight"][1]["dtype"], "int4");
  ASSERT_TRUE(j["input_tensors"].is_array());
  EXPECT_EQ(j["input_tensors"][1]["is_scale_quant"], true);
  EXPECT_TRUE(j["output_tensors"].is_null());
  EXPECT_EQ(layer_spec_from_json(plain(j), "g"), l);
  // The error names the list element.
  json bad = plain(j);
  bad["weight"][1]["dtype"] = "int3";
  EXPECT_EQ(catch_error([&] { layer_spec_from_json(bad, "g"); }).item(), "g.weight[1].dtype");
}

QuarkConfigInput fp8_kv_attention_input() {
  QuarkConfigInput in;
  in.global.weight = test::fp8_per_tensor();
  in.global.input = test::fp8_per_tensor();
  in.exclude = {"lm_head"};
  in.quantizable_modules = test::demo_modules();
  in.kv_cache = test::fp8_kv();
  in.kv_cache_layers = {"*k_proj", "*v_proj"};
  in.softmax = attention_output_spec("fp8");
  in.q_layers = q_layer_patterns("llama");
  return in;
}

TEST(Quark013Config, Fp8KvAttentionEqualsQuark013Output) {
  const json golden =
      io::read_json_file(fs::path(QLOOM_TEST_DATA_DIR) / "quark013" / "demo_fp8_kv_attention_qc.json");
  const ordered_json qc = build_quantization_config(fp8_kv_attention_input());
  EXPECT_EQ(plain(qc), golden) << "ours:\n" << qc.dump(1);
  EXPECT_EQ(qc["version"], "0.13");
  // Quark's in-memory order: KV entries, then the q projection.
  EXPECT_EQ(keys_of(qc["layer_quant_config"]), (std::vector<std::string>{"*k_proj", "*v_proj", "*q_proj"}));
}

TEST(Quark013Config, AttentionSkipsAnExcludedQProjection) {
  QuarkConfigInput in = fp8_kv_attention_input();
  in.quantizable_modules.reset();
  in.exclude = {"lm_head", "*q_proj"};
  const json qc = plain(build_quantization_config(in));
  EXPECT_FALSE(qc["layer_quant_config"].contains("*q_proj"));
  EXPECT_EQ(qc["softmax_quant_spec"]["dtype"], "fp8_e4m3");
  EXPECT_TRUE(qc["softmax_quant_spec"]["scale_type"].is_null());
  in.q_layers.clear();
  EXPECT_EQ(catch_error([&] { build_quantization_config(in); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] { attention_output_spec("int8"); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] { q_layer_patterns("phi3"); }).kind(), ErrorKind::kUnsupported);
}

TEST(Quark013Config, ExcludePatternsAreVerbatim) {
  QuarkConfigInput in;
  in.global.weight = test::int4_per_group(32);
  in.exclude = {"lm_head", "*down_proj"};
  EXPECT_EQ(plain(build_quantization_config(in)["exclude"]), json({"lm_head", "*down_proj"}));
  in.format = QuarkFormat::k0_12;
  EXPECT_EQ(plain(build_quantization_config(in)["exclude"]),
            json({"lm_head.*", "lm_head", "*down_proj.*", "*down_proj"}));
  EXPECT_STREQ(quark_format_version(QuarkFormat::k0_12), "0.12.post1");
  EXPECT_EQ(parse_quark_format("0.12.post1"), QuarkFormat::k0_12);
  EXPECT_EQ(catch_error([&] { parse_quark_format("0.11"); }).kind(), ErrorKind::kUsage);
}

TEST(Quark013Config, LayerQuantConfigKeepsInsertionOrderAndFirstMatchWins) {
  QuarkConfigInput in;
  in.global.weight = test::int4_per_group(128);
  in.layer_quant_config.emplace_back("*mlp*", quant::LayerQuantSpec{test::int8_per_tensor()});
  in.layer_quant_config.emplace_back("*down_proj", quant::LayerQuantSpec{test::fp8_per_tensor()});
  in.layer_quant_config.emplace_back("*mlp*", quant::LayerQuantSpec{test::int4_per_channel()});  // dict reassignment
  const ordered_json qc = build_quantization_config(in);
  EXPECT_EQ(keys_of(qc["layer_quant_config"]), (std::vector<std::string>{"*mlp*", "*down_proj"}));
  // Quantize time (insertion order): "*mlp*" first, with its last value.
  auto ordered = resolve_layer_quant_spec(qc, "model.layers.0.mlp.down_proj");
  ASSERT_TRUE(ordered && ordered->weight);
  EXPECT_EQ(ordered->weight->dtype, quant::QDtype::kInt4);
  EXPECT_EQ(ordered->weight->qscheme, quant::QScheme::kPerChannel);
  // Reloaded from config.json (sorted keys): "*down_proj" sorts first.
  auto sorted = resolve_layer_quant_spec(plain(qc), "model.layers.0.mlp.down_proj");
  ASSERT_TRUE(sorted && sorted->weight);
  EXPECT_EQ(sorted->weight->dtype, quant::QDtype::kFp8E4M3);
}

TEST(Quark013Gptq, InsideLayerModulesInQuarkTemplateOrder) {
  EXPECT_EQ(quant::quark_gptq_modules("llama"),
            (std::vector<std::string>{"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.o_proj",
                                      "mlp.up_proj", "mlp.gate_proj", "mlp.down_proj"}));
  EXPECT_TRUE(quant::quark_gptq_modules("qwen3").empty());
  quant::GptqConfig c = quant::GptqConfig::from_json(nullptr);
  c.template_modules = quant::quark_gptq_modules("llama");
  const auto stage = quant::make_gptq_stage(c);
  EXPECT_EQ(stage->algo_config()["inside_layer_modules"], json(c.template_modules));
}

}  // namespace
