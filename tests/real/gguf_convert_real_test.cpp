// The real-model check of `qloom convert` (SmolLM2-135M-Instruct Q4_1), in
// the `real` tier: QLOOM_REAL_GGUF is the GGUF scripts/setup fetched. Every tensor's bf16 bytes equal the gguf package's dequantization
// (un-permuted, rounded to bf16: sha256 in tests/data/gguf_convert/smollm2/
// tensors.json), config and tokenizer_config equal transformers', and the
// rebuilt tokenizer encodes all of wiki.test.raw to transformers' ids.
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/text/tokenizer.h"
#include "qloom/io/gguf.h"
#include "qloom/io/weight_index.h"
#include "qloom/model/gguf_convert.h"
#include "real/real_model.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(QLOOM_TEST_DATA_DIR) / "gguf_convert" / "smollm2";

std::string sha256(const void* p, size_t n) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(p, n, d, &len, EVP_sha256(), nullptr);
  static const char* k = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) s += k[d[i] >> 4], s += k[d[i] & 15];
  return s;
}

json read_json(const fs::path& p) { return json::parse(test::read_file(p)); }

class RealGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    gguf_ = test::real_gguf();
    ASSERT_TRUE(fs::exists(gguf_)) << gguf_;
  }
  fs::path gguf_;
};

TEST_F(RealGguf, ConvertMatchesTheGgufPackageAndTransformers) {
  test::TempDir t("gguf-real");
  const auto s = model::convert_gguf(gguf_, t / "out");
  const json want = read_json(kGolden / "tensors.json");
  const auto w = io::WeightIndex::open(t / "out");
  ASSERT_EQ(w.num_tensors(), want.size());
  ASSERT_EQ(s.tensors, want.size());
  size_t equal = 0;
  for (const auto& [name, g] : want.items()) {
    const auto v = w.view(name);
    EXPECT_EQ(v.shape(), g["shape"].get<std::vector<uint64_t>>()) << name;
    const bool same = sha256(v.data.data(), v.data.size()) == g["sha256"].get<std::string>();
    EXPECT_TRUE(same) << name << " (" << g["type"] << ")";
    equal += same;
  }
  std::printf("[ real ] %zu/%zu tensors equal the gguf package's dequantization in bf16\n", equal, want.size());
  json cfg = read_json(t / "out/config.json"), golden = read_json(kGolden / "config.json");
  golden.erase("transformers_version");
  EXPECT_EQ(cfg, golden);
  EXPECT_EQ(read_json(t / "out/tokenizer_config.json"), read_json(kGolden / "tokenizer_config.json"));
  EXPECT_EQ(test::read_file(t / "out/chat_template.jinja"), test::read_file(kGolden / "chat_template.jinja"));

  const json ids = read_json(kGolden / "wiki_ids.json");
  const auto tok = text::Tokenizer::load(t / "out");
  const std::string text = test::read_file(fs::path(QLOOM_SOURCE_DIR) / "data/datasets/wikitext-2-raw/wiki.test.raw");
  ASSERT_EQ(sha256(text.data(), text.size()), ids["file_sha256"].get<std::string>());
  const std::vector<int32_t> got = tok.encode(text);
  const auto first = ids["first_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + std::min(got.size(), first.size())), first);
  EXPECT_EQ(got.size(), ids["count"].get<size_t>());
  EXPECT_EQ(sha256(got.data(), got.size() * sizeof(int32_t)), ids["ids_sha256"].get<std::string>());
  std::printf("[ real ] wiki.test.raw: %zu ids (transformers %zu)\n", got.size(), ids["count"].get<size_t>());
}

// What the header says (io/gguf reader on the real file).
TEST_F(RealGguf, SmolLM2Q4_1Header) {
  const io::GgufFile f = io::GgufFile::open(gguf_);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 30u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 576u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f.tensors().size(), 272u);
  const io::GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, io::GgmlType::kQ4_1);
  EXPECT_EQ(q->shape(), (std::vector<uint64_t>{576, 576}));
}

}  // namespace
}  // namespace qloom
