// agent/model_analysis: intake from config.json alone. The linear layers and
// parameter counts it derives are checked against the real safetensors of
// the demo model and every engine fixture (dense and MoE); risks fire on
// crafted configs; bad configs give typed errors; the artifact validates
// against schemas/model_analysis.schema.json and the schema rejects broken
// artifacts.
#include "qloom/agent/model_analysis.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/environment.h"
#include "qloom/core/format.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/layer_selection.h"
#include "support/expect_error.h"
#include "agent/agent_fixture.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

using test::env;

std::string violations(const json& artifact) {
  std::string s;
  for (const auto& v : check_artifact("model_analysis", artifact)) s += v.path + ": " + v.message + "\n";
  return s;
}

bool has_risk(const json& a, const std::string& id) {
  for (const auto& r : a["risks"])
    if (r["id"] == id) return true;
  return false;
}

std::vector<std::string> risk_ids(const json& a) {
  std::vector<std::string> ids;
  for (const auto& r : a["risks"]) ids.push_back(r["id"]);
  return ids;
}

// A llama-like config to vary.
json base_config() {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", 256},
              {"intermediate_size", 512},
              {"num_hidden_layers", 4},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 4},
              {"vocab_size", 1000},
              {"max_position_embeddings", 2048},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"}};
}

oj analyze(const json& cfg) { return analyze_config(cfg, "config.json", "some/model", "hub", "/snap", env()); }

// Linear layers and parameter count of a real checkpoint (tests may read
// weights; intake never does).
struct Actual {
  std::map<std::string, std::pair<uint64_t, uint64_t>> linears;  // module -> (out, in)
  uint64_t parameters = 0;
};
Actual actual_of(const fs::path& dir) {
  Actual a;
  const io::WeightIndex w = io::WeightIndex::open(dir);
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const auto& name : w.tensor_names()) {
    const io::TensorInfo* t = w.find(name);
    shapes.emplace_back(name, t->shape);
    a.parameters += t->numel();
  }
  for (const auto& l : quant::find_linear_layers(shapes)) a.linears[l.module] = {l.shape[0], l.shape[1]};
  return a;
}

TEST(ModelAnalysis, DemoModel) {
  const oj a = analyze_model("models/stories260K-hf-bf16", QLOOM_DEMO_MODEL_DIR, env());
  EXPECT_EQ(violations(a), "");
  EXPECT_EQ(a["analysis_status"], "complete");
  EXPECT_EQ(a["model"]["source"], "local");
  EXPECT_EQ(a["model"]["model_path"], "models/stories260K-hf-bf16");
  EXPECT_EQ(a["model"]["resolved_path"], fs::path(QLOOM_DEMO_MODEL_DIR).lexically_normal().string());
  EXPECT_EQ(a["model"]["model_type"], "llama");
  EXPECT_EQ(a["model"]["num_hidden_layers"], 5);
  EXPECT_EQ(a["model"]["hidden_size"], 64);
  EXPECT_EQ(a["model"]["torch_dtype"], "bfloat16");
  EXPECT_EQ(a["model"]["is_moe"], false);
  EXPECT_TRUE(a["model"]["moe"].is_null());
  const auto& t = a["quantization_targets"];
  EXPECT_EQ(t["linear_layer_count"], 35);  // 5 x (q,k,v,o,gate,up,down); lm_head tied
  EXPECT_EQ(t["quantization_target_count"], 35);
  EXPECT_EQ(t["exclude_defaults"], json({"lm_head"}));
  EXPECT_EQ(t["exclude_defaults_source"], "quark_template");
  EXPECT_EQ(t["layout_source"], "engine");
  EXPECT_EQ(t["linear_layer_formula"],
            "5 layers x 4 attention (q,k,v,o) + 5 dense layers x 3 MLP (gate,up,down) + lm_head 0 (tied to the "
            "embeddings) = 35");
  EXPECT_EQ(risk_ids(a), std::vector<std::string>{"tied_embeddings"});
  EXPECT_EQ(a["compatibility"], "ok");
  EXPECT_EQ(a["engine"]["supported"], true);
  EXPECT_EQ(a["engine"]["calibration"], true);
  EXPECT_EQ(a["environment"], env());

  const Actual real = actual_of(QLOOM_DEMO_MODEL_DIR);
  EXPECT_EQ(a["model"]["estimated_parameters"].get<uint64_t>(), real.parameters);
  EXPECT_EQ(a["model"]["estimated_weights_bytes"].get<uint64_t>(), real.parameters * 2);
}

TEST(ModelAnalysis, EngineFixturesMatchTheirCheckpoints) {
  size_t fixtures = 0, moe = 0;
  for (const auto& e : fs::directory_iterator(fs::path(QLOOM_TEST_DATA_DIR) / "engine")) {
    if (!fs::exists(e.path() / "config.json") || !fs::exists(e.path() / "model.safetensors")) continue;
    SCOPED_TRACE(e.path().filename().string());
    ++fixtures;
    const oj a = analyze_model(e.path().string(), e.path(), env());
    EXPECT_EQ(violations(a), "");
    EXPECT_EQ(a["analysis_status"], "complete");
    EXPECT_EQ(a["quantization_targets"]["layout_source"], "engine");
    const Actual real = actual_of(e.path());
    std::map<std::string, std::pair<uint64_t, uint64_t>> derived;
    for (const auto& m : expand_linear_modules(a)) derived[m.name] = {m.out_features, m.in_features};
    EXPECT_EQ(derived, real.linears);
    EXPECT_EQ(a["quantization_targets"]["linear_layer_count"].get<size_t>(), real.linears.size());
    EXPECT_EQ(a["model"]["estimated_parameters"].get<uint64_t>(), real.parameters);
    // Default exclusions counted on the real module names.
    size_t excluded = 0;
    for (const auto& [name, shape] : real.linears)
      for (const auto& p : a["quantization_targets"]["exclude_defaults"])
        if (quant::module_matches(p.get<std::string>(), name)) {
          ++excluded;
          break;
        }
    EXPECT_EQ(a["quantization_targets"]["quantization_target_count"].get<size_t>(), real.linears.size() - excluded);
    if (a["model"]["is_moe"].get<bool>()) {
      ++moe;
      EXPECT_TRUE(has_risk(a, "moe"));
      EXPECT_TRUE(a["quantization_targets"]["needs_moe_preparation"].get<bool>());
      EXPECT_GT(a["model"]["moe"]["num_experts"].get<int>(), 0);
      EXPECT_GT(excluded, 0u);  // the routers
    }
  }
  EXPECT_GE(fixtures, 10u);
  EXPECT_EQ(moe, 3u);  // mixtral, qwen2_moe, qwen3_moe
}

TEST(ModelAnalysis, ReadsOnlyConfigJson) {
  test::TempDir d("intake");
  fs::copy_file(fs::path(QLOOM_DEMO_MODEL_DIR) / "config.json", d / "config.json");
  const oj alone = analyze_model("org/demo", d.path(), env());
  EXPECT_EQ(violations(alone), "");
  // Garbage weights and tokenizer beside it change nothing: they are never read.
  d.write("model.safetensors", "not a safetensors file");
  d.write("tokenizer.json", "{broken");
  d.write("generation_config.json", "[[[");
  const oj with_junk = analyze_model("org/demo", d.path(), env());
  EXPECT_EQ(alone.dump(), with_junk.dump());
  EXPECT_EQ(alone["model"]["source"], "local");  // not a hub cache snapshot
  EXPECT_TRUE(alone["model"]["hub_repo_id"].is_null());
  // The same facts as the full demo model directory.
  const oj full = analyze_model("org/demo", QLOOM_DEMO_MODEL_DIR, env());
  EXPECT_EQ(alone["quantization_targets"].dump(), full["quantization_targets"].dump());
  EXPECT_EQ(alone["model"]["estimated_parameters"], full["model"]["estimated_parameters"]);

  // A hub snapshot folder records its commit.
  const std::string commit(40, 'a');
  const fs::path snap = d.mkdir("models--org--demo/snapshots/" + commit);
  fs::copy_file(d / "config.json", snap / "config.json");
  const oj hub = analyze_model("org/demo", snap, env());
  EXPECT_EQ(violations(hub), "");
  EXPECT_EQ(hub["model"]["source"], "hub");
  EXPECT_EQ(hub["model"]["hub_repo_id"], "org/demo");
  EXPECT_EQ(hub["model"]["hub_revision"], commit);
  EXPECT_EQ(hub["model"]["resolved_path"], snap.string());
  // A trailing slash does not change the resolved path.
  EXPECT_EQ(analyze_model("org/demo", snap.string() + "/", env())["model"]["resolved_path"], snap.string());
  // A snapshot path with a spec that is no hub id stays local.
  EXPECT_EQ(analyze_model("./some/dir/x", snap, env())["model"]["source"], "local");
}

TEST(ModelAnalysis, Deterministic) {
  const oj a = analyze_model("m", QLOOM_DEMO_MODEL_DIR, env()), b = analyze_model("m", QLOOM_DEMO_MODEL_DIR, env());
  EXPECT_EQ(a.dump(2), b.dump(2));
}

TEST(ModelAnalysis, TypedErrors) {
  test::TempDir d("intake-err");
  Error e = test::catch_error([&] { analyze_model("x", d / "nope", env()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), (d / "nope").string());

  e = test::catch_error([&] { analyze_model("x", d.path(), env()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), (d / "config.json").string());

  d.write("config.json", "{\"model_type\": \"llama\",");
  e = test::catch_error([&] { analyze_model("x", d.path(), env()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), (d / "config.json").string());

  d.write("config.json", "[1, 2]");
  e = test::catch_error([&] { analyze_model("x", d.path(), env()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("object"), std::string::npos);

  json cfg = base_config();
  cfg["hidden_size"] = "big";
  d.write("config.json", cfg.dump());
  e = test::catch_error([&] { analyze_model("x", d.path(), env()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "hidden_size");

  cfg = base_config();
  cfg["num_hidden_layers"] = 0;
  e = test::catch_error([&] { analyze(cfg); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "num_hidden_layers");

  cfg = base_config();
  cfg["model_type"] = 7;
  EXPECT_EQ(test::catch_error([&] { analyze(cfg); }).item(), "model_type");

  if (!test::permissions_are_bypassed()) {
    d.write("config.json", base_config().dump());
    ::chmod((d / "config.json").c_str(), 0);
    e = test::catch_error([&] { analyze_model("x", d.path(), env()); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.file(), (d / "config.json").string());
  }
}

TEST(ModelAnalysis, IncompleteConfigIsPartial) {
  json cfg = base_config();
  cfg.erase("hidden_size");
  cfg.erase("model_type");
  const oj a = analyze(cfg);
  EXPECT_EQ(violations(a), "");
  EXPECT_EQ(a["analysis_status"], "partial");
  EXPECT_EQ(a["compatibility"], "unsupported");
  ASSERT_TRUE(has_risk(a, "incomplete_config"));
  EXPECT_NE(a["risks"][0]["message"].get<std::string>().find("model_type, hidden_size"), std::string::npos);
  EXPECT_TRUE(a["quantization_targets"]["linear_layer_count"].is_null());
  EXPECT_TRUE(a["quantization_targets"]["groups"].empty());
  EXPECT_TRUE(a["model"]["hidden_size"].is_null());
  EXPECT_EQ(a["model"]["num_hidden_layers"], 4);
  EXPECT_TRUE(expand_linear_modules(a).empty());
  const std::string summary = render_analysis_summary(a);
  EXPECT_NE(summary.find("Linear layers:    unknown (partial analysis)"), std::string::npos);
}

TEST(ModelAnalysis, RisksFire) {
  {  // plain supported dense model: no risk at all
    const oj a = analyze(base_config());
    EXPECT_EQ(violations(a), "");
    EXPECT_TRUE(a["risks"].empty());
    EXPECT_EQ(a["compatibility"], "ok");
    EXPECT_EQ(a["quantization_targets"]["linear_layer_count"], 4 * 7 + 1);
    EXPECT_EQ(a["quantization_targets"]["quantization_target_count"], 4 * 7);  // lm_head excluded
  }
  {
    json cfg = base_config();
    cfg["auto_map"] = {{"AutoModelForCausalLM", "modeling_x.XForCausalLM"}};
    const oj a = analyze(cfg);
    EXPECT_TRUE(has_risk(a, "remote_code"));
    EXPECT_EQ(a["model"]["trust_remote_code"], true);
    EXPECT_EQ(a["compatibility"], "warning");
  }
  {
    json cfg = base_config();
    cfg["quantization_config"] = {{"quant_method", "fp8"}};
    const oj a = analyze(cfg);
    EXPECT_EQ(violations(a), "");
    EXPECT_TRUE(has_risk(a, "already_quantized"));
    EXPECT_EQ(a["model"]["quantization_config"], "fp8");
    EXPECT_EQ(a["compatibility"], "unsupported");
    EXPECT_EQ(a["engine"]["calibration"], false);
  }
  {
    json cfg = base_config();
    cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
    const oj a = analyze(cfg);
    EXPECT_EQ(violations(a), "");
    EXPECT_EQ(risk_ids(a), std::vector<std::string>{"rope_scaling_unsupported"});
    EXPECT_EQ(a["model"]["rope_scaling_type"], "yarn");
    EXPECT_EQ(a["engine"]["supported"], false);
    EXPECT_EQ(a["quantization_targets"]["layout_source"], "engine");  // shapes still the engine's
    EXPECT_EQ(a["compatibility"], "warning");
  }
  {  // an MoE type qloom's engine does not know
    json cfg = base_config();
    cfg["model_type"] = "my_moe";
    cfg["num_experts"] = 8;
    cfg["num_experts_per_tok"] = 2;
    cfg["moe_intermediate_size"] = 128;
    const oj a = analyze(cfg);
    EXPECT_EQ(violations(a), "");
    EXPECT_EQ(risk_ids(a), (std::vector<std::string>{"unsupported_architecture", "no_quark_template", "moe",
                                                     "layout_assumed"}));
    EXPECT_EQ(a["model"]["moe"]["num_experts"], 8);
    EXPECT_EQ(a["model"]["moe"]["experts_per_token"], 2);
    EXPECT_EQ(a["quantization_targets"]["layout"], "qwen_moe");
    // 4 x (4 attention + 1 router + 8 x 3 experts) + lm_head.
    EXPECT_EQ(a["quantization_targets"]["linear_layer_count"], 4 * (4 + 1 + 24) + 1);
    EXPECT_EQ(a["engine"]["supported"], false);
    EXPECT_EQ(a["engine"]["calibration"], false);
    EXPECT_EQ(a["compatibility"], "warning");
  }
  {
    json cfg = base_config();
    cfg["model_type"] = "gemma3";
    cfg["architectures"] = {"Gemma3ForConditionalGeneration"};
    cfg["vision_config"] = {{"hidden_size", 1152}};
    const oj a = analyze(cfg);
    EXPECT_TRUE(has_risk(a, "multimodal"));
    EXPECT_EQ(a["model"]["is_multimodal"], true);
    EXPECT_EQ(a["model"]["multimodal_signals"],
              json({"vision_config", "architectures: Gemma3ForConditionalGeneration"}));
    EXPECT_EQ(a["quantization_targets"]["exclude_defaults"],
              json({"*vision_tower*", "*multi_modal_projector*", "*lm_head"}));
  }
  {
    json cfg = base_config();
    cfg["tie_word_embeddings"] = true;
    const oj a = analyze(cfg);
    EXPECT_EQ(risk_ids(a), std::vector<std::string>{"tied_embeddings"});
    EXPECT_EQ(a["quantization_targets"]["linear_layer_count"], 4 * 7);
  }
}

TEST(ModelAnalysis, DeepSeekV3FromItsConfig) {
  const json cfg = {{"architectures", {"DeepseekV3ForCausalLM"}},
                    {"auto_map", {{"AutoModelForCausalLM", "modeling_deepseek.DeepseekV3ForCausalLM"}}},
                    {"model_type", "deepseek_v3"},
                    {"hidden_size", 7168},
                    {"intermediate_size", 18432},
                    {"moe_intermediate_size", 2048},
                    {"num_hidden_layers", 61},
                    {"num_attention_heads", 128},
                    {"num_key_value_heads", 128},
                    {"n_routed_experts", 256},
                    {"n_shared_experts", 1},
                    {"num_experts_per_tok", 8},
                    {"first_k_dense_replace", 3},
                    {"moe_layer_freq", 1},
                    {"q_lora_rank", 1536},
                    {"kv_lora_rank", 512},
                    {"qk_nope_head_dim", 128},
                    {"qk_rope_head_dim", 64},
                    {"v_head_dim", 128},
                    {"vocab_size", 129280},
                    {"max_position_embeddings", 163840},
                    {"rope_scaling", {{"type", "yarn"}, {"factor", 40}}},
                    {"tie_word_embeddings", false},
                    {"torch_dtype", "bfloat16"}};
  const oj a = analyze(cfg);
  EXPECT_EQ(violations(a), "");
  EXPECT_EQ(risk_ids(a), (std::vector<std::string>{"remote_code", "unsupported_architecture",
                                                   "rope_scaling_unsupported", "moe", "large_model",
                                                   "layout_assumed"}));
  const auto& t = a["quantization_targets"];
  EXPECT_EQ(t["layout"], "deepseek");
  // 61 x 5 MLA + 3 dense x 3 + 58 MoE x (1 + 256 x 3 + 3 shared) + lm_head.
  EXPECT_EQ(t["linear_layer_count"], 61 * 5 + 3 * 3 + 58 * (1 + 768 + 3) + 1);
  // Template: lm_head, *self_attn*, *mlp.gate (routers only, not gate_proj).
  EXPECT_EQ(t["quantization_target_count"], 61 * 5 + 3 * 3 + 58 * (1 + 768 + 3) + 1 - 1 - 61 * 5 - 58);
  const double params = a["model"]["estimated_parameters"].get<double>();
  EXPECT_NEAR(params, 671e9, 671e9 * 0.01);  // the published size without the MTP module
  EXPECT_EQ(a["model"]["moe"]["moe_layers"], 58);
  EXPECT_EQ(a["model"]["moe"]["shared_expert_intermediate_size"], 2048);
}

TEST(ModelAnalysis, SummaryBlock) {
  const oj a = analyze_model("models/stories260K-hf-bf16", QLOOM_DEMO_MODEL_DIR, env());
  const std::string s = render_analysis_summary(a);
  const std::string resolved = fs::path(QLOOM_DEMO_MODEL_DIR).lexically_normal().string();
  const std::string want =
      "Model Analysis:\n"
      "  Model path:       models/stories260K-hf-bf16 (" + resolved + ")\n"
      "  Model type:       llama (LlamaForCausalLM)\n"
      "  Hidden layers:    5\n"
      "  Linear layers:    35 (quantization targets; 35 linear layers, 0 excluded by default)\n"
      "  MoE:              No\n"
      "  Exclude defaults: [lm_head]\n"
      "  Risks:            tied_embeddings (low): lm_head is tied to the input embeddings: it is not stored "
      "separately and stays in the source dtype\n"
      "  Compatibility:    OK\n"
      "  Parameters:       ~" + format_count(a["model"]["estimated_parameters"].get<uint64_t>()) + " (weights ~" +
      format_bytes(a["model"]["estimated_weights_bytes"].get<uint64_t>()) + " bfloat16, from config.json)\n"
      "  qloom engine:     supported (calibration and evaluation available)\n";
  EXPECT_EQ(s, want);

  // MoE and several risks: one risk per line, aligned under the first.
  json cfg = base_config();
  cfg["model_type"] = "my_moe";
  cfg["num_experts"] = 8;
  cfg["num_experts_per_tok"] = 2;
  const std::string m = render_analysis_summary(analyze(cfg));
  EXPECT_NE(m.find("  MoE:              Yes (8 experts, 2 per token, 4 MoE layers)\n"), std::string::npos);
  EXPECT_NE(m.find("  Risks:            unsupported_architecture (high): "), std::string::npos);
  EXPECT_NE(m.find("\n                    no_quark_template (medium): "), std::string::npos);
  EXPECT_NE(m.find("  Linear layers:    ~"), std::string::npos);  // assumed layout: an estimate
  EXPECT_NE(m.find("  Compatibility:    Warning (see risks)\n"), std::string::npos);
}

TEST(ModelAnalysis, SchemaRejectsBrokenArtifacts) {
  const oj good = analyze_model("m", QLOOM_DEMO_MODEL_DIR, env());
  ASSERT_EQ(violations(good), "");
  json broken = good;
  broken.erase("risks");
  EXPECT_NE(violations(broken).find("risks"), std::string::npos);
  broken = good;
  broken["analysis_status"] = "done";
  EXPECT_NE(violations(broken), "");
  broken = good;
  broken["model"]["hidden_size"] = "64";
  EXPECT_NE(violations(broken).find("/model/hidden_size"), std::string::npos);
  broken = good;
  broken["quantization_targets"]["groups"][0]["layers"] = "3-";
  EXPECT_NE(violations(broken), "");
  broken = good;
  broken["risks"].push_back({{"id", "x"}, {"severity", "fatal"}, {"message", "m"}, {"recovery_hint", ""}});
  EXPECT_NE(violations(broken), "");
  broken = good;
  broken["surprise"] = 1;
  EXPECT_NE(violations(broken), "");
  broken = good;
  broken["environment"]["device_env"].erase("HIP_VISIBLE_DEVICES");
  EXPECT_NE(violations(broken), "");
  EXPECT_THROW(require_valid_artifact("model_analysis", broken, "model_analysis.json"), Error);
}

TEST(ModelAnalysis, LayerRanges) {
  EXPECT_EQ(format_layer_ranges({0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
  EXPECT_EQ(format_layer_ranges({4}), "4");
  EXPECT_EQ(parse_layer_ranges("0-3,5,7-9", "f"), (std::vector<int64_t>{0, 1, 2, 3, 5, 7, 8, 9}));
  for (const char* bad : {"", "3-1", "1,1", "a", "1-", ",2", "2,1"})
    EXPECT_EQ(test::catch_error([&] { parse_layer_ranges(bad, "f"); }).kind(), ErrorKind::kInvalidInput) << bad;
}

}  // namespace
}  // namespace qloom::agent
