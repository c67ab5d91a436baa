// `--dataset wikitext2` as qloom reads it, against HF: the "\n\n"-joined
// rows of the bundled wiki.test.raw (Quark's join of the datasets rows) and
// the ids of the whole joined text through the demo model's tokenizer equal,
// by sha256, what scripts/goldens/wikitext_ids.py gets from Python and
// transformers 5's AutoTokenizer (tests/data/eval/wikitext2_demo_ids.json).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "qloom/text/tokenizer.h"
#include "qloom/eval/datasets.h"
#include "support/sha256.h"
#include "support/temp_dir.h"

namespace qloom::eval {
namespace {

using test::sha256_hex;

nlohmann::json golden() {
  return nlohmann::json::parse(test::read_file(std::string(QLOOM_TEST_DATA_DIR) + "/eval/wikitext2_demo_ids.json"));
}

TEST(WikitextIds, JoinedTextMatchesTheDatasetsRows) {
  const nlohmann::json want = golden();
  const TextDataset ds = load_text_dataset("wikitext2");
  EXPECT_EQ(ds.text.size(), want["text_bytes"].get<size_t>());
  EXPECT_EQ(sha256_hex(ds.text.data(), ds.text.size()), want["text_sha256"].get<std::string>());
}

TEST(WikitextIds, WholeJoinedTextEncodesAsAutoTokenizer) {
  const nlohmann::json want = golden();
  const TextDataset ds = load_text_dataset("wikitext2");
  const text::Tokenizer tok = text::Tokenizer::load(QLOOM_DEMO_MODEL_DIR);
  const std::vector<int32_t> ids = tok.encode(ds.text, true);
  ASSERT_EQ(ids.size(), want["count"].get<size_t>());
  std::vector<unsigned char> bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<unsigned char>(static_cast<uint32_t>(id) >> (8 * k)));
  EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()), want["ids_sha256"].get<std::string>());
  const std::vector<int32_t> first(ids.begin(), ids.begin() + 16), last(ids.end() - 16, ids.end());
  EXPECT_EQ(nlohmann::json(first), want["first_ids"]);
  EXPECT_EQ(nlohmann::json(last), want["last_ids"]);
}

}  // namespace
}  // namespace qloom::eval
