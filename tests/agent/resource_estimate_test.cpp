// agent/resource_estimate: the byte formulas per scheme, the output size
// against what qloom's exporter really writes for the demo model, the peak
// memory terms (layer weights, activations, GPTQ Hessians per stage, MoE
// experts), the time model, and the memory check.
#include "qloom/agent/resource_estimate.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "qloom/agent/environment.h"
#include "qloom/agent/intent.h"
#include "qloom/agent/model_analysis.h"
#include "qloom/agent/quant_plan.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/scheme_registry.h"
#include "support/expect_error.h"
#include "agent/agent_fixture.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

using test::env;

const oj& demo() {
  static const oj a = analyze_model("demo", QLOOM_DEMO_MODEL_DIR, env());
  return a;
}

oj fitting(const std::string& model_type = "llama") {
  const json cfg = {{"model_type", model_type},     {"hidden_size", 256},      {"intermediate_size", 512},
                    {"num_hidden_layers", 4},       {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                    {"vocab_size", 1000},           {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
  return analyze_config(cfg, "config.json", "m", "local", "/m", env());
}

ResourceRequest request(const std::string& scheme, const std::vector<std::string>& excl = {"lm_head"}) {
  ResourceRequest r;
  r.quant_scheme = scheme;
  r.exclude_layers = excl;
  return r;
}

TEST(ResourceEstimate, LinearBytesPerScheme) {
  auto bytes = [](const char* scheme, bool kv = false) {
    return quantized_linear_bytes(quant::get_scheme(scheme).linear, 256, 512, 2, kv);
  };
  EXPECT_EQ(bytes("fp8"), 256u * 512 + 2 + 2);                    // codes, weight scale, static input scale
  EXPECT_EQ(bytes("fp8", true), 256u * 512 + 2 + 2 + 2);          // + KV output scale
  EXPECT_EQ(bytes("ptpc_fp8"), 256u * 512 + 256 * 2);             // per-channel scales, dynamic input
  EXPECT_EQ(bytes("int8"), 256u * 512 + (4 + 1) + (4 + 1));       // F32 scale + zero point, twice
  EXPECT_EQ(bytes("int4_wo_128"), 512u * 32 * 4 + 4 * 256 * 2 + 4 * 32 * 4);
  EXPECT_EQ(bytes("uint4_wo_per_channel"), 256u * 64 * 4 + 256 * 2 + 32 * 4);
  EXPECT_EQ(bytes("mxfp4"), 256u * 256 + 256 * 16);
  // Unquantized (no weight spec): the model dtype.
  EXPECT_EQ(quantized_linear_bytes(quant::LayerQuantSpec{}, 256, 512, 2, false), 256u * 512 * 2);
}

TEST(ResourceEstimate, NeedsCalibration) {
  EXPECT_TRUE(needs_calibration("fp8", "", ""));
  EXPECT_TRUE(needs_calibration("int8", "", ""));
  EXPECT_FALSE(needs_calibration("ptpc_fp8", "", ""));
  EXPECT_FALSE(needs_calibration("int4_wo_128", "", ""));
  EXPECT_FALSE(needs_calibration("mxfp4", "", ""));  // dynamic activations
  EXPECT_TRUE(needs_calibration("int4_wo_128", "fp8", ""));
  EXPECT_TRUE(needs_calibration("int4_wo_128", "", "gptq"));
}

// The estimate against the exporter: the demo model quantized for real.
struct Case {
  const char* scheme;
  std::vector<std::string> exclude;
  const char* kv;
};

class DiskMatchesExporter : public ::testing::TestWithParam<Case> {};

TEST_P(DiskMatchesExporter, DemoModel) {
  const Case& c = GetParam();
  test::TempDir tmp("estimate");
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = tmp / "q";
  o.quant_scheme = c.scheme;
  o.exclude_layers = c.exclude;
  o.kv_cache_dtype = c.kv;
  o.num_calib_data = 4;
  o.seq_len = 32;
  o.threads = 2;
  const job::QuantizeSummary s = job::quantize_model(o);

  ResourceRequest r;
  r.quant_scheme = c.scheme;
  r.kv_cache_dtype = c.kv;
  r.exclude_layers = s.exclude;  // the effective list (defaults + ours)
  r.num_calib_data = 4;
  r.seq_len = 32;
  const oj e = estimate_resources(demo(), r);
  const uint64_t written = io::WeightIndex::open(tmp / "q").total_bytes();
  EXPECT_EQ(e["disk"]["bytes"].get<uint64_t>(), written);
  EXPECT_EQ(e["disk"]["quantized_linears"].get<uint64_t>(), s.layers_quantized);
  EXPECT_EQ(e["disk"]["quantized_weights"].get<uint64_t>(), s.params_quantized);
  EXPECT_NEAR(e["disk"]["bits_per_weight"].get<double>(), s.bits_per_weight, 1e-3);
  EXPECT_EQ(e["disk"]["source_weights_bytes"].get<uint64_t>(), s.bytes_before);
  EXPECT_EQ(e["calibrated"].get<bool>(), s.calibrated);
}

INSTANTIATE_TEST_SUITE_P(ResourceEstimate, DiskMatchesExporter,
                         ::testing::Values(Case{"ptpc_fp8", {}, ""}, Case{"fp8", {}, ""}, Case{"fp8", {}, "fp8"},
                                           Case{"int8", {"*down_proj"}, ""},
                                           Case{"int4_wo_32", {"*down_proj", "*gate_proj", "*up_proj"}, ""},
                                           Case{"uint4_wo_64", {"*mlp*"}, "fp8"},
                                           Case{"mxfp4_weight_only", {"*down_proj"}, ""}),
                         [](const auto& info) { return std::to_string(info.index) + "_" + info.param.scheme; });

TEST(ResourceEstimate, PeakMemoryTerms) {
  // RTN: twice the largest linear in fp32 (demo: gate/up/down 172 x 64).
  const oj rtn = estimate_resources(demo(), request("ptpc_fp8"));
  EXPECT_EQ(rtn["calibrated"], false);
  EXPECT_EQ(rtn["peak_memory"]["bytes"], 2u * 172 * 64 * 4);
  EXPECT_EQ(rtn["time"]["flops"], 0.0);

  // Calibrated fp8: layer weights + activations + embeddings.
  const oj cal = estimate_resources(demo(), request("fp8"));
  const uint64_t layer = (64 * 64 * 2 + 32 * 64 * 2 + 172 * 64 * 3) * 4;
  const uint64_t act = 128ull * 512 * 64 * 4 * 2, emb = 512 * 64 * 4;
  EXPECT_EQ(cal["peak_memory"]["components"]["layer_weights_fp32"], layer);
  EXPECT_EQ(cal["peak_memory"]["components"]["calibration_activations"], act);
  EXPECT_EQ(cal["peak_memory"]["components"]["gptq_hessians"], 0);
  EXPECT_EQ(cal["peak_memory"]["bytes"], layer + act + emb);
  EXPECT_GT(cal["time"]["flops"].get<double>(), 0.0);

  // GPTQ: the largest stage's Hessians (down_proj: in 512).
  ResourceRequest g = request("int4_wo_128");
  g.quant_algo = "gptq";
  const oj gp = estimate_resources(fitting(), g);
  EXPECT_EQ(gp["peak_memory"]["components"]["gptq_hessians"], 512u * 512 * 8);
  // Excluding the MLPs leaves q/k/v (one shared input) and o: 256^2 x 8.
  g.exclude_layers = {"lm_head", "*mlp*"};
  EXPECT_EQ(estimate_resources(fitting(), g)["peak_memory"]["components"]["gptq_hessians"], 256u * 256 * 8);

  // MoE (qwen3_moe fixture): every expert has its own Hessian in the gate/up
  // stage (6 experts x 64^2); the router is excluded by the template.
  const oj moe = analyze_model("m", fs::path(QLOOM_TEST_DATA_DIR) / "engine/qwen3_moe", env());
  ResourceRequest m = request("int4_wo_per_channel", moe["quantization_targets"]["exclude_defaults"]);
  m.quant_algo = "gptq";
  EXPECT_EQ(estimate_resources(moe, m)["peak_memory"]["components"]["gptq_hessians"], 6u * 64 * 64 * 8);
}

TEST(ResourceEstimate, TimeGrowsWithTheAlgorithm) {
  ResourceRequest r = request("uint4_wo_128");
  const oj rtn = estimate_resources(fitting(), r);
  r.quant_algo = "awq";
  const oj awq = estimate_resources(fitting(), r);
  r.quant_algo = "gptq";
  const oj gptq = estimate_resources(fitting(), r);
  EXPECT_LT(rtn["time"]["seconds"].get<double>(), awq["time"]["seconds"].get<double>());
  EXPECT_LT(rtn["time"]["flops"].get<double>(), gptq["time"]["flops"].get<double>());
  EXPECT_NE(awq["time"]["formula"].get<std::string>().find("passes = 21"), std::string::npos);
  EXPECT_NE(gptq["time"]["formula"].get<std::string>().find("passes = 5"), std::string::npos);
  // The FLOP count of one pass: 2 x decoder linear weights x tokens + attention.
  r.quant_algo = "";
  r.kv_cache_dtype = "fp8";
  const oj kv = estimate_resources(fitting(), r);
  const double tokens = 128.0 * 512, linear = 4.0 * (256 * 256 * 2 + 128 * 256 * 2 + 512 * 256 * 3);
  EXPECT_DOUBLE_EQ(kv["time"]["flops"].get<double>(), 2 * linear * tokens + 2 * tokens * 512 * 256 * 4);
}

TEST(ResourceEstimate, MemoryCheckAndPlanRisk) {
  oj a = demo();
  a["environment"]["memory"]["available_bytes"] = 1000;
  a["environment"]["memory"]["limit_bytes"] = nullptr;
  const oj e = estimate_resources(a, request("fp8"));
  EXPECT_EQ(e["peak_memory"]["usable_bytes"], 1000);
  EXPECT_EQ(e["peak_memory"]["fits"], false);
  IntentContext ctx;
  ctx.demo_model_dir = QLOOM_DEMO_MODEL_DIR;
  PlanOptions po;
  po.data_dir = "";
  const oj plan = build_quant_plan(parse_intent("quantize the demo model to fp8", ctx), a, po);
  bool risk = false;
  for (const auto& r : plan["risks"]) risk = risk || r["id"] == "insufficient_memory";
  EXPECT_TRUE(risk);
  a["environment"]["memory"]["available_bytes"] = nullptr;
  EXPECT_TRUE(estimate_resources(a, request("fp8"))["peak_memory"]["fits"].is_null());
}

TEST(ResourceEstimate, ErrorsAndPartial) {
  EXPECT_EQ(test::catch_error([] { estimate_resources(demo(), request("int5")); }).kind(), ErrorKind::kUsage);
  ResourceRequest r = request("fp8");
  r.layer_quant_scheme = {{"*self_attn*", "int5"}};
  EXPECT_EQ(test::catch_error([&] { estimate_resources(demo(), r); }).item(), "--layer_quant_scheme");
  r = request("fp8");
  r.kv_cache_dtype = "int8";
  EXPECT_EQ(test::catch_error([&] { estimate_resources(demo(), r); }).item(), "--kv_cache_dtype");

  const json cfg = {{"model_type", "llama"}, {"num_hidden_layers", 2}};
  const oj partial = analyze_config(cfg, "c", "m", "local", "/m", env());
  const oj e = estimate_resources(partial, request("fp8"));
  EXPECT_TRUE(e["peak_memory"]["bytes"].is_null());
  EXPECT_TRUE(e["disk"]["bytes"].is_null());
  EXPECT_TRUE(e["time"]["seconds"].is_null());
}

}  // namespace
}  // namespace qloom::agent
