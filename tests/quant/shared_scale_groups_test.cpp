#include "qloom/quant/shared_scale_groups.h"

#include <gtest/gtest.h>

namespace qloom::quant {
namespace {

TEST(SharedScaleGroups, QuarkTemplateDefaults) {
  const SharedScaleGroups nv = default_shared_scale_groups("nvfp4", "llama");
  ASSERT_EQ(nv.size(), 2u);
  EXPECT_EQ(nv[0], (std::vector<std::string>{"q_proj", "k_proj", "v_proj"}));
  EXPECT_EQ(nv[1], (std::vector<std::string>{"gate_proj", "up_proj"}));
  EXPECT_EQ(default_shared_scale_groups("fp4_block16_scale_e4m3", "qwen2"), nv);
  EXPECT_EQ(default_shared_scale_groups("nvfp4", "dbrx")[1], (std::vector<std::string>{"w1", "v1"}));
  EXPECT_EQ(default_shared_scale_groups("nvfp4", "minimax_m2")[1], (std::vector<std::string>{"w1", "w3"}));
  EXPECT_TRUE(default_shared_scale_groups("amdfp4_global16", "llama").empty());  // only nvfp4 shares
  EXPECT_TRUE(default_shared_scale_groups("fp8", "llama").empty());
}

TEST(SharedScaleGroups, SiblingsOfOneParentOnly) {
  const SharedScaleGroups g = default_shared_scale_groups("nvfp4", "llama");
  const std::vector<std::string> c = {
      "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
      "model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate_proj",    "model.layers.0.mlp.up_proj",
      "model.layers.0.mlp.down_proj",    "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj"};
  EXPECT_EQ(shared_scale_members("model.layers.0.self_attn.k_proj", c, g),
            (std::vector<std::string>{c[0], c[1], c[2]}));
  EXPECT_EQ(shared_scale_members("model.layers.0.mlp.up_proj", c, g), (std::vector<std::string>{c[4], c[5]}));
  EXPECT_EQ(shared_scale_members("model.layers.0.self_attn.o_proj", c, g), (std::vector<std::string>{c[3]}));
  EXPECT_EQ(shared_scale_members("model.layers.0.mlp.down_proj", c, g), (std::vector<std::string>{c[6]}));
  EXPECT_EQ(shared_scale_members("model.layers.1.self_attn.q_proj", c, g), (std::vector<std::string>{c[7], c[8]}));
  // A module that is not among the candidates (excluded) still gets itself.
  EXPECT_EQ(shared_scale_members("model.layers.2.self_attn.v_proj", c, g),
            (std::vector<std::string>{"model.layers.2.self_attn.v_proj"}));
  EXPECT_EQ(shared_scale_members("model.layers.0.self_attn.k_proj", c, {}),
            (std::vector<std::string>{"model.layers.0.self_attn.k_proj"}));
}

}  // namespace
}  // namespace qloom::quant
