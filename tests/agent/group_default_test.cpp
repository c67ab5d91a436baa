// The derived default group size (seed 000 §4): "W4A16" / "AWQ 4-bit" name
// no group, so the plan takes the largest of 128, 64, 32 that fits every
// layer to quantize instead of stopping at a checkpoint; a stated group is
// still the user's and a misfit is still a question. On the demo model and on
// a SmolLM2-shaped config (576 = 9 x 64 is not a multiple of 128).
#include "qloom/agent/group_default.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/environment.h"
#include "qloom/agent/intent.h"
#include "qloom/agent/model_analysis.h"
#include "qloom/agent/quant_plan.h"
#include "agent/agent_fixture.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

using test::env;

IntentContext context() { return test::demo_context(); }

// SmolLM2-135M's shapes, config only (intake never reads weights).
class SmolShapes : public ::testing::Test {
 protected:
  SmolShapes() : tmp_("group") {
    const json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 576},
                      {"intermediate_size", 1536}, {"num_hidden_layers", 30}, {"num_attention_heads", 9},
                      {"num_key_value_heads", 3}, {"head_dim", 64}, {"vocab_size", 49152},
                      {"max_position_embeddings", 8192}, {"rope_theta", 100000.0}, {"rms_norm_eps", 1e-5},
                      {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}};
    dir_ = tmp_.write("smollm2/config.json", cfg.dump(2)).parent_path();
    analysis_ = analyze_model(dir_.string(), dir_, env());
  }
  oj plan(const std::string& prompt) const {
    const std::string p = std::string(prompt).replace(prompt.find("DIR"), 3, dir_.string());
    PlanOptions o;
    o.data_dir = "";
    return build_quant_plan(parse_intent(p, context()), analysis_, o);
  }
  test::TempDir tmp_;
  fs::path dir_;
  oj analysis_;
};

const oj& decision(const oj& plan, const std::string& name) {
  for (const auto& d : plan["decisions"])
    if (d["decision"] == name) return d;
  static const oj none;
  ADD_FAILURE() << "no decision " << name;
  return none;
}

bool asks(const oj& plan, const std::string& field) {
  for (const auto& q : plan["open_questions"])
    if (q["field"] == field) return true;
  return false;
}

const char* kIssuePrompt =
    "Quantize the SmolLM2 model at DIR to W4A16 with GPTQ, judge it by perplexity on wikitext-2 and accept a "
    "10% gap";

TEST_F(SmolShapes, W4A16TakesTheLargestGroupThatFitsEveryLayer) {
  const oj p = plan(kIssuePrompt);
  EXPECT_EQ(p["quant_scheme"], "int4_wo_64");
  EXPECT_TRUE(p["open_questions"].empty()) << p["open_questions"].dump();
  EXPECT_TRUE(p["scheme_check"]["fits"].get<bool>());
  const json& d = decision(p, "global_scheme");
  EXPECT_EQ(d["value"], "int4_wo_64");
  EXPECT_EQ(d["source"], "inferred");
  const std::string reason = d["reason"];
  EXPECT_NE(reason.find("group 64 is a derived default"), std::string::npos) << reason;
  EXPECT_NE(reason.find("in_features 576 is not a multiple of the group size 128"), std::string::npos) << reason;
  EXPECT_TRUE(p["output_dir"].get<std::string>().ends_with("-int4_wo_64")) << p["output_dir"];
  EXPECT_TRUE(check_artifact("quant_plan", json(p)).empty());
  EXPECT_NE(render_plan_table(p).find("derived default"), std::string::npos);
}

TEST_F(SmolShapes, Awq4BitTakesUint4Group64) {
  const oj p = plan("Quantize the model at DIR to 4-bit with AWQ");
  EXPECT_EQ(p["quant_scheme"], "uint4_wo_64");
  EXPECT_FALSE(asks(p, "quant_scheme")) << p["open_questions"].dump();
}

TEST_F(SmolShapes, AStatedGroupIsStillAsked) {
  for (const char* prompt : {"Quantize the model at DIR to W4A16 g128 with GPTQ",
                             "Quantize the model at DIR to W4A16 with group size 128",
                             "Quantize the model at DIR to int4_wo_128 with GPTQ",
                             "Quantize the model at DIR to uint4 g128 with AWQ"}) {
    const oj p = plan(prompt);
    EXPECT_TRUE(p["quant_scheme"].get<std::string>().ends_with("_wo_128")) << prompt;
    EXPECT_TRUE(asks(p, "quant_scheme")) << prompt;
  }
  // A stated group that fits is taken as it is.
  EXPECT_EQ(plan("Quantize the model at DIR to W4A16 g32 with GPTQ")["quant_scheme"], "int4_wo_32");
}

TEST(GroupDefault, DemoModel) {
  PlanOptions o;
  o.data_dir = "";
  const oj a = analyze_model("models/stories260K-hf-bf16", QLOOM_DEMO_MODEL_DIR, env());
  // gate/up_proj (out 172) fit no int4 group: no group fits every layer, so
  // the misfit is a question as before.
  oj p = build_quant_plan(parse_intent("Quantize the demo model to W4A16 with GPTQ", context()), a, o);
  EXPECT_EQ(p["quant_scheme"], "int4_wo_128");
  EXPECT_TRUE(asks(p, "quant_scheme"));

  // Keeping those in bf16: the rest (in_features 64) takes group 64, not 128.
  p = build_quant_plan(
      parse_intent("Quantize the demo model to W4A16 with GPTQ, keep the layers that don't fit in bf16", context()),
      a, o);
  EXPECT_EQ(p["quant_scheme"], "int4_wo_64");
  EXPECT_TRUE(p["open_questions"].empty()) << p["open_questions"].dump();
  EXPECT_EQ(p["scheme_check"]["excluded_not_fitting"].size(), 3u);
  EXPECT_EQ(p["scheme_check"]["modules_checked"].get<int>() - p["scheme_check"]["modules_not_fitting"].get<int>(),
            20);  // q, k, v, o_proj of 5 layers

  // The same with the group stated: 128 fits nothing, still a question.
  p = build_quant_plan(
      parse_intent("Quantize the demo model to W4A16 g128, keep the layers that don't fit in bf16", context()), a,
      o);
  EXPECT_EQ(p["quant_scheme"], "int4_wo_128");
  EXPECT_TRUE(asks(p, "quant_scheme"));
}

TEST(GroupDefault, AFittingGroupIsKept) {
  // 256 / 512 wide: 128 fits, nothing is derived.
  const json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 256},
                    {"intermediate_size", 512}, {"num_hidden_layers", 2}, {"num_attention_heads", 8},
                    {"num_key_value_heads", 4}, {"vocab_size", 1000}, {"max_position_embeddings", 2048},
                    {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
  const oj a = analyze_config(cfg, "config.json", "Qwen/Qwen2.5-0.5B", "hub", "/snap", env());
  PlanOptions o;
  o.data_dir = "";
  const oj p = build_quant_plan(parse_intent("quantize Qwen/Qwen2.5-0.5B to W4A16 with GPTQ", context()), a, o);
  EXPECT_EQ(p["quant_scheme"], "int4_wo_128");
  EXPECT_EQ(decision(p, "global_scheme")["reason"].get<std::string>().find("derived"), std::string::npos);
}

}  // namespace
}  // namespace qloom::agent
