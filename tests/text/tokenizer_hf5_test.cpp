// Checkpoints with a SentencePiece tokenizer.model: qloom tokenizes as
// transformers 5's AutoTokenizer (tokenizer_choice.h). Goldens written by
// scripts/goldens/tokenizer_hf5_goldens.py with transformers 5.25 under
// tests/data/tokenizers/stories260k_hf5/ (and hf5_rule.json).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "qloom/text/tokenizer.h"
#include "qloom/text/tokenizer_choice.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "text/golden_check.h"

namespace qloom::text {
namespace {

const fs::path kHf5 = fs::path(QLOOM_TEST_DATA_DIR) / "tokenizers" / "stories260k_hf5";
const fs::path kDemoDir = QLOOM_DEMO_MODEL_DIR;

// A model directory holding `files` of the demo model and `config` as tokenizer_config.json.
test::TempDir demo_subset(const std::vector<std::string>& files, const json& config) {
  test::TempDir dir("tok-hf5");
  for (const auto& f : files) dir.write(f, test::read_file(kDemoDir / f));
  dir.write("tokenizer_config.json", config.dump());
  return dir;
}

void expect_goldens(const Tokenizer& tok, const fs::path& goldens, const std::string& what) {
  const GoldenResult r = check_goldens(tok, goldens);
  std::printf("[ goldens  ] %s: %d/%d cases match\n", what.c_str(), r.passed, r.cases);
  EXPECT_GT(r.cases, 80) << what;
  EXPECT_EQ(r.passed, r.cases) << what << ": first mismatch: " << r.first_mismatch;
}

TEST(TokenizerHf5, DemoModelEncodesAsAutoTokenizer) {
  const Tokenizer tok = Tokenizer::load(kDemoDir);
  expect_goldens(tok, kHf5 / "goldens.json", "demo model (tokenizer.json + tokenizer.model)");
  EXPECT_EQ(tok.choice().kind, TokenizerKind::kLlamaPipeline);
  EXPECT_EQ(tok.choice().file.filename(), "tokenizer.json");
  EXPECT_TRUE(tok.choice().legacy);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.vocab_size(), 512);
  const std::string d = tok.describe();
  EXPECT_NE(d.find("transformers 5 LlamaTokenizer over tokenizer.json's vocabulary"), std::string::npos) << d;
  EXPECT_NE(d.find("Metaspace prepend always"), std::string::npos) << d;
  EXPECT_NE(d.find("tokenizer.json's encoding differs, its normalizer (Sequence: Strip, Replace) not applied"),
            std::string::npos)
      << d;
}

TEST(TokenizerHf5, TokenizerModelAloneEncodesTheSame) {
  const auto dir = demo_subset({"tokenizer.model"}, read_json(kDemoDir / "tokenizer_config.json"));
  const Tokenizer tok = Tokenizer::load(dir.path());
  expect_goldens(tok, kHf5 / "goldens.json", "demo tokenizer.model alone");
  EXPECT_EQ(tok.choice().kind, TokenizerKind::kLlamaPipeline);
  EXPECT_EQ(tok.choice().file.filename(), "tokenizer.model");
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.describe().find("differs"), std::string::npos) << tok.describe();
}

// legacy false, add_prefix_space false, tokenizer.model alone with and
// without add_bos_token / add_eos_token.
TEST(TokenizerHf5, ConfigVariantsEncodeAsAutoTokenizer) {
  int variants = 0;
  for (const auto& entry : fs::directory_iterator(kHf5)) {
    if (!entry.is_directory()) continue;
    const json cfg = read_json(entry.path() / "tokenizer_config.json");
    const auto dir = demo_subset(cfg["_files"].get<std::vector<std::string>>(), cfg);
    const Tokenizer tok = Tokenizer::load(dir.path());
    EXPECT_EQ(tok.choice().kind, TokenizerKind::kLlamaPipeline);
    expect_goldens(tok, entry.path() / "goldens.json", entry.path().filename().string());
    ++variants;
  }
  EXPECT_EQ(variants, 4);
}

// The goldens record where sentencepiece itself parts from transformers 5
// (repeated, leading and trailing spaces), and qloom's sentencepiece path
// still gives sentencepiece's ids.
TEST(TokenizerHf5, SentencePieceDiffersWhereTheGoldensSay) {
  json cfg = read_json(kDemoDir / "tokenizer_config.json");
  cfg.erase("tokenizer_class");
  const auto dir = demo_subset({"tokenizer.model"}, cfg);
  const Tokenizer sp = Tokenizer::load(dir.path());
  ASSERT_EQ(sp.choice().kind, TokenizerKind::kSentencePiece);
  int differ = 0;
  for (const json& c : read_json(kHf5 / "goldens.json")) {
    if (!c.contains("text")) continue;
    const auto text = c["text"].get<std::string>();
    EXPECT_EQ(sp.encode(text, false), c["spm_plain"].get<std::vector<int32_t>>()) << escape(text);
    differ += c["spm_plain"] != c["ids_plain"];
  }
  EXPECT_GE(differ, 30);
}

TEST(TokenizerHf5, WholeWikitextAsAutoTokenizer) {
  const fs::path file = fs::path(QLOOM_SOURCE_DIR) / "data" / "datasets" / "wikitext-2-raw" / "wiki.test.raw";
  const json want = read_json(kHf5 / "wikitext.json");
  const auto ids = Tokenizer::load(kDemoDir).encode(test::read_file(file), false);
  EXPECT_EQ(ids.size(), want["count"].get<size_t>());
  EXPECT_EQ(ids_sha256(ids), want["sha256"].get<std::string>());
}

TEST(TokenizerHf5, OverriddenModelTypesAreTransformers5s) {
  const json rule = read_json(fs::path(QLOOM_TEST_DATA_DIR) / "tokenizers" / "hf5_rule.json");
  std::vector<std::string> mine;
  for (auto t : llama_overridden_model_types()) mine.emplace_back(t);
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  EXPECT_EQ(mine, rule["llama_class_overridden_for_model_types"].get<std::vector<std::string>>());
}

TokenizerChoice choice_of(const test::TempDir& dir) { return Tokenizer::load(dir.path()).choice(); }

TEST(TokenizerChoiceRule, WhereTransformers5KeepsTokenizerJson) {
  const json cfg = read_json(kDemoDir / "tokenizer_config.json");
  const std::vector<std::string> both = {"tokenizer.json", "tokenizer.model"};
  // No tokenizer.model: tokenizer.json as written, whatever the class.
  EXPECT_EQ(choice_of(demo_subset({"tokenizer.json"}, cfg)).kind, TokenizerKind::kTokenizerJson);
  // A model type whose registered tokenizer wins over the hub's LlamaTokenizer.
  auto mistral = demo_subset(both, cfg);
  mistral.write("config.json", R"({"model_type": "mistral"})");
  const TokenizerChoice m = choice_of(mistral);
  EXPECT_EQ(m.kind, TokenizerKind::kTokenizerJson);
  EXPECT_NE(m.why.find("model_type mistral"), std::string::npos) << m.why;
  // No class at all: TokenizersBackend, tokenizer.json as written / sentencepiece.
  json no_class = cfg;
  no_class.erase("tokenizer_class");
  EXPECT_EQ(choice_of(demo_subset(both, no_class)).kind, TokenizerKind::kTokenizerJson);
  EXPECT_EQ(choice_of(demo_subset({"tokenizer.model"}, no_class)).kind, TokenizerKind::kSentencePiece);
  // Remote code, and another class.
  json remote = cfg;
  remote["auto_map"] = {{"AutoTokenizer", {"x.Tok", nullptr}}};
  EXPECT_EQ(choice_of(demo_subset(both, remote)).kind, TokenizerKind::kTokenizerJson);
  json gemma = cfg;
  gemma["tokenizer_class"] = "GemmaTokenizerFast";
  EXPECT_EQ(choice_of(demo_subset(both, gemma)).hf_class, "GemmaTokenizer");
  EXPECT_EQ(choice_of(demo_subset(both, gemma)).kind, TokenizerKind::kTokenizerJson);
}

TEST(TokenizerChoiceRule, ByteLevelTokenizerJsonStaysAsWritten) {
  json tj = read_json(kDemoDir / "tokenizer.json");
  tj["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  auto dir = demo_subset({"tokenizer.model"}, read_json(kDemoDir / "tokenizer_config.json"));
  dir.write("tokenizer.json", tj.dump());
  const TokenizerChoice c = choice_of(dir);
  EXPECT_EQ(c.kind, TokenizerKind::kTokenizerJson);
  EXPECT_NE(c.why.find("ByteLevel"), std::string::npos) << c.why;
}

TEST(TokenizerChoiceRule, ClassFromConfigJsonAndFastSuffix) {
  json cfg = read_json(kDemoDir / "tokenizer_config.json");
  cfg.erase("tokenizer_class");
  auto dir = demo_subset({"tokenizer.json", "tokenizer.model"}, cfg);
  dir.write("config.json", R"({"model_type": "llama", "tokenizer_class": "LlamaTokenizerFast"})");
  const TokenizerChoice c = choice_of(dir);
  EXPECT_EQ(c.kind, TokenizerKind::kLlamaPipeline);
  EXPECT_EQ(c.hf_class, "LlamaTokenizer");
}

TEST(TokenizerChoiceRule, MistypedOrBrokenFilesNameTheFile) {
  json cfg = read_json(kDemoDir / "tokenizer_config.json");
  cfg["legacy"] = "yes";
  Error e = test::catch_error([&] { Tokenizer::load(demo_subset({"tokenizer.model"}, cfg).path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.file().find("tokenizer_config.json"), std::string::npos) << e.file();
  EXPECT_EQ(e.item(), "legacy");

  json tj = read_json(kDemoDir / "tokenizer.json");
  tj["model"]["type"] = "Unigram";
  auto dir = demo_subset({"tokenizer.model"}, read_json(kDemoDir / "tokenizer_config.json"));
  dir.write("tokenizer.json", tj.dump());
  e = test::catch_error([&] { Tokenizer::load(dir.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.file().find("tokenizer.json"), std::string::npos) << e.file();
  EXPECT_EQ(e.item(), "model.type");

  test::TempDir bad("tok-hf5-bad");
  bad.write("tokenizer.model", "not a sentencepiece model");
  bad.write("tokenizer_config.json", read_json(kDemoDir / "tokenizer_config.json").dump());
  e = test::catch_error([&] { Tokenizer::load(bad.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.file().find("tokenizer.model"), std::string::npos) << e.file();

  cfg = read_json(kDemoDir / "tokenizer_config.json");
  cfg["added_tokens_decoder"] = {{"x", {{"content", "<t>"}}}};
  e = test::catch_error([&] { Tokenizer::load(demo_subset({"tokenizer.model"}, cfg).path()); });
  EXPECT_EQ(e.item(), "added_tokens_decoder.x");
}

}  // namespace
}  // namespace qloom::text
