// agent/quant_plan: plans for parsed prompts against the demo model and
// crafted configs — the decisions and their sources, exclusions merged with
// the template, the scheme-vs-model check, dataset mapping, calibration and
// algorithm checks, evaluation plan, the rendered decision table, schema
// validity and rejection of broken plans.
#include "qloom/agent/quant_plan.h"

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/environment.h"
#include "qloom/agent/intent.h"
#include "qloom/agent/model_analysis.h"
#include "support/expect_error.h"
#include "agent/agent_fixture.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

using test::env;

IntentContext context() { return test::demo_context(); }

const oj& demo_analysis() {
  static const oj a = analyze_model("models/stories260K-hf-bf16", QLOOM_DEMO_MODEL_DIR, env());
  return a;
}

// A llama model whose shapes fit every scheme (256 / 512 / 128).
oj fitting_analysis(const std::string& model_type = "llama") {
  const json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", model_type}, {"hidden_size", 256},
                    {"intermediate_size", 512}, {"num_hidden_layers", 4}, {"num_attention_heads", 8},
                    {"num_key_value_heads", 4}, {"vocab_size", 1000}, {"max_position_embeddings", 2048},
                    {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
  return analyze_config(cfg, "config.json", "Qwen/Qwen2.5-0.5B", "hub", "/snap", env());
}

PlanOptions no_data_dir() {
  PlanOptions o;
  o.data_dir = "";
  return o;
}

oj plan_for(const std::string& prompt, const json& analysis, const PlanOptions& o = no_data_dir()) {
  return build_quant_plan(parse_intent(prompt, context()), analysis, o);
}

std::string violations(const json& plan) {
  std::string s;
  for (const auto& v : check_artifact("quant_plan", plan)) s += v.path + ": " + v.message + "\n";
  return s;
}

const json& decision(const json& plan, const std::string& name) {
  for (const auto& d : plan["decisions"])
    if (d["decision"] == name) return d;
  static const json none;
  ADD_FAILURE() << "no decision " << name;
  return none;
}

std::vector<std::string> question_fields(const json& plan) {
  std::vector<std::string> f;
  for (const auto& q : plan["open_questions"]) f.push_back(q["field"]);
  return f;
}

bool has_risk(const json& plan, const std::string& id) {
  for (const auto& r : plan["risks"])
    if (r["id"] == id) return true;
  return false;
}

TEST(QuantPlan, Int4G128DoesNotFitTheDemoModel) {
  const oj p = plan_for("quantize the demo model to int4 g128", demo_analysis());
  EXPECT_EQ(violations(p), "");
  EXPECT_EQ(p["quant_scheme"], "int4_wo_128");
  EXPECT_EQ(decision(p, "global_scheme")["value"], "int4_wo_128");
  EXPECT_EQ(decision(p, "global_scheme")["source"], "stated");
  const auto& sc = p["scheme_check"];
  EXPECT_EQ(sc["fits"], false);
  EXPECT_EQ(sc["modules_checked"], 35);
  EXPECT_EQ(sc["modules_not_fitting"], 35);  // hidden 64 and intermediate 172 < 128
  // The fp4 block schemes pack along in_features only (fp4_block_tensors.h),
  // so 172 output rows fit them.
  EXPECT_EQ(sc["fitting_schemes"], json({"int8", "fp8", "ptpc_fp8", "nvfp4", "fp4_block16_scale_e4m3",
                                         "amdfp4_global16", "amdfp4_global32"}));
  ASSERT_FALSE(sc["problems"].empty());
  EXPECT_EQ(sc["problems"][0]["pattern"], "model.layers.*.self_attn.q_proj");
  EXPECT_EQ(sc["problems"][0]["count"], 5);
  EXPECT_EQ(sc["problems"][0]["reason"], "in_features 64 is not a multiple of the group size 128");
  bool out8 = false;
  for (const auto& pr : sc["problems"])
    out8 = out8 || pr["reason"].get<std::string>().find("out_features 172 is not a multiple of 8") != std::string::npos;
  EXPECT_TRUE(out8);
  ASSERT_EQ(question_fields(p), std::vector<std::string>{"quant_scheme"});
  const std::string q = p["open_questions"][0]["question"];
  EXPECT_NE(q.find("int4_wo_128 does not fit 35 of the 35 linear layers"), std::string::npos) << q;
  EXPECT_NE(q.find("(int8, fp8, ptpc_fp8, nvfp4"), std::string::npos) << q;
  EXPECT_EQ(p["requires_confirmation"], true);
  EXPECT_EQ(p["needs_calibration"], false);
  EXPECT_NE(decision(p, "calibration_dataset")["reason"].get<std::string>().find("not used"), std::string::npos);
  EXPECT_EQ(p["model"]["model_type"], "llama");
  EXPECT_EQ(p["model"]["analysis_ref"], "model_analysis.json");
}

TEST(QuantPlan, Fp8WithFp8KvCacheOnMi300x) {
  const oj p = plan_for("quantize the demo model to fp8 with fp8 kv cache on MI300X", demo_analysis());
  EXPECT_EQ(violations(p), "");
  EXPECT_EQ(p["quant_scheme"], "fp8");
  EXPECT_EQ(p["kv_cache_dtype"], "fp8");
  EXPECT_EQ(decision(p, "kv_cache_scheme")["value"], "fp8");
  EXPECT_EQ(decision(p, "kv_cache_scheme")["source"], "stated");
  EXPECT_TRUE(p["quant_algo"].is_null());
  EXPECT_TRUE(decision(p, "algorithm")["value"].is_null());
  EXPECT_EQ(p["exclude_layers"], json({"lm_head"}));
  EXPECT_EQ(decision(p, "exclude_layers")["source"], "model");
  EXPECT_EQ(p["needs_calibration"], true);
  EXPECT_EQ(p["scheme_check"]["fits"], true);
  EXPECT_TRUE(p["open_questions"].empty()) << p["open_questions"].dump();
  // pileval (the default) is not bundled: the bundled c4 sample, said so.
  EXPECT_EQ(p["dataset"], "c4");
  EXPECT_EQ(decision(p, "calibration_dataset")["source"], "inferred");
  EXPECT_NE(decision(p, "calibration_dataset")["reason"].get<std::string>().find("pileval"), std::string::npos);
  bool noted = false;
  for (const auto& n : p["notes"]) noted = noted || n.get<std::string>().find("not bundled") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_EQ(p["num_calib_data"], 128);
  EXPECT_EQ(p["seq_len"], 512);
  // seq_len 512 = the demo's context: no risk.
  EXPECT_FALSE(has_risk(p, "seq_len_exceeds_context"));
  const auto& est = p["resource_estimate"];
  ASSERT_TRUE(est.is_object());
  EXPECT_EQ(est["calibrated"], true);
  EXPECT_EQ(est["calibration_tokens"], 128 * 512);
  EXPECT_EQ(est["peak_memory"]["components"]["calibration_activations"], 128ull * 512 * 64 * 4 * 2);
}

TEST(QuantPlan, LocalPilevalCopyIsKept) {
  test::TempDir d("plan-data");
  d.write("calibration/pileval.jsonl", "{\"text\": \"hello\"}\n");
  PlanOptions o;
  o.data_dir = d.path().string();
  const oj p = plan_for("quantize the demo model to fp8", demo_analysis(), o);
  EXPECT_EQ(p["dataset"], "pileval");
  EXPECT_NE(decision(p, "calibration_dataset")["reason"].get<std::string>().find("local copy"), std::string::npos);
}

TEST(QuantPlan, StatedUnbundledDatasetIsAQuestion) {
  const oj p = plan_for("quantize the demo model to fp8, calibrate on wikitext2", demo_analysis());
  EXPECT_EQ(p["dataset"], "wikitext2");
  EXPECT_EQ(question_fields(p), std::vector<std::string>{"dataset"});
  // A file path is kept as given.
  const oj f = plan_for("quantize the demo model to fp8, calibrate on /data/calib.jsonl", demo_analysis());
  EXPECT_EQ(f["dataset"], "/data/calib.jsonl");
  EXPECT_TRUE(f["open_questions"].empty()) << f["open_questions"].dump();
}

TEST(QuantPlan, Awq4BitFits) {
  const oj p = plan_for("awq 4-bit Qwen/Qwen2.5-0.5B", fitting_analysis());
  EXPECT_EQ(violations(p), "");
  EXPECT_EQ(p["quant_scheme"], "uint4_wo_128");
  EXPECT_EQ(p["quant_algo"], "awq");
  EXPECT_EQ(decision(p, "algorithm")["value"], "awq");
  EXPECT_EQ(decision(p, "algorithm")["source"], "stated");
  EXPECT_EQ(p["scheme_check"]["fits"], true);
  EXPECT_EQ(p["scheme_check"]["modules_checked"], 28);  // lm_head excluded
  EXPECT_EQ(p["needs_calibration"], true);
  EXPECT_FALSE(has_risk(p, "algorithm_scheme_mismatch"));
  EXPECT_TRUE(p["open_questions"].empty()) << p["open_questions"].dump();
  EXPECT_NE(p["resource_estimate"]["time"]["formula"].get<std::string>().find("passes = 21"), std::string::npos);
}

TEST(QuantPlan, AlgorithmChecks) {
  const oj g = plan_for("gptq with fp8 for Qwen/Qwen2.5-0.5B", fitting_analysis());
  EXPECT_EQ(g["quant_algo"], "gptq");
  EXPECT_TRUE(has_risk(g, "algorithm_scheme_mismatch"));
  EXPECT_GT(g["resource_estimate"]["peak_memory"]["components"]["gptq_hessians"].get<uint64_t>(), 0u);
  const oj s = plan_for("smoothquant int4 for Qwen/Qwen2.5-0.5B", fitting_analysis());
  EXPECT_TRUE(has_risk(s, "algorithm_scheme_mismatch"));
}

TEST(QuantPlan, CalibrationNeedsTheEngine) {
  // An architecture the engine does not run: fp8 (static input scales) needs
  // calibration -> question; a weight-only RTN scheme does not.
  const oj a = fitting_analysis("my_arch");
  ASSERT_EQ(a["engine"]["calibration"], false);
  const oj p = plan_for("quantize Qwen/Qwen2.5-0.5B to fp8", a);
  EXPECT_EQ(violations(p), "");
  EXPECT_EQ(question_fields(p), std::vector<std::string>{"quant_scheme"});
  EXPECT_NE(p["open_questions"][0]["question"].get<std::string>().find("fp8 (static activation scales) and an fp8 KV cache need calibration"), std::string::npos)
      << p["open_questions"][0]["question"];
  const oj w = plan_for("quantize Qwen/Qwen2.5-0.5B to int4 g128", a);
  EXPECT_TRUE(w["open_questions"].empty()) << w["open_questions"].dump();
  EXPECT_EQ(w["needs_calibration"], false);
  const oj k = plan_for("quantize Qwen/Qwen2.5-0.5B to ptpc_fp8 with an fp8 kv cache", a);
  EXPECT_EQ(question_fields(k), std::vector<std::string>{"kv_cache_dtype"});
}

TEST(QuantPlan, ExclusionsMergeWithTheTemplate) {
  const oj p = plan_for("fp8 for Qwen/Qwen2.5-0.5B, keep lm_head and attention in bf16", fitting_analysis());
  EXPECT_EQ(p["exclude_layers"], json({"lm_head", "*self_attn*"}));
  EXPECT_EQ(decision(p, "exclude_layers")["source"], "stated");
  EXPECT_EQ(p["scheme_check"]["modules_checked"], 4 * 3);  // only the MLPs
  const oj q = plan_for("quantize Qwen/Qwen2.5-0.5B to fp8, and quantize the lm_head too", fitting_analysis());
  EXPECT_EQ(q["exclude_layers"], json::array());
  EXPECT_NE(decision(q, "exclude_layers")["reason"].get<std::string>().find("quantized on request: [lm_head]"),
            std::string::npos);
  EXPECT_EQ(q["scheme_check"]["modules_checked"], 4 * 7 + 1);
  const oj o = plan_for("quantize Qwen/Qwen2.5-0.5B to int4 but keep attention in fp8", fitting_analysis());
  EXPECT_EQ(o["layer_quant_scheme"], json({{"*self_attn*", "fp8"}}));
  EXPECT_EQ(decision(o, "layer_quant_config")["value"], json({{"*self_attn*", "fp8"}}));
  EXPECT_EQ(o["scheme_check"]["fits"], true);
  // An exclusion that matches nothing is flagged.
  const oj n = plan_for("quantize /models/x/ to fp8 but not the lm_head and not the mlp.down_proj",
                        fitting_analysis());
  EXPECT_FALSE(has_risk(n, "pattern_matches_nothing"));  // both exist in a llama model
  Intent in = parse_intent("fp8 for Qwen/Qwen2.5-0.5B", context());
  in.exclude_layers = {{"*vision_tower*"}, Source::kStated};
  const oj m = build_quant_plan(in, fitting_analysis(), no_data_dir());
  EXPECT_EQ(violations(m), "");
  EXPECT_TRUE(has_risk(m, "pattern_matches_nothing"));
  in.exclude_layers = {{}, Source::kDefault};
  in.layer_quant_scheme = {{{"*attention*", "fp8"}}, Source::kStated};
  EXPECT_TRUE(has_risk(build_quant_plan(in, fitting_analysis(), no_data_dir()), "pattern_matches_nothing"));
  in.layer_quant_scheme = {{{"*self_attn*", "mx9"}}, Source::kStated};
  const oj bad = build_quant_plan(in, fitting_analysis(), no_data_dir());
  EXPECT_EQ(question_fields(bad), std::vector<std::string>{"layer_quant_scheme"});
  EXPECT_TRUE(bad["scheme_check"].is_null());
  EXPECT_TRUE(bad["resource_estimate"].is_null());
}

TEST(QuantPlan, EvaluationPlan) {
  const oj d = plan_for("quantize the demo model to fp8", demo_analysis());
  EXPECT_EQ(d["metric_name"], "gsm8k");
  EXPECT_EQ(d["eval_task"], "gsm8k");
  EXPECT_EQ(decision(d, "evaluation_intent")["value"], "compare");
  EXPECT_TRUE(d["eval_limit"].is_null());
  EXPECT_TRUE(d["eval_gap_threshold"].is_null());
  const oj p = plan_for("quantize the demo model to fp8, report ppl on wikitext-2 on 50 samples, accept a 5% gap",
                        demo_analysis());
  EXPECT_EQ(p["metric_name"], "ppl");
  EXPECT_EQ(p["eval_task"], "ppl");
  EXPECT_EQ(p["eval_dataset"], "wikitext2");
  EXPECT_EQ(p["metric_higher_is_better"], false);
  EXPECT_EQ(p["eval_gap_threshold"], 0.05);
  EXPECT_EQ(decision(p, "eval_gap_threshold")["source"], "stated");
  const oj m = plan_for("quantize the demo model to fp8 and check MMLU", demo_analysis());
  EXPECT_EQ(m["metric_name"], "mmlu");
  EXPECT_TRUE(m["eval_task"].is_null());
  EXPECT_TRUE(has_risk(m, "eval_metric_unavailable"));
  EXPECT_EQ(violations(m), "");
}

TEST(QuantPlan, KeepsTheIntentsQuestionsAndNotes) {
  const Intent in = parse_intent("quantize to int4", context());  // no model
  ASSERT_TRUE(in.has_question("model"));
  const oj p = build_quant_plan(in, demo_analysis(), no_data_dir());
  EXPECT_EQ(violations(p), "");
  ASSERT_FALSE(p["open_questions"].empty());
  EXPECT_EQ(p["open_questions"][0]["field"], "model");
  EXPECT_EQ(p["open_questions"][0]["question"], in.open_questions[0].question);
  const Intent typo = parse_intent("quantize the demo model to fp8 with gtpq", context());
  const oj t = build_quant_plan(typo, demo_analysis(), no_data_dir());
  ASSERT_FALSE(typo.notes.empty());
  EXPECT_EQ(t["notes"][0], typo.notes[0]);
}

TEST(QuantPlan, UnsupportedModelIsAQuestion) {
  json cfg = {{"model_type", "llama"}, {"hidden_size", 256}, {"intermediate_size", 512}, {"num_hidden_layers", 2},
              {"num_attention_heads", 4}, {"vocab_size", 100}, {"quantization_config", {{"quant_method", "awq"}}}};
  const oj a = analyze_config(cfg, "config.json", "x", "local", "/x", env());
  const oj p = plan_for("quantize Qwen/Qwen2.5-0.5B to fp8", a);
  EXPECT_EQ(question_fields(p).front(), "model");
  EXPECT_NE(p["open_questions"][0]["question"].get<std::string>().find("already quantized"), std::string::npos);
  // Partial analysis: no check, no estimate, still a valid plan.
  cfg.erase("hidden_size");
  cfg.erase("quantization_config");
  const oj partial = plan_for("quantize Qwen/Qwen2.5-0.5B to fp8", analyze_config(cfg, "c", "x", "local", "/x", env()));
  EXPECT_EQ(violations(partial), "");
  EXPECT_TRUE(partial["scheme_check"].is_null());
  EXPECT_TRUE(partial["resource_estimate"].is_null());
  EXPECT_EQ(question_fields(partial).front(), "model");
}

TEST(QuantPlan, DecisionTableRendersEveryDecision) {
  const oj p = plan_for("quantize the demo model to fp8 with fp8 kv cache on MI300X", demo_analysis());
  const std::string t = render_plan_table(p);
  EXPECT_EQ(t.rfind("Quantization Plan:\n", 0), 0u);
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t nl = t.find('\n', pos);
    lines.push_back(t.substr(pos, nl - pos));
    pos = nl + 1;
  }
  ASSERT_GE(lines.size(), 3 + p["decisions"].size());
  // Header, rule, one aligned row per decision in order.
  const size_t bar1 = lines[1].find(" | "), bar2 = lines[1].find(" | ", bar1 + 1);
  EXPECT_EQ(lines[1].substr(0, bar1), "  decision           ");  // "calibration_dataset" is the widest
  for (size_t i = 0; i < p["decisions"].size(); ++i) {
    const std::string& row = lines[3 + i];
    const auto& d = p["decisions"][i];
    EXPECT_EQ(row.find(" | "), bar1) << row;
    EXPECT_EQ(row.find(" | ", bar1 + 1), bar2) << row;
    EXPECT_EQ(row.substr(2, d["decision"].get<std::string>().size()), d["decision"].get<std::string>());
    EXPECT_NE(row.find(d["reason"].get<std::string>()), std::string::npos) << row;
  }
  EXPECT_NE(t.find("  global_scheme       | fp8 "), std::string::npos) << t;
  EXPECT_NE(t.find("  exclude_layers      | [\"lm_head\"] "), std::string::npos) << t;
  EXPECT_NE(t.find("  algorithm           | null "), std::string::npos) << t;
  EXPECT_NE(t.find("Estimated resources: peak memory "), std::string::npos);
  // Questions and risks follow the table.
  const std::string q = render_plan_table(plan_for("quantize the demo model to int4 g128", demo_analysis()));
  EXPECT_NE(q.find("Open questions:\n  - [quant_scheme] int4_wo_128 does not fit"), std::string::npos) << q;
}

TEST(QuantPlan, SchemaRejectsBrokenPlans) {
  const oj good = plan_for("quantize the demo model to fp8", demo_analysis());
  ASSERT_EQ(violations(good), "");
  json b = good;
  b.erase("requires_confirmation");
  EXPECT_NE(violations(b).find("requires_confirmation"), std::string::npos);
  b = good;
  b["num_calib_data"] = "128";
  EXPECT_NE(violations(b).find("/num_calib_data"), std::string::npos);
  b = good;
  b["decisions"][0]["decision"] = "scheme";
  EXPECT_NE(violations(b), "");
  b = good;
  b["decisions"].erase(b["decisions"].size() - 1);
  EXPECT_NE(violations(b), "");
  b = good;
  b["kv_cache_dtype"] = "int8";
  EXPECT_NE(violations(b), "");
  b = good;
  b["resource_estimate"]["disk"].erase("bits_per_weight");
  EXPECT_NE(violations(b), "");
}

TEST(QuantPlan, Deterministic) {
  const oj a = plan_for("awq 4-bit Qwen/Qwen2.5-0.5B", fitting_analysis());
  const oj b = plan_for("awq 4-bit Qwen/Qwen2.5-0.5B", fitting_analysis());
  EXPECT_EQ(a.dump(2), b.dump(2));
}

TEST(QuantPlan, DeepSeekV3Int4) {
  // 671B MoE with MLA attention, from its config alone: the engine does not
  // run it, so a weight-only RTN scheme is planned without questions.
  const json cfg = {{"model_type", "deepseek_v3"}, {"hidden_size", 7168}, {"intermediate_size", 18432},
                    {"moe_intermediate_size", 2048}, {"num_hidden_layers", 61}, {"num_attention_heads", 128},
                    {"num_key_value_heads", 128}, {"n_routed_experts", 256}, {"n_shared_experts", 1},
                    {"num_experts_per_tok", 8}, {"first_k_dense_replace", 3}, {"q_lora_rank", 1536},
                    {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64},
                    {"v_head_dim", 128}, {"vocab_size", 129280}, {"max_position_embeddings", 163840},
                    {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
  const oj a = analyze_config(cfg, "config.json", "deepseek-ai/DeepSeek-V3", "hub", "/snap", env());
  const oj p = plan_for("quantize deepseek-ai/DeepSeek-V3 to int4 g128", a);
  EXPECT_EQ(violations(p), "");
  EXPECT_TRUE(p["open_questions"].empty()) << p["open_questions"].dump();
  EXPECT_EQ(p["exclude_layers"], json({"lm_head", "*self_attn*", "*mlp.gate"}));
  EXPECT_EQ(p["scheme_check"]["fits"], true);
  EXPECT_EQ(p["scheme_check"]["modules_checked"], 3 * 3 + 58 * (768 + 3));
  const auto& est = p["resource_estimate"];
  EXPECT_EQ(est["calibrated"], false);
  EXPECT_NEAR(est["disk"]["bits_per_weight"].get<double>(), 4.0 + 20.0 / 128, 1e-3);  // bf16 scale + packed zero point per 128
  // RTN holds one tensor at a time: the largest quantized linear (dense MLP), twice, in fp32.
  EXPECT_EQ(est["peak_memory"]["bytes"], 2ull * 18432 * 7168 * 4);
  const double disk = est["disk"]["bytes"].get<double>();
  EXPECT_GT(disk, 330e9);
  EXPECT_LT(disk, 400e9);
}

TEST(QuantPlan, ZeroCountsAreQuestions) {
  Intent in = parse_intent("quantize the demo model to fp8", context());
  in.num_calib_data = {0, Source::kStated};
  in.seq_len = {0, Source::kStated};
  in.eval_limit = {std::optional<uint64_t>(0), Source::kStated};
  const oj p = build_quant_plan(in, demo_analysis(), no_data_dir());
  EXPECT_EQ(violations(p), "");
  EXPECT_EQ(question_fields(p), (std::vector<std::string>{"num_calib_data", "seq_len", "eval_limit"}));
  // Without calibration the counts do not matter.
  in.quant_scheme = {"ptpc_fp8", Source::kStated};
  in.kv_cache_dtype = {"", Source::kStated};
  EXPECT_EQ(question_fields(build_quant_plan(in, demo_analysis(), no_data_dir())),
            std::vector<std::string>{"eval_limit"});
}

TEST(QuantPlan, SchemeLayerProblem) {
  EXPECT_EQ(scheme_layer_problem("fp8", 7, 3), "");
  EXPECT_EQ(scheme_layer_problem("int4_wo_64", 128, 64), "");
  EXPECT_EQ(scheme_layer_problem("int4_wo_64", 128, 96), "in_features 96 is not a multiple of the group size 64");
  EXPECT_EQ(scheme_layer_problem("uint4_wo_per_channel", 12, 64), "out_features 12 is not a multiple of 8 (int4 packing)");
  EXPECT_EQ(scheme_layer_problem("int4_wo_per_channel", 16, 12),
            "in_features 12 is not a multiple of 8 (per-channel int4 packing)");
  EXPECT_EQ(scheme_layer_problem("mxfp4", 16, 48), "in_features 48 is not a multiple of the group size 32");
  EXPECT_EQ(scheme_layer_problem("mxfp4_weight_only", 16, 64), "");
  EXPECT_THROW(scheme_layer_problem("nope", 8, 8), Error);
}

TEST(QuantPlan, LayersThatDoNotFitAreExcludedWhenThePromptSaysSo) {
  // int4 g32 on the demo model: the MLP (172 channels) cannot be stored.
  const oj asked = plan_for("quantize the demo model to int4 g32", demo_analysis());
  ASSERT_EQ(asked["open_questions"].size(), 1u);
  EXPECT_EQ(asked["open_questions"][0]["field"], "quant_scheme");

  const Intent in = parse_intent("quantize the demo model to int4 g32, keep the layers that don't fit in bf16", context());
  EXPECT_TRUE(in.exclude_unsupported.value);
  EXPECT_EQ(in.exclude_unsupported.source, Source::kStated);
  const oj p = build_quant_plan(in, demo_analysis(), no_data_dir());
  EXPECT_TRUE(p["open_questions"].empty()) << p["open_questions"].dump();
  const auto excl = p["exclude_layers"].get<std::vector<std::string>>();
  for (const char* m : {"model.layers.*.mlp.gate_proj", "model.layers.*.mlp.up_proj", "model.layers.*.mlp.down_proj"})
    EXPECT_NE(std::find(excl.begin(), excl.end(), m), excl.end()) << m;
  EXPECT_EQ(p["scheme_check"]["excluded_not_fitting"].size(), 3u);
  EXPECT_TRUE(check_artifact("quant_plan", json(p)).empty());
  // Nothing fits at all (int4 g128 on a 64-wide model): still a question.
  const oj none = build_quant_plan(
      parse_intent("quantize the demo model to int4 g128, skip layers that don't fit", context()), demo_analysis(),
      no_data_dir());
  EXPECT_EQ(none["open_questions"].size(), 1u);
}

}  // namespace
}  // namespace qloom::agent
