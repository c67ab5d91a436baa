// Tests for ModelDir: config parsing, file classification, lazy weights and
// the errors for directories that are not HuggingFace models.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/safetensors_writer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::Error;
using qloom::ErrorKind;
using namespace qloom::io;
using qloom::test::catch_error;
using qloom::test::TempDir;

std::vector<std::string> names(const std::vector<fs::path>& v) {
  std::vector<std::string> out;
  for (const auto& p : v) out.push_back(p.string());
  return out;
}

using Names = std::vector<std::string>;

TEST(ModelDir, DemoModel) {
  const ModelDir m = ModelDir::open(QLOOM_DEMO_MODEL_DIR);
  EXPECT_EQ(m.path(), fs::path(QLOOM_DEMO_MODEL_DIR));
  EXPECT_EQ(m.model_type(), "llama");
  EXPECT_EQ(m.architectures(), Names{"LlamaForCausalLM"});
  EXPECT_EQ(m.config_int("hidden_size"), 64);
  EXPECT_EQ(m.config_int("num_hidden_layers"), 5);
  EXPECT_EQ(m.config_int("vocab_size"), 512);
  EXPECT_EQ(m.config_int("rms_norm_eps"), std::nullopt);      // a float
  EXPECT_EQ(m.config_int("tie_word_embeddings"), std::nullopt);  // a bool
  EXPECT_EQ(m.config_int("no_such_key"), std::nullopt);
  EXPECT_TRUE(m.config().at("tie_word_embeddings").get<bool>());
  ASSERT_TRUE(m.generation_config().has_value());
  EXPECT_TRUE(m.generation_config()->is_object());

  EXPECT_EQ(names(m.weight_files()), Names{"model.safetensors"});
  EXPECT_EQ(names(m.tokenizer_files()),
            (Names{"special_tokens_map.json", "tokenizer.json", "tokenizer.model",
                   "tokenizer_config.json"}));
  EXPECT_TRUE(m.pickle_weight_files().empty());
  EXPECT_TRUE(m.other_weight_files().empty());
  EXPECT_TRUE(m.other_files().empty());
  EXPECT_EQ(names(m.aux_files()),
            (Names{"config.json", "generation_config.json", "special_tokens_map.json",
                   "tokenizer.json", "tokenizer.model", "tokenizer_config.json"}));

  EXPECT_FALSE(m.weights_opened());  // config-only until asked
  EXPECT_EQ(m.weights().num_tensors(), 47u);
  EXPECT_TRUE(m.weights_opened());
  EXPECT_EQ(&m.weights(), &m.weights());

  const ModelDir eager = ModelDir::open(QLOOM_DEMO_MODEL_DIR, /*open_weights=*/true);
  EXPECT_TRUE(eager.weights_opened());
}

TEST(ModelDir, ClassifiesTopLevelFiles) {
  TempDir d("modeldir");
  d.write("config.json", R"({"model_type":"gpt2"})");
  for (const char* f : {"README.md", "LICENSE", ".gitattributes", "vocab.json", "merges.txt",
                        "chat_template.jinja", "pytorch_model.bin", "pytorch_model.bin.index.json",
                        "training_args.pt", "tf_model.h5", "flax_model.msgpack", "model.gguf",
                        "model.safetensors.index.json", "model-00001-of-00001.safetensors"})
    d.write(f, "x");
  d.mkdir("onnx");
  d.write("onnx/model.onnx", "x");
  fs::create_symlink("README.md", d / "README.link");
  fs::create_symlink("nowhere", d / "dangling");

  const ModelDir m = ModelDir::open(d.path());
  EXPECT_EQ(m.model_type(), "gpt2");
  EXPECT_FALSE(m.generation_config().has_value());
  EXPECT_EQ(names(m.weight_files()),
            (Names{"model-00001-of-00001.safetensors", "model.safetensors.index.json"}));
  EXPECT_EQ(names(m.pickle_weight_files()),
            (Names{"pytorch_model.bin", "pytorch_model.bin.index.json", "training_args.pt"}));
  EXPECT_EQ(names(m.other_weight_files()),
            (Names{"flax_model.msgpack", "model.gguf", "tf_model.h5"}));
  EXPECT_EQ(names(m.tokenizer_files()), (Names{"chat_template.jinja", "merges.txt", "vocab.json"}));
  EXPECT_EQ(names(m.other_files()), (Names{".gitattributes", "LICENSE", "README.link", "README.md"}));
  EXPECT_EQ(names(m.aux_files()),
            (Names{".gitattributes", "LICENSE", "README.link", "README.md", "chat_template.jinja",
                   "config.json", "merges.txt", "vocab.json"}));
}

TEST(ModelDir, ConfigOnlyDirectoryOpensButHasNoWeights) {
  TempDir d("modeldir");
  d.write("config.json", "{}");
  const ModelDir m = ModelDir::open(d.path());
  EXPECT_EQ(m.model_type(), "");
  EXPECT_TRUE(m.architectures().empty());
  Error e = catch_error([&] { m.weights(); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  e = catch_error([&] { m.weights(); });  // still failing, not cached as success
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_FALSE(m.weights_opened());
  e = catch_error([&] { ModelDir::open(d.path(), /*open_weights=*/true); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
}

TEST(ModelDir, TextConfigLookup) {
  TempDir d("modeldir");
  d.write("config.json", R"({"model_type":"llava","vocab_size":32064,
    "text_config":{"hidden_size":4096,"vocab_size":1,"num_hidden_layers":32,"rope":1.5},
    "neg":-3,"huge":18446744073709551615,"null_here":null})");
  const ModelDir m = ModelDir::open(d.path());
  EXPECT_EQ(m.config_int("hidden_size"), 4096);
  EXPECT_EQ(m.config_int("vocab_size"), 32064);  // top level wins
  EXPECT_EQ(m.config_int("num_hidden_layers"), 32);
  EXPECT_EQ(m.config_int("rope"), std::nullopt);
  EXPECT_EQ(m.config_int("neg"), -3);
  EXPECT_EQ(m.config_int("huge"), std::nullopt);
  ASSERT_NE(m.config_value("rope"), nullptr);
  EXPECT_EQ(*m.config_value("rope"), 1.5);
  EXPECT_EQ(m.config_value("absent"), nullptr);
}

TEST(ModelDir, MissingDirectory) {
  TempDir d("modeldir");
  const Error e = catch_error([&] { ModelDir::open(d / "nope"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), (d / "nope").string());
  EXPECT_FALSE(e.remedy().empty());
}

TEST(ModelDir, NotADirectory) {
  TempDir d("modeldir");
  const fs::path f = d.write("config.json", "{}");
  const Error e = catch_error([&] { ModelDir::open(f); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("not a directory"), std::string::npos);
  EXPECT_FALSE(e.remedy().empty());
}

TEST(ModelDir, UnreadableDirectory) {
  if (qloom::test::permissions_are_bypassed())
    GTEST_SKIP() << "running with permission checks bypassed (root/CAP_DAC_OVERRIDE): "
                    "chmod 000 does not make a directory unreadable";
  TempDir d("modeldir");
  const fs::path m = d.mkdir("m");
  d.write("m/config.json", "{}");
  ::chmod(m.c_str(), 0);
  const Error e = catch_error([&] { ModelDir::open(m); });
  ::chmod(m.c_str(), 0755);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), m.string());
  EXPECT_NE(e.message().find("permission denied"), std::string::npos) << e.what();
  EXPECT_NE(e.remedy().find("readable"), std::string::npos);
}

TEST(ModelDir, UnreadableConfig) {
  if (qloom::test::permissions_are_bypassed())
    GTEST_SKIP() << "running with permission checks bypassed (root/CAP_DAC_OVERRIDE)";
  TempDir d("modeldir");
  const fs::path c = d.write("config.json", "{}");
  ::chmod(c.c_str(), 0);
  const Error e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), c.string());
}

TEST(ModelDir, MissingConfig) {
  TempDir d("modeldir");
  d.write("model.safetensors", "");
  const Error e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.item(), "config.json");
  EXPECT_NE(e.message().find("not a HuggingFace model directory: config.json missing"),
            std::string::npos);
}

TEST(ModelDir, MalformedConfig) {
  TempDir d("modeldir");
  const fs::path c = d.write("config.json", "{\n  \"model_type\": \"llama\",\n  oops\n}");
  Error e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), c.string());
  EXPECT_NE(e.message().find("line 3"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("byte"), std::string::npos) << e.what();

  d.write("config.json", "[1]");
  e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_NE(e.message().find("must hold a JSON object"), std::string::npos) << e.what();

  d.write("config.json", "");
  e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);

  d.write("config.json", "{\"a\":\"\xff\"}");
  e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_NE(e.message().find("UTF-8"), std::string::npos) << e.what();
}

TEST(ModelDir, ConfigWithRepeatedKeysIsAcceptedLikePython) {
  TempDir d("modeldir");
  d.write("config.json", R"({"hidden_size": 1, "hidden_size": 2})");
  EXPECT_EQ(ModelDir::open(d.path()).config_int("hidden_size"), 2);
}

TEST(ModelDir, MalformedGenerationConfig) {
  TempDir d("modeldir");
  d.write("config.json", "{}");
  const fs::path g = d.write("generation_config.json", "{\"max_length\": }");
  const Error e = catch_error([&] { ModelDir::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), g.string());
}

TEST(ModelDir, MovedModelDirKeepsWeights) {
  ModelDir a = ModelDir::open(QLOOM_DEMO_MODEL_DIR);
  const WeightIndex* w = &a.weights();
  ModelDir b = std::move(a);
  EXPECT_EQ(&b.weights(), w);
}

}  // namespace
