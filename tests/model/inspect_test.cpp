#include "qloom/model/inspect.h"

#include <gtest/gtest.h>

#include "qloom/io/model_dir.h"

namespace qloom::model {
namespace {

TEST(Inspect, DemoModelFacts) {
  const auto dir = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR);
  const ModelSummary s = summarize_model(dir);
  EXPECT_EQ(s.model_type, "llama");
  EXPECT_EQ(s.architectures, std::vector<std::string>{"LlamaForCausalLM"});
  EXPECT_EQ(s.num_hidden_layers, 5);
  EXPECT_EQ(s.hidden_size, 64);
  EXPECT_EQ(s.parameters, 260032u);
  EXPECT_EQ(s.parameters_by_dtype.at("BF16"), 260032u);
  EXPECT_EQ(s.tensors, 47u);
  EXPECT_EQ(s.weights_bytes, 260032u * 2);
  EXPECT_EQ(s.shards, std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(s.tie_word_embeddings);
  // Every top-level file: 524960 (weights file) + the config and tokenizer files.
  EXPECT_EQ(s.size_bytes, 664u + 110u + 524960u + 71u + 15417u + 7522u + 293u);
  EXPECT_EQ(s.tokenizer_files.size(), 4u);

  const auto j = summary_to_json(s);
  for (const char* key : {"model_type", "architectures", "num_hidden_layers", "hidden_size",
                          "parameters", "parameters_by_dtype", "tensors", "size_bytes", "shards",
                          "tokenizer_files"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["parameters"].is_number_integer());

  const std::string text = format_summary(s);
  EXPECT_NE(text.find("260,032"), std::string::npos) << text;
  EXPECT_NE(text.find("LlamaForCausalLM"), std::string::npos) << text;
}

}  // namespace
}  // namespace qloom::model
