// Tests of the Quark quantization_config: spec JSON (keys, order, null
// conventions), exclude handling, KV entries, and the whole config.json
// compared with what AMD Quark 0.12.post1 itself wrote for the demo model
// (tests/data/quark/<scheme>/config.json, see its README): the 0.12.post1
// form (QuarkFormat::k0_12). The 0.13 form: quark_config_013_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "export/quark_test_specs.h"
#include "qloom/core/error.h"
#include "qloom/export/quark_config.h"
#include "qloom/quant/scheme_registry.h"
#include "qloom/io/json_read.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using namespace qloom;
using namespace qloom::exporter;
using qloom::test::catch_error;
constexpr QuarkFormat k012 = QuarkFormat::k0_12;

const fs::path kGolden = fs::path(QLOOM_TEST_DATA_DIR) / "quark";

json golden_config(const std::string& scheme) {
  return io::read_json_file(kGolden / scheme / "config.json");
}
json golden_qc(const std::string& scheme) { return golden_config(scheme)["quantization_config"]; }
json plain(const ordered_json& j) { return json::parse(j.dump()); }

std::vector<std::string> keys_of(const ordered_json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  return k;
}

TEST(QuarkSpecJson, SixteenKeysInQuarkOrder) {
  const ordered_json j = quant_spec_to_json(test::fp8_per_tensor(), k012);
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{
                            "dtype", "is_dynamic", "qscheme", "ch_axis", "group_size", "block_size",
                            "symmetric", "round_method", "scale_type", "scale_format",
                            "scale_calculation_mode", "mx_element_dtype", "observer_cls", "is_scale_quant",
                            "enable_buffer_reuse", "max_input_numel"}));
  EXPECT_EQ(j.dump(),
            R"({"dtype":"fp8_e4m3","is_dynamic":false,"qscheme":"per_tensor","ch_axis":null,)"
            R"("group_size":null,"block_size":null,"symmetric":true,"round_method":"half_even",)"
            R"("scale_type":"float","scale_format":null,"scale_calculation_mode":null,)"
            R"("mx_element_dtype":null,"observer_cls":"PerTensorMinMaxObserver","is_scale_quant":false,)"
            R"("enable_buffer_reuse":false,"max_input_numel":4194304})");
}

TEST(QuarkSpecJson, NullConventions) {
  const ordered_json g = quant_spec_to_json(test::int4_per_group(128), k012);
  EXPECT_EQ(g["qscheme"], "per_group");
  EXPECT_EQ(g["ch_axis"], -1);
  EXPECT_EQ(g["group_size"], 128);
  EXPECT_EQ(g["symmetric"], true);
  EXPECT_EQ(g["observer_cls"], "PerGroupMinMaxObserver");
  const ordered_json c = quant_spec_to_json(test::int4_per_channel(/*unsigned=*/true), k012);
  EXPECT_EQ(c["ch_axis"], 0);
  EXPECT_TRUE(c["group_size"].is_null());
  EXPECT_EQ(c["symmetric"], false);
  EXPECT_EQ(c["dtype"], "uint4");
  const ordered_json mx = quant_spec_to_json(test::mxfp4(), k012);
  EXPECT_EQ(mx["dtype"], "fp4");
  EXPECT_TRUE(mx["symmetric"].is_null());  // OCP_MXSpec: symmetric=None
  EXPECT_EQ(mx["scale_format"], "e8m0");
  EXPECT_EQ(mx["scale_calculation_mode"], "even");
  const ordered_json kv = quant_spec_to_json(test::fp8_kv(), k012);
  EXPECT_TRUE(kv["scale_type"].is_null());
}

// Every spec of every golden config: our JSON for the hand-built spec equals
// Quark's, and reading Quark's JSON back reproduces it exactly.
struct GoldenSpec {
  const char* scheme;
  const char* path;  // in global_quant_config
  quant::QuantSpec spec;
};

TEST(QuarkSpecJson, MatchesQuarkForEveryScheme) {
  const std::vector<GoldenSpec> cases = {
      {"fp8", "weight", test::fp8_per_tensor()},
      {"fp8", "input_tensors", test::fp8_per_tensor()},
      {"ptpc_fp8", "weight", test::fp8_per_channel(0, false)},
      {"ptpc_fp8", "input_tensors", test::fp8_per_channel(1, true)},
      {"int8", "weight", test::int8_per_tensor()},
      {"int8", "input_tensors", test::int8_per_tensor()},
      {"int4_wo_32", "weight", test::int4_per_group(32)},
      {"uint4_wo_32", "weight", test::int4_per_group(32, true)},
      {"int4_wo_per_channel", "weight", test::int4_per_channel()},
      {"uint4_wo_per_channel", "weight", test::int4_per_channel(true)},
      {"mxfp4", "weight", test::mxfp4(false)},
      {"mxfp4", "input_tensors", test::mxfp4(true)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.scheme) + " " + c.path);
    const json g = golden_qc(c.scheme)["global_quant_config"][c.path];
    EXPECT_EQ(plain(quant_spec_to_json(c.spec, k012)), g);
    const quant::QuantSpec back = quant_spec_from_json(g, c.path, "config.json");
    EXPECT_EQ(plain(quant_spec_to_json(back, k012)), g);
    EXPECT_EQ(back.dtype, c.spec.dtype);
    EXPECT_EQ(back.qscheme, c.spec.qscheme);
    EXPECT_EQ(back.group_size, c.spec.group_size);
    EXPECT_EQ(back.is_dynamic, c.spec.is_dynamic);
    EXPECT_EQ(back.scale_format, c.spec.scale_format);
    if (c.spec.scale_format != quant::ScaleFormat::kE8M0) {
      EXPECT_EQ(back, c.spec);
    }
  }
  // The KV output spec.
  const json kv = golden_qc("fp8")["kv_cache_quant_config"]["*k_proj"]["output_tensors"];
  EXPECT_EQ(plain(quant_spec_to_json(test::fp8_kv(), k012)), kv);
  EXPECT_EQ(quant_spec_from_json(kv, "kv"), test::fp8_kv());
}

TEST(QuarkSpecJson, ReadsOtherQuarkVersionsAndLegacyKeys) {
  // 13-key form of amd-quark 0.9 - 0.11 (no block_size / buffer keys).
  json j = plain(quant_spec_to_json(test::int4_per_group(64), k012));
  j.erase("block_size");
  j.erase("enable_buffer_reuse");
  j.erase("max_input_numel");
  EXPECT_EQ(quant_spec_from_json(j, "w"), test::int4_per_group(64));
  // 17-key form of 0.13.
  j["zero_point_type"] = "int32";
  EXPECT_EQ(quant_spec_from_json(j, "w"), test::int4_per_group(64));
  // Legacy "dynamic" / "axis".
  json l = plain(quant_spec_to_json(test::int4_per_group(64), k012));
  l["dynamic"] = l["is_dynamic"];
  l.erase("is_dynamic");
  l["axis"] = l["ch_axis"];
  l.erase("ch_axis");
  EXPECT_EQ(quant_spec_from_json(l, "w"), test::int4_per_group(64));
}

TEST(QuarkSpecJson, StrictErrors) {
  const json good = plain(quant_spec_to_json(test::int4_per_group(32), k012));
  auto err = [&](json j) { return catch_error([&] { quant_spec_from_json(j, "qc.global_quant_config.weight", "config.json"); }); };

  json j = good;
  j["colour"] = "blue";
  Error e = err(j);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "qc.global_quant_config.weight.colour");
  EXPECT_EQ(e.file(), "config.json");

  j = good;
  j.erase("dtype");
  EXPECT_EQ(err(j).item(), "qc.global_quant_config.weight.dtype");
  j = good;
  j["dtype"] = "mx";
  EXPECT_EQ(err(j).kind(), ErrorKind::kUnsupported);
  j = good;
  j["dtype"] = 4;
  EXPECT_EQ(err(j).kind(), ErrorKind::kInvalidInput);
  j = good;
  j["group_size"] = nullptr;
  EXPECT_EQ(err(j).item(), "qc.global_quant_config.weight.group_size");
  j = good;
  j["qscheme"] = "per_block";
  EXPECT_EQ(err(j).kind(), ErrorKind::kUnsupported);
  j = good;
  j["symmetric"] = "yes";
  EXPECT_EQ(err(j).item(), "qc.global_quant_config.weight.symmetric");
  j = good;
  j["scale_format"] = "e4m3";
  EXPECT_EQ(err(j).kind(), ErrorKind::kUnsupported);
  j = good;
  j["block_size"] = 32;
  EXPECT_EQ(err(j).kind(), ErrorKind::kUnsupported);
  j = good;
  j["mx_element_dtype"] = "fp4";
  EXPECT_EQ(err(j).kind(), ErrorKind::kUnsupported);
  j = good;
  j["is_scale_quant"] = "yes";
  EXPECT_EQ(err(j).item(), "qc.global_quant_config.weight.is_scale_quant");
  j = good;
  j["zero_point_type"] = "float32";
  EXPECT_EQ(err(j).kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(err(json::array()).kind(), ErrorKind::kInvalidInput);

  // Two-stage lists hold two specs, and only for weight / input_tensors;
  // a progressive weight pair must be one qloom runs (fp8 per tensor, then int).
  json layer = plain(layer_spec_to_json({}));
  layer["weight"] = json::array({good, good, good});
  EXPECT_EQ(catch_error([&] { layer_spec_from_json(layer, "g"); }).kind(), ErrorKind::kUnsupported);
  layer["weight"] = json::array({good, good});
  EXPECT_EQ(catch_error([&] { layer_spec_from_json(layer, "g"); }).kind(), ErrorKind::kUnsupported);
  layer["weight"] = nullptr;
  layer["output_tensors"] = json::array({good, good});
  EXPECT_EQ(catch_error([&] { layer_spec_from_json(layer, "g"); }).item(), "g.output_tensors");
}

// Two-stage specs (nvfp4, amdfp4_global*) are written as Quark 0.13 writes
// them: lists [first, second] for weight and input_tensors, scale_format
// "float32" / "e5m3", is_scale_quant true on the second stage, symmetric null
// for fp4; and read back to the same LayerQuantSpec.
TEST(QuarkConfig, TwoStageSpecsRoundTrip) {
  for (const char* scheme : {"nvfp4", "amdfp4_global16", "amdfp4", "amdfp4_g32"}) {
    const quant::LayerQuantSpec l = quant::get_scheme(scheme).linear;
    const json j = plain(layer_spec_to_json(l));
    if (l.weight_stage2) {
      ASSERT_TRUE(j["weight"].is_array()) << scheme;
      ASSERT_EQ(j["weight"].size(), 2u);
      EXPECT_EQ(j["weight"][0]["scale_format"], "float32");
      EXPECT_EQ(j["weight"][0]["scale_type"], "float32");
      EXPECT_TRUE(j["weight"][0]["symmetric"].is_null());
      EXPECT_EQ(j["weight"][1]["is_scale_quant"], true);
      EXPECT_EQ(j["weight"][1]["symmetric"], true);
      EXPECT_EQ(j["input_tensors"][0]["is_dynamic"], true);
      EXPECT_EQ(j["input_tensors"][1]["is_dynamic"], false);
      EXPECT_EQ(j["weight"][1]["dtype"], std::string(scheme) == "nvfp4" ? "fp8_e4m3" : "fp8_e5m3");
    } else {
      EXPECT_EQ(j["weight"]["scale_format"], "e5m3");
      EXPECT_EQ(j["weight"]["scale_type"], "float8_e5m3");
      EXPECT_TRUE(j["weight"]["symmetric"].is_null());
    }
    EXPECT_EQ(layer_spec_from_json(j, "g"), l) << scheme;
  }
}

TEST(QuarkExclude, ExpandsLikeQConfigPostInit) {
  EXPECT_EQ(expand_exclude({"lm_head", "*.gate", "model.layers.3.*", "*.gate"}),
            (std::vector<std::string>{"lm_head.*", "lm_head", "*.gate.*", "*.gate", "model.layers.3.*",
                                      "*.gate.*", "*.gate"}));
}

TEST(QuarkExclude, FnmatchLikePython) {
  EXPECT_TRUE(fnmatch("model.layers.0.self_attn.k_proj", "*k_proj"));
  EXPECT_TRUE(fnmatch("model.layers.0.mlp.down_proj", "*down_proj"));
  EXPECT_FALSE(fnmatch("model.layers.0.mlp.down_proj.x", "*down_proj"));
  EXPECT_TRUE(fnmatch("lm_head", "lm_head"));
  EXPECT_FALSE(fnmatch("lm_head", "lm_head.*"));
  EXPECT_TRUE(fnmatch("lm_head.x", "lm_head.*"));
  EXPECT_TRUE(fnmatch("model.layers.1.mlp.gate", "*mlp.gate"));
  EXPECT_FALSE(fnmatch("model.layers.1.mlp.gate_proj", "*mlp.gate"));
  EXPECT_TRUE(fnmatch("layers.7.x", "layers.?.x"));
  EXPECT_TRUE(fnmatch("layers.7.x", "layers.[0-9].x"));
  EXPECT_FALSE(fnmatch("layers.7.x", "layers.[!7].x"));
  EXPECT_TRUE(fnmatch("a[b", "a[b"));  // unclosed '[' is a literal
  EXPECT_TRUE(fnmatch("", "*"));
  EXPECT_FALSE(fnmatch("K_proj", "*k_proj"));  // case-sensitive on POSIX
}

TEST(QuarkExclude, ModuleNamesLikeQuarkQuantizeFlow) {
  // Quark rewrites exclude to the excluded module names, in module order.
  for (const char* scheme : {"int4_wo_32", "uint4_wo_per_channel", "mxfp4"}) {
    SCOPED_TRACE(scheme);
    QuarkConfigInput in;
    in.format = k012;
    in.exclude = {"lm_head", "*down_proj"};
    in.quantizable_modules = test::demo_modules();
    const ordered_json qc = build_quantization_config(in);
    EXPECT_EQ(plain(qc["exclude"]), golden_qc(scheme)["exclude"]);
  }
  QuarkConfigInput in;
  in.format = k012;
  in.exclude = {"lm_head"};
  EXPECT_EQ(plain(build_quantization_config(in)["exclude"]), json({"lm_head.*", "lm_head"}));
}

QuarkConfigInput fp8_kv_input() {
  QuarkConfigInput in;
  in.global.weight = test::fp8_per_tensor();
  in.global.input = test::fp8_per_tensor();
  in.exclude = {"lm_head"};  // the llama template's default
  in.quantizable_modules = test::demo_modules();
  in.kv_cache = test::fp8_kv();
  in.kv_cache_layers = {"*k_proj", "*v_proj"};
  in.format = k012;
  return in;
}

TEST(QuarkConfig, TopLevelKeysInQuarkOrder) {
  const ordered_json qc = build_quantization_config(fp8_kv_input());
  EXPECT_EQ(keys_of(qc), (std::vector<std::string>{
                             "global_quant_config", "exclude", "algo_config", "softmax_quant_spec",
                             "quant_method", "layer_type_quant_config", "layer_quant_config",
                             "kv_cache_quant_config", "kv_cache_post_rope", "quant_mode", "version", "export"}));
  EXPECT_EQ(keys_of(qc["export"]), (std::vector<std::string>{"weight_merge_groups", "kv_cache_group",
                                                              "min_kv_scale", "weight_format", "pack_method"}));
  EXPECT_EQ(keys_of(qc["global_quant_config"]),
            (std::vector<std::string>{"input_tensors", "output_tensors", "weight", "bias", "target_device"}));
}

TEST(QuarkConfig, Fp8KvEqualsQuarkOutput) {
  const ordered_json qc = build_quantization_config(fp8_kv_input());
  EXPECT_EQ(plain(qc), golden_qc("fp8"));
}

TEST(QuarkConfig, EverySchemeEqualsQuarkOutput) {
  struct Case {
    const char* scheme;
    quant::LayerQuantSpec global;
  };
  std::vector<Case> cases;
  auto add = [&](const char* s, std::optional<quant::QuantSpec> w, std::optional<quant::QuantSpec> i) {
    quant::LayerQuantSpec l;
    l.weight = w;
    l.input = i;
    cases.push_back({s, l});
  };
  add("ptpc_fp8", test::fp8_per_channel(0, false), test::fp8_per_channel(1, true));
  add("int8", test::int8_per_tensor(), test::int8_per_tensor());
  add("int4_wo_32", test::int4_per_group(32), std::nullopt);
  add("uint4_wo_32", test::int4_per_group(32, true), std::nullopt);
  add("int4_wo_per_channel", test::int4_per_channel(), std::nullopt);
  add("uint4_wo_per_channel", test::int4_per_channel(true), std::nullopt);
  add("mxfp4", test::mxfp4(false), test::mxfp4(true));
  for (const auto& c : cases) {
    SCOPED_TRACE(c.scheme);
    const json golden = golden_qc(c.scheme);
    QuarkConfigInput in;
    in.global = c.global;
    in.exclude = {};
    for (const auto& e : golden["exclude"]) in.exclude.push_back(e.get<std::string>());
    in.quantizable_modules = test::demo_modules();
    in.format = k012;
    EXPECT_EQ(plain(build_quantization_config(in)), golden);
  }
}

TEST(QuarkConfig, WholeConfigJsonIsByteIdenticalToQuarks) {
  // Quark's config.json = transformers' serialization of the model config
  // plus quantization_config. Replace its quantization_config by ours and
  // serialize: the text must be identical byte for byte (sorted keys, indent,
  // float formatting such as 1e-05 and 10000.0, trailing newline).
  const std::string text = test::read_file(kGolden / "fp8" / "config.json");
  json base = json::parse(text);
  base.erase("quantization_config");
  const std::string ours = dump_hf_json(quantized_config_json(base, build_quantization_config(fp8_kv_input())));
  EXPECT_EQ(ours, text);
  for (const char* scheme : {"int8", "mxfp4", "uint4_wo_32"}) {
    const std::string t = test::read_file(kGolden / scheme / "config.json");
    EXPECT_EQ(dump_hf_json(json::parse(t)), t) << scheme;
  }
}

TEST(QuarkConfig, QuantizedConfigKeepsTheSource) {
  const json src = io::read_json_file(fs::path(QLOOM_DEMO_MODEL_DIR) / "config.json");
  json out = quantized_config_json(src, build_quantization_config(fp8_kv_input()));
  EXPECT_EQ(out["quantization_config"]["quant_method"], "quark");
  out.erase("quantization_config");
  EXPECT_EQ(out, src);
  EXPECT_EQ(catch_error([] { quantized_config_json(json::array(), ordered_json::object()); }).kind(),
            ErrorKind::kInvalidInput);
}

TEST(QuarkConfig, DumpMatchesPythonJsonDumps) {
  // Expected strings from Python: json.dumps(obj, indent=2, sort_keys=True) + "\n".
  json j = {{"b", 1e-05}, {"a", 10000.0}, {"c", json::array()}, {"d", json::object()},
            {"e", 1e15},  {"f", 1e16},    {"g", "caf\u00e9\x7f"}, {"h", {{"z", 1}, {"y", nullptr}}},
            {"i", -1234567890123456.5}, {"j", 0.02}, {"k", true}};
  EXPECT_EQ(dump_hf_json(j),
            "{\n"
            "  \"a\": 10000.0,\n"
            "  \"b\": 1e-05,\n"
            "  \"c\": [],\n"
            "  \"d\": {},\n"
            "  \"e\": 1000000000000000.0,\n"
            "  \"f\": 1e+16,\n"
            "  \"g\": \"caf\\u00e9\\u007f\",\n"
            "  \"h\": {\n"
            "    \"y\": null,\n"
            "    \"z\": 1\n"
            "  },\n"
            "  \"i\": -1234567890123456.5,\n"
            "  \"j\": 0.02,\n"
            "  \"k\": true\n"
            "}\n");
}

TEST(QuarkConfig, KvEntriesFollowQuarkResolution) {
  // A user layer config for the attention container becomes the base of the
  // KV entries (_resolve_projection_base_spec); an excluded KV layer keeps
  // only its output spec.
  QuarkConfigInput in = fp8_kv_input();
  in.quantizable_modules.reset();
  quant::LayerQuantSpec attn;
  attn.weight = test::int8_per_tensor();
  attn.input = test::int8_per_tensor();
  in.layer_quant_config.emplace_back("*self_attn*", attn);
  in.exclude = {"lm_head", "*v_proj"};
  const json qc = plain(build_quantization_config(in));
  EXPECT_EQ(qc["kv_cache_quant_config"]["*k_proj"]["weight"]["dtype"], "int8");
  EXPECT_EQ(qc["layer_quant_config"]["*k_proj"]["weight"]["dtype"], "int8");
  EXPECT_EQ(qc["layer_quant_config"]["*k_proj"]["output_tensors"]["dtype"], "fp8_e4m3");
  EXPECT_TRUE(qc["kv_cache_quant_config"]["*v_proj"]["weight"].is_null());
  EXPECT_TRUE(qc["kv_cache_quant_config"]["*v_proj"]["input_tensors"].is_null());
  EXPECT_FALSE(qc["layer_quant_config"].contains("*v_proj"));
  EXPECT_EQ(qc["export"]["kv_cache_group"], json({"*k_proj", "*v_proj"}));

  // With module names, an excluded module under a KV pattern clears the KV
  // entry's weight/input (setup_kv_cache_config).
  QuarkConfigInput in2 = fp8_kv_input();
  in2.exclude = {"lm_head", "model.layers.0.self_attn.k_proj"};
  const json qc2 = plain(build_quantization_config(in2));
  EXPECT_EQ(qc2["exclude"], json({"model.layers.0.self_attn.k_proj", "lm_head"}));
  EXPECT_TRUE(qc2["kv_cache_quant_config"]["*k_proj"]["weight"].is_null());
  EXPECT_EQ(qc2["layer_quant_config"]["*k_proj"]["weight"]["dtype"], "fp8_e4m3");
  EXPECT_EQ(qc2["kv_cache_quant_config"]["*v_proj"]["weight"]["dtype"], "fp8_e4m3");

  // No KV cache: empty kv config and kv_cache_group.
  QuarkConfigInput in3 = fp8_kv_input();
  in3.kv_cache.reset();
  const json qc3 = plain(build_quantization_config(in3));
  EXPECT_TRUE(qc3["kv_cache_quant_config"].empty());
  EXPECT_TRUE(qc3["layer_quant_config"].empty());
  EXPECT_EQ(qc3["export"]["kv_cache_group"], json::array());
}

TEST(QuarkConfig, ExportBlockAndOptions) {
  QuarkConfigInput in = fp8_kv_input();
  in.min_kv_scale = 0.5;
  in.pack_method = "order";
  in.algo_config = ordered_json::array({ordered_json{{"name", "awq"}}});
  in.quark_version.clear();
  const json qc = plain(build_quantization_config(in));
  EXPECT_EQ(qc["export"]["min_kv_scale"], 0.5);
  EXPECT_EQ(qc["export"]["pack_method"], "order");
  EXPECT_EQ(qc["export"]["weight_format"], "real_quantized");
  EXPECT_TRUE(qc["export"]["weight_merge_groups"].is_null());
  EXPECT_EQ(qc["algo_config"][0]["name"], "awq");
  EXPECT_EQ(qc["version"], "0.12.post1");

  in.pack_method = "zigzag";
  EXPECT_EQ(catch_error([&] { build_quantization_config(in); }).kind(), ErrorKind::kUsage);
  in = fp8_kv_input();
  in.kv_cache_layers.clear();
  EXPECT_EQ(catch_error([&] { build_quantization_config(in); }).kind(), ErrorKind::kUsage);
  in = fp8_kv_input();
  in.algo_config = "gptq";
  EXPECT_EQ(catch_error([&] { build_quantization_config(in); }).kind(), ErrorKind::kUsage);
  in = fp8_kv_input();
  in.min_kv_scale = -1;
  EXPECT_EQ(catch_error([&] { build_quantization_config(in); }).kind(), ErrorKind::kUsage);
}

TEST(QuarkConfig, ResolvesLayerSpecsOfACheckpoint) {
  const json qc = golden_qc("fp8");
  auto k = resolve_layer_quant_spec(qc, "model.layers.3.self_attn.k_proj");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->weight, test::fp8_per_tensor());
  EXPECT_EQ(k->output, test::fp8_kv());
  auto q = resolve_layer_quant_spec(qc, "model.layers.3.self_attn.q_proj");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->input, test::fp8_per_tensor());
  EXPECT_FALSE(q->output.has_value());
  EXPECT_FALSE(resolve_layer_quant_spec(qc, "lm_head").has_value());
  const json q4 = golden_qc("int4_wo_32");
  EXPECT_FALSE(resolve_layer_quant_spec(q4, "model.layers.2.mlp.down_proj").has_value());
  EXPECT_EQ(resolve_layer_quant_spec(q4, "model.layers.2.mlp.up_proj")->weight, test::int4_per_group(32));
}

}  // namespace
