// Partitions of the search on the demo model (stories260K, llama: 5 layers,
// q/o [64,64], k/v [32,64], gate/up [172,64], down [64,172], tied lm_head):
// names, module lists, parameter counts, granularity, exclusions.
#include <gtest/gtest.h>

#include "qloom/io/model_dir.h"
#include "qloom/perf/partitions.h"
#include "support/expect_error.h"

namespace qloom::perf {
namespace {

using test::catch_error;

const io::ModelDir& demo() {
  static const io::ModelDir d = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR, true);
  return d;
}

TEST(SearchPartitions, ClassifiesModuleNames) {
  EXPECT_EQ(classify_linear("model.layers.0.self_attn.q_proj"), "self_attn");
  EXPECT_EQ(classify_linear("model.layers.0.self_attn.qkv_proj"), "self_attn");
  EXPECT_EQ(classify_linear("model.layers.2.mlp.down_proj"), "dense_mlp");
  EXPECT_EQ(classify_linear("model.layers.2.mlp.gate_up_proj"), "dense_mlp");
  EXPECT_EQ(classify_linear("model.layers.1.mlp.experts.3.gate_proj"), "routed_moe");
  EXPECT_EQ(classify_linear("model.layers.1.block_sparse_moe.experts.0.w1"), "routed_moe");
  EXPECT_EQ(classify_linear("model.layers.1.mlp.shared_expert.up_proj"), "shared_expert");
  EXPECT_EQ(classify_linear("model.layers.1.mlp.gate"), "");                // router
  EXPECT_EQ(classify_linear("model.layers.1.block_sparse_moe.gate"), "");   // router
  EXPECT_EQ(classify_linear("model.layers.1.mlp.shared_expert_gate"), "");  // shared-expert gate
  EXPECT_EQ(classify_linear("lm_head"), "");
  EXPECT_EQ(layer_of("model.layers.12.mlp.up_proj"), 12);
  EXPECT_EQ(layer_of("model.players.1.mlp"), -1);
  EXPECT_EQ(layer_of("model.layers.x.mlp"), -1);
  EXPECT_EQ(layer_of("lm_head"), -1);
}

TEST(SearchPartitions, DemoModelAtPartitionGranularity) {
  const PartitionPlan plan = plan_partitions(demo(), {});
  EXPECT_EQ(plan.partitions, (std::vector<std::string>{"self_attn", "dense_mlp"}));
  ASSERT_EQ(plan.units.size(), 2u);
  const SearchUnit& attn = plan.units[0];
  const SearchUnit& mlp = plan.units[1];
  EXPECT_EQ(attn.name, "self_attn");
  EXPECT_EQ(attn.layer, -1);
  EXPECT_EQ(attn.modules.size(), 20u);
  EXPECT_EQ(attn.params, 5u * (64 * 64 + 32 * 64 + 32 * 64 + 64 * 64));  // 61440
  EXPECT_EQ(mlp.name, "dense_mlp");
  EXPECT_EQ(mlp.modules.size(), 15u);
  EXPECT_EQ(mlp.params, 5u * 3 * 172 * 64);  // 165120
  EXPECT_EQ(attn.modules.front().module, "model.layers.0.self_attn.k_proj");  // (layer, name) order
  EXPECT_EQ(attn.modules.back().module, "model.layers.4.self_attn.v_proj");
  EXPECT_EQ(mlp.modules[0].rows, 64u);  // down_proj [64, 172]
  EXPECT_EQ(mlp.modules[0].cols, 172u);
  EXPECT_EQ(plan.partition_params("self_attn"), 61440u);
  EXPECT_EQ(plan.unit_params(), 61440u + 165120u);
  EXPECT_TRUE(plan.native.empty());  // tied lm_head: no separate linear
  EXPECT_EQ(plan.exclude_patterns, (std::vector<std::string>{"lm_head"}));
  const ModelGeometry& g = plan.geometry;
  EXPECT_EQ(g.model_dtype, DType::kBF16);
  EXPECT_EQ(g.num_layers, 5);
  EXPECT_EQ(g.num_kv_heads, 4);
  EXPECT_EQ(g.head_dim, 8);
  EXPECT_TRUE(g.tie_word_embeddings);
  // Outside the units: the tied embedding (read whole as lm_head) and the norms, bf16.
  EXPECT_EQ(g.fixed_bits_per_token, (512u * 64 + 5 * 2 * 64 + 64) * 16);
  EXPECT_EQ(g.kv_layer_patterns, (std::vector<std::string>{"*k_proj", "*v_proj"}));
  EXPECT_EQ(g.total_params, 512u * 64 + 5 * 2 * 64 + 64 + 61440 + 165120);
  const auto j = to_json(plan);
  EXPECT_EQ(j["partitions"][0]["params"], 61440);
  EXPECT_EQ(j["units"][1]["modules"].size(), 15u);
}

TEST(SearchPartitions, DemoModelAtLayerGranularity) {
  PartitionRequest req;
  req.granularity = Granularity::kLayer;
  const PartitionPlan plan = plan_partitions(demo(), req);
  ASSERT_EQ(plan.units.size(), 10u);
  EXPECT_EQ(plan.units[0].name, "layers.0.self_attn");
  EXPECT_EQ(plan.units[1].name, "layers.0.dense_mlp");
  EXPECT_EQ(plan.units[9].name, "layers.4.dense_mlp");
  EXPECT_EQ(plan.units[3].layer, 1);
  EXPECT_EQ(plan.units[3].modules.size(), 3u);
  EXPECT_EQ(plan.units[2].params, 12288u);
  EXPECT_EQ(plan.units_of("dense_mlp").size(), 5u);
  EXPECT_EQ(plan.partition_params("dense_mlp"), 165120u);
  EXPECT_EQ(plan.find_unit("layers.4.self_attn")->modules[0].module, "model.layers.4.self_attn.k_proj");
  EXPECT_EQ(plan.find_unit("layers.5.self_attn"), nullptr);
}

TEST(SearchPartitions, ExcludeLayersPatterns) {
  PartitionRequest req;
  req.exclude_layers = {"*.layers.0.*", "*.down_proj", "*nothing_matches*"};
  const PartitionPlan plan = plan_partitions(demo(), req);
  EXPECT_EQ(plan.partition_params("self_attn"), 4u * 12288);
  EXPECT_EQ(plan.partition_params("dense_mlp"), 4u * 2 * 172 * 64);
  ASSERT_EQ(plan.native.size(), 4u + 3 + 4);  // layer 0's 7 linears, 4 more down_proj
  EXPECT_EQ(plan.native[0].reason, "excluded by '*.layers.0.*'");
  EXPECT_EQ(plan.native.back().module, "model.layers.4.mlp.down_proj");
  EXPECT_EQ(plan.native.back().reason, "excluded by '*.down_proj'");
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("--exclude-layers pattern '*nothing_matches*'"), std::string::npos)
      << plan.warnings[0];
  EXPECT_EQ(plan.exclude_patterns.front(), "lm_head");
  // Excluded linears are read at native bits every token.
  const PartitionPlan all = plan_partitions(demo(), {});
  EXPECT_EQ(plan.geometry.fixed_bits_per_token,
            all.geometry.fixed_bits_per_token + (12288 + 3 * 11008 + 4 * 11008) * 16u);
}

TEST(SearchPartitions, ExcludingEverythingIsAUsageError) {
  PartitionRequest req;
  req.exclude_layers = {"*"};
  const Error e = catch_error([&] { (void)plan_partitions(demo(), req); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--exclude-layers");
  EXPECT_EQ(catch_error([] { (void)parse_granularity("block"); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(parse_granularity("layer"), Granularity::kLayer);
  EXPECT_STREQ(granularity_name(Granularity::kPartition), "partition");
}

}  // namespace
}  // namespace qloom::perf
