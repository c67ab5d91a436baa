// Scaling groups (quant/layer_groups.h) against the engine fixtures: every
// module a group names exists in the checkpoint with shapes that chain (the
// producer's rows / norm width = every reader's in_features), every linear of
// a layer is read by exactly one group (o_proj excepted under GQA), and the
// Quark scaling_layers lists equal Quark's own maps where Quark has one.
#include <gtest/gtest.h>

#include <set>

#include "engine/engine_fixture.h"
#include "qloom/engine/weight_source.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/layer_groups.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

const char* const kArchs[] = {"llama", "llama3_rope", "mistral", "qwen2",   "qwen3",     "gemma",
                              "gemma2", "gemma3_text", "phi3",   "mixtral", "qwen2_moe", "qwen3_moe"};

model::ModelConfig fixture_config(const std::string& arch, bool mha = false) {
  nlohmann::json j = io::ModelDir::open(test::engine_data_dir() / arch).config();
  if (mha) j["num_key_value_heads"] = j["num_attention_heads"];
  return model::ModelConfig::parse(j);
}

class LayerGroups : public ::testing::TestWithParam<const char*> {};

TEST_P(LayerGroups, ModulesExistAndShapesChain) {
  const std::string arch = GetParam();
  io::ModelDir dir = io::ModelDir::open(test::engine_data_dir() / arch);
  auto src = engine::plain_weight_source(dir);
  const model::ModelConfig c = model::ModelConfig::parse(dir.config());
  const std::vector<std::string> names = dir.weights().tensor_names();
  auto shape = [&](const std::string& t) {
    EXPECT_TRUE(src->contains(t)) << t;
    return src->contains(t) ? src->load(t).shape : std::vector<int64_t>{};
  };
  for (int layer = 0; layer < static_cast<int>(c.num_layers); ++layer) {
    std::set<std::string> read;
    for (const ScalingGroup& g : layer_scaling_groups(c, layer)) {
      SCOPED_TRACE(g.kind + " " + g.prev_op);
      ASSERT_FALSE(g.linears.empty());
      EXPECT_FALSE(g.inspect.empty());
      if (g.kind == "attn_out") {
        EXPECT_EQ(g.applicable, c.num_kv_heads == c.num_heads);
        if (!g.applicable) { EXPECT_NE(g.skip_reason.find("grouped-query"), std::string::npos); }
      } else {
        EXPECT_TRUE(g.applicable);
      }
      if (g.prev_kind == PrevKind::kNorm) {
        EXPECT_EQ(shape(g.prev_op), (std::vector<int64_t>{g.channels}));
      } else {
        const std::vector<int64_t> ps = shape(g.prev_op + ".weight");
        ASSERT_EQ(ps.size(), 2u);
        if (g.applicable) { EXPECT_EQ(g.prev_row_offset + g.channels, ps[0]) << "the scaled rows end the producer"; }
      }
      bool site_is_reader = false;
      for (const auto* list : {&g.linears, &g.fold_only})
        for (const std::string& m : *list) {
          const std::vector<int64_t> ws = shape(m + ".weight");
          ASSERT_EQ(ws.size(), 2u) << m;
          if (!g.applicable) continue;
          EXPECT_EQ(ws[1], g.channels) << m;
          EXPECT_TRUE(read.insert(m).second) << m << " is read by two groups";
          site_is_reader = site_is_reader || m == g.input_site;
        }
      if (g.applicable) { EXPECT_TRUE(site_is_reader) << g.input_site; }
    }
    // Every linear of the layer is some group's reader (o_proj: only under MHA).
    std::string p = "model.layers.";
    p += std::to_string(layer);
    p += ".";
    for (const std::string& t : names) {
      if (t.rfind(p, 0) != 0 || t.size() < 7 || t.compare(t.size() - 7, 7, ".weight") != 0) continue;
      if (src->load(t).shape.size() != 2) continue;
      const std::string m = t.substr(0, t.size() - 7);
      const bool o_gqa = m == p + "self_attn.o_proj" && c.num_kv_heads != c.num_heads;
      EXPECT_EQ(read.count(m) == 1, !o_gqa) << m;
    }
  }
}

TEST_P(LayerGroups, MhaMakesValueToOutputApplicable) {
  const model::ModelConfig c = fixture_config(GetParam(), true);
  for (const ScalingGroup& g : layer_scaling_groups(c, 0)) {
    EXPECT_TRUE(g.applicable) << g.kind;
    if (g.kind == "attn_out") { EXPECT_EQ(g.channels, c.num_heads * c.head_dim); }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LayerGroups, ::testing::ValuesIn(kArchs));

nlohmann::json entry(const char* prev, std::vector<std::string> layers, const char* inspect = nullptr) {
  nlohmann::json e = {{"prev_op", prev}, {"layers", layers}, {"inp", layers.front()}};
  if (inspect) e["module2inspect"] = inspect;
  return e;
}

TEST(LayerGroupsQuark, ScalingLayersEqualQuarksMaps) {
  // amd-quark algo_configs.py AWQ_MAP / SQ_MAP entries (MHA, where Quark also lists v -> o).
  const nlohmann::json llama = {
      entry("input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, "self_attn"),
      entry("self_attn.v_proj", {"self_attn.o_proj"}),
      entry("post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp"),
      entry("mlp.up_proj", {"mlp.down_proj"})};
  EXPECT_EQ(quark_scaling_layers(fixture_config("llama", true)), llama);
  EXPECT_EQ(quark_scaling_layers(fixture_config("qwen2", true)), llama);
  nlohmann::json gemma2 = llama;
  gemma2[2]["prev_op"] = "pre_feedforward_layernorm";
  EXPECT_EQ(quark_scaling_layers(fixture_config("gemma2", true)), gemma2);
  EXPECT_EQ(quark_scaling_layers(fixture_config("gemma3_text", true)), gemma2);
  const nlohmann::json phi3 = {entry("input_layernorm", {"self_attn.qkv_proj"}, "self_attn"),
                               entry("self_attn.qkv_proj", {"self_attn.o_proj"}),
                               entry("post_attention_layernorm", {"mlp.gate_up_proj"}, "mlp"),
                               entry("mlp.gate_up_proj", {"mlp.down_proj"})};
  EXPECT_EQ(quark_scaling_layers(fixture_config("phi3", true)), phi3);
  // GQA: no v -> o entry (AutoAWQ / llm-compressor skip it).
  nlohmann::json llama_gqa = llama;
  llama_gqa.erase(1);
  EXPECT_EQ(quark_scaling_layers(fixture_config("llama")), llama_gqa);
}

TEST(LayerGroupsQuark, MoeGroupsCoverExpertsRouterAndSharedExpert) {
  const model::ModelConfig c = fixture_config("qwen2_moe");
  const std::vector<ScalingGroup> g = layer_scaling_groups(c, 0);  // sparse layer
  ASSERT_EQ(g.size(), 2u + 1u + static_cast<size_t>(c.num_experts) + 1u);
  const ScalingGroup& in = g[2];
  EXPECT_EQ(in.kind, "mlp_in");
  EXPECT_EQ(in.linears.size(), static_cast<size_t>(2 * c.num_experts + 2));
  EXPECT_EQ(in.fold_only, (std::vector<std::string>{"model.layers.0.mlp.gate", "model.layers.0.mlp.shared_expert_gate"}));
  EXPECT_EQ(in.input_site, "model.layers.0.mlp.gate");
  EXPECT_EQ(in.inspect, "model.layers.0.mlp");
  EXPECT_EQ(g.back().kind, "shared_out");
  EXPECT_EQ(g.back().linears.front(), "model.layers.0.mlp.shared_expert.down_proj");
  // qwen2_moe layer 1 is in mlp_only_layers: a dense MLP.
  const std::vector<ScalingGroup> dense = layer_scaling_groups(c, 1);
  ASSERT_EQ(dense.size(), 4u);
  EXPECT_EQ(dense[2].linears, (std::vector<std::string>{"model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj"}));

  const std::vector<ScalingGroup> mx = layer_scaling_groups(fixture_config("mixtral"), 1);
  EXPECT_EQ(mx[2].linears.front(), "model.layers.1.block_sparse_moe.experts.0.w1");
  EXPECT_EQ(mx[2].fold_only, (std::vector<std::string>{"model.layers.1.block_sparse_moe.gate"}));
  EXPECT_EQ(mx[3].prev_op, "model.layers.1.block_sparse_moe.experts.0.w3");
  EXPECT_EQ(mx[3].linears, (std::vector<std::string>{"model.layers.1.block_sparse_moe.experts.0.w2"}));
}

TEST(LayerGroupsQuark, Errors) {
  model::ModelConfig c = fixture_config("llama");
  EXPECT_EQ(test::catch_error([&] { layer_scaling_groups(c, 2); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(test::catch_error([&] { layer_scaling_groups(c, -1); }).kind(), ErrorKind::kUsage);
  c.model_type = "gpt2";
  EXPECT_EQ(test::catch_error([&] { layer_scaling_groups(c, 0); }).kind(), ErrorKind::kUnsupported);
}

}  // namespace
}  // namespace qloom::quant
