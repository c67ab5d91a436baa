#include "qloom/model/decoder_layout.h"

#include <gtest/gtest.h>

#include "qloom/core/error.h"

namespace qloom::model {
namespace {

nlohmann::json demo_config() {
  return {{"model_type", "llama"},     {"hidden_size", 64},         {"intermediate_size", 172},
          {"num_hidden_layers", 5},    {"num_attention_heads", 8},  {"num_key_value_heads", 4},
          {"head_dim", 8},             {"vocab_size", 512},         {"tie_word_embeddings", true}};
}

TEST(DecoderLayout, DemoModelHasItsPublishedParameterCount) {
  const auto shape = decoder_shape_from_config(demo_config(), "config.json");
  EXPECT_EQ(decoder_parameter_count(shape), 260032u);  // stories260K model card
  const auto tensors = decoder_tensors(shape);
  EXPECT_EQ(tensors.size(), 1u + 5u * 9u + 1u);  // embed, 9 per layer, final norm; tied head
  EXPECT_EQ(tensors.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(tensors[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(tensors[3].shape, (std::vector<uint64_t>{32, 64}));  // k_proj: 4 kv heads x 8
}

TEST(DecoderLayout, Qwen2HasQkvBiasAndQwen3HasQkNorm) {
  auto cfg = demo_config();
  cfg["model_type"] = "qwen2";
  cfg["tie_word_embeddings"] = false;
  auto t2 = decoder_tensors(decoder_shape_from_config(cfg, "c"));
  EXPECT_EQ(t2.back().name, "lm_head.weight");
  EXPECT_EQ(t2[3].name, "model.layers.0.self_attn.q_proj.bias");
  cfg["model_type"] = "qwen3";
  auto t3 = decoder_tensors(decoder_shape_from_config(cfg, "c"));
  bool has_qnorm = false;
  for (const auto& t : t3) has_qnorm |= t.name == "model.layers.0.self_attn.q_norm.weight";
  EXPECT_TRUE(has_qnorm);
}

TEST(DecoderLayout, HeadDimDefaultsToHiddenOverHeads) {
  auto cfg = demo_config();
  cfg.erase("head_dim");
  EXPECT_EQ(decoder_shape_from_config(cfg, "c").head_dim, 8u);
  cfg["num_attention_heads"] = 7;
  cfg["num_key_value_heads"] = 7;
  EXPECT_THROW(decoder_shape_from_config(cfg, "c"), Error);
}

TEST(DecoderLayout, ErrorsNameTheField) {
  auto cfg = demo_config();
  cfg.erase("hidden_size");
  try {
    decoder_shape_from_config(cfg, "/m/config.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "/m/config.json");
    EXPECT_EQ(e.item(), "hidden_size");
  }
  cfg = demo_config();
  cfg["num_key_value_heads"] = 3;
  EXPECT_THROW(decoder_shape_from_config(cfg, "c"), Error);
  cfg = demo_config();
  cfg["model_type"] = "t5";
  try {
    decoder_shape_from_config(cfg, "c");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
}

}  // namespace
}  // namespace qloom::model
