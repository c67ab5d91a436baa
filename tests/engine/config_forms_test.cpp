// config.json in the forms transformers 4.x and 5.x write
// (tests/data/engine/config_forms/<name>/, scripts/goldens/config_forms.py):
// for every architecture the parsed ModelConfig is equal field by field and
// the logits of the same weights are bitwise identical whichever form the
// config takes (v4.json, v4_torch_dtype.json, v5.json); RoPE types the engine
// lacks are kUnsupported naming the field and the type in both forms; an
// unknown maths-suggesting key is an error, never a default.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "engine/engine_fixture.h"
#include "qloom/core/error.h"
#include "qloom/engine/kv_cache.h"
#include "qloom/engine/model.h"
#include "qloom/model/model_config.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kForms = test::engine_data_dir() / "config_forms";
const char* const kForm[] = {"v4.json", "v4_torch_dtype.json", "v5.json"};

json read_json(const fs::path& p) { return json::parse(test::read_file(p)); }

// Every field of ModelConfig but raw, as JSON, so a difference reads by name.
json fields(const model::ModelConfig& c) {
  auto rope = [](const model::ModelConfig::Rope& r) {
    return json{{"type", r.type}, {"theta", r.theta}, {"factor", r.factor}, {"low", r.low_freq_factor},
                {"high", r.high_freq_factor}, {"omp", r.original_max_position_embeddings}};
  };
  return json{{"model_type", c.model_type}, {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
              {"intermediate_size", c.intermediate_size}, {"num_layers", c.num_layers}, {"num_heads", c.num_heads},
              {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
              {"max_position_embeddings", c.max_position_embeddings}, {"rms_norm_eps", c.rms_norm_eps},
              {"tie_word_embeddings", c.tie_word_embeddings}, {"bos", c.bos_token_id}, {"eos", c.eos_token_ids},
              {"rope", rope(c.rope)}, {"rope_local", rope(c.rope_local)},
              {"partial_rotary_factor", c.partial_rotary_factor}, {"qkv_bias", c.qkv_bias}, {"o_bias", c.o_bias},
              {"mlp_bias", c.mlp_bias}, {"sliding_window", c.sliding_window}, {"layer_sliding", c.layer_sliding},
              {"attn_scale", c.attn_scale}, {"attn_softcap", c.attn_logit_softcapping},
              {"final_softcap", c.final_logit_softcapping}, {"hidden_act", c.hidden_act},
              {"embed_scale", c.embed_scale}, {"num_experts", c.num_experts},
              {"experts_per_tok", c.num_experts_per_tok}, {"moe_intermediate_size", c.moe_intermediate_size},
              {"shared_expert", c.shared_expert_intermediate_size}, {"norm_topk_prob", c.norm_topk_prob},
              {"layer_moe", c.layer_moe}};
}

// The weights the form's config describes: the fixture of that name, the
// llama fixture for the rope_* variants.
fs::path weights_of(const std::string& name) {
  return test::engine_data_dir() / (name.rfind("rope_", 0) == 0 ? "llama" : name);
}

std::vector<float> logits_with(const fs::path& weights, const json& config, const std::vector<int32_t>& tokens) {
  test::TempDir dir("cfgform");
  fs::copy_file(weights / "model.safetensors", dir / "model.safetensors");
  std::ofstream(dir / "config.json") << config.dump(2);
  LoadOptions o;
  o.threads = 1;
  auto m = Model::load(dir.path(), o);
  auto cache = m->new_cache(static_cast<int64_t>(tokens.size()));
  return m->forward(tokens, *cache);
}

class ConfigForms : public ::testing::TestWithParam<const char*> {};

TEST_P(ConfigForms, SameConfigAndBitwiseSameLogitsInEveryForm) {
  const std::string name = GetParam();
  const model::ModelConfig ref = model::ModelConfig::parse(read_json(kForms / name / "v5.json"), "v5.json");
  const std::vector<int32_t> tokens = test::read_reference(weights_of(name)).tokens_long;
  const std::vector<float> want = logits_with(weights_of(name), read_json(kForms / name / "v5.json"), tokens);
  for (const char* form : kForm) {
    SCOPED_TRACE(name + "/" + form);
    const json cfg = read_json(kForms / name / form);
    EXPECT_EQ(fields(model::ModelConfig::parse(cfg, form)).dump(1), fields(ref).dump(1));
    const std::vector<float> got = logits_with(weights_of(name), cfg, tokens);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "logits differ";
  }
  if (name.rfind("rope_", 0) != 0) {  // and they are transformers' logits (fixture reference)
    const test::Reference r = test::read_reference(weights_of(name));
    ASSERT_EQ(r.logits_long.size(), want.size());
    EXPECT_LE(test::compare_logits(want.data(), r.logits_long.data(), want.size()).rel(), 2e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, ConfigForms,
                         ::testing::Values("llama", "llama3_rope", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
                                           "gemma3_text", "phi3", "mixtral", "qwen2_moe", "qwen3_moe", "rope_linear",
                                           "rope_llama3"),
                         [](const auto& i) { return std::string(i.param); });

TEST(ConfigForms, RopeParsedAsWritten) {
  const model::ModelConfig lin = model::ModelConfig::parse(read_json(kForms / "rope_linear" / "v5.json"));
  EXPECT_EQ(lin.rope.type, "linear");
  EXPECT_EQ(lin.rope.factor, 4.0);
  EXPECT_EQ(lin.rope.theta, 50000.0);
  const model::ModelConfig g3 = model::ModelConfig::parse(read_json(kForms / "gemma3_text" / "v5.json"));
  EXPECT_EQ(g3.rope.type, "linear");
  EXPECT_EQ(g3.rope.theta, 1e6);
  EXPECT_EQ(g3.rope_local.type, "default");
  EXPECT_EQ(g3.rope_local.theta, 1e4);
  EXPECT_EQ(model::ModelConfig::parse(read_json(kForms / "phi3" / "v5.json")).partial_rotary_factor, 0.5);
  EXPECT_EQ(model::ModelConfig::parse(read_json(kForms / "qwen3_moe" / "v5.json")).num_experts, 6);
}

class UnsupportedRope : public ::testing::TestWithParam<const char*> {};

TEST_P(UnsupportedRope, IsUnsupportedNamingFieldAndType) {
  const std::string type = GetParam();
  for (const char* form : kForm) {
    SCOPED_TRACE(type + "/" + form);
    const json cfg = read_json(kForms / ("rope_" + type) / form);
    Error e = test::catch_error([&] { model::ModelConfig::parse(cfg); });
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(e.item(), std::string(form) == "v5.json" ? "rope_parameters.rope_type" : "rope_scaling.rope_type");
    EXPECT_NE(e.message().find("\"" + type + "\""), std::string::npos) << e.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Types, UnsupportedRope, ::testing::Values("dynamic", "yarn", "longrope"),
                         [](const auto& i) { return std::string(i.param); });

json llama_v5() { return read_json(kForms / "llama" / "v5.json"); }

Error parse_error(const json& cfg) {
  return test::catch_error([&] { model::ModelConfig::parse(cfg); });
}

TEST(ConfigKeys, UnknownMathsKeyIsNamed) {
  for (const char* key : {"sliding_window", "logit_scale", "rope_interleaved", "attn_temperature",
                          "embedding_multiplier", "norm_type", "use_qk_norm"}) {
    json cfg = llama_v5();
    cfg[key] = 1;
    Error e = parse_error(cfg);
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << key;
    EXPECT_EQ(e.item(), key);
  }
}

TEST(ConfigKeys, HarmlessKeysPass) {
  json cfg = llama_v5();
  cfg["pretraining_tp"] = 1;
  cfg["my_tool_note"] = "hello";
  cfg["quantization_config"] = {{"quant_method", "quark"}};
  cfg["attention_dropout"] = 0.1;
  EXPECT_EQ(fields(model::ModelConfig::parse(cfg)).dump(), fields(model::ModelConfig::parse(llama_v5())).dump());
}

TEST(ConfigKeys, UnknownRopeParameterIsNamed) {
  json cfg = read_json(kForms / "rope_linear" / "v4.json");
  cfg["rope_scaling"]["beta_fast"] = 32;
  Error e = parse_error(cfg);
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "rope_scaling.beta_fast");
}

TEST(ConfigKeys, DisagreeingRopeThetaIsInvalid) {
  json cfg = llama_v5();
  cfg["rope_theta"] = 500000.0;  // rope_parameters says 10000
  Error e = parse_error(cfg);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "rope_theta");
  json both = read_json(kForms / "llama" / "v4.json");
  both["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  both["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_EQ(parse_error(both).kind(), ErrorKind::kInvalidInput);
}

TEST(ConfigKeys, Llama3NeedsItsFactors) {
  json cfg = read_json(kForms / "rope_llama3" / "v4.json");
  cfg["rope_scaling"].erase("low_freq_factor");
  EXPECT_EQ(parse_error(cfg).item(), "rope_scaling.low_freq_factor");
}

TEST(ConfigKeys, BidirectionalAttentionIsUnsupported) {
  json cfg = read_json(kForms / "gemma3_text" / "v5.json");
  cfg["use_bidirectional_attention"] = true;
  Error e = parse_error(cfg);
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "use_bidirectional_attention");
}

TEST(ConfigKeys, DtypeAndTorchDtypeMustAgree) {
  json cfg = read_json(kForms / "gemma" / "v5.json");
  cfg["torch_dtype"] = "float16";
  EXPECT_EQ(parse_error(cfg).item(), "dtype");
}

TEST(ConfigKeys, NestedTextConfigIsRead) {
  const json text = read_json(kForms / "gemma3_text" / "v5.json");
  const json wrapper = {{"model_type", "gemma3"}, {"architectures", {"Gemma3ForConditionalGeneration"}},
                        {"text_config", text}, {"vision_config", {{"hidden_size", 8}}}, {"image_token_index", 5}};
  EXPECT_EQ(fields(model::ModelConfig::parse(wrapper)).dump(), fields(model::ModelConfig::parse(text)).dump());
  json bad = wrapper;
  bad["text_config"]["rope_interleaved"] = true;
  EXPECT_EQ(parse_error(bad).item(), "text_config.rope_interleaved");
}

}  // namespace
}  // namespace qloom::engine
