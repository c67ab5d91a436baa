// SmolLM2-135M in qloom's engine against transformers (float32 compute on the
// same bf16 weights): logits, wikitext-2 perplexity (Quark protocol) and the
// tokenizer's ids of the whole joined wikitext-2 test text.
//
// Tolerances: logits max |diff| <= 1e-4 * max(1, max |ref|) — both sides add
// the same fp32 products in different orders over 30 layers, which moves a
// logit by ~1e-6 of its scale (the toy fixtures measure <= 1e-6); a wrong rope
// theta, norm eps or tied head moves it by > 1e-1. ppl relative error <= 1e-4.
#include <gtest/gtest.h>

#include <openssl/sha.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "qloom/engine/model.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/datasets.h"
#include "qloom/io/safetensors_reader.h"
#include "real/real_model.h"

namespace qloom {
namespace {

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, md);
  std::string hex;
  char buf[3];
  for (unsigned char c : md) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    hex += buf;
  }
  return hex;
}

TEST(RealSmolLM2, LogitsMatchTransformers) {
  io::SafetensorsFile f = io::SafetensorsFile::open(test::real_data_dir() / "smollm2_logits.safetensors");
  io::TensorView ids_v = f.view("input_ids"), ref_v = f.view("logits");
  std::vector<int32_t> ids(ids_v.numel());
  std::memcpy(ids.data(), ids_v.data.data(), ids_v.nbytes());
  std::vector<float> ref(ref_v.numel());
  std::memcpy(ref.data(), ref_v.data.data(), ref_v.nbytes());
  const auto rows = test::real_goldens()["logit_rows"].get<std::vector<int>>();

  engine::LoadOptions opt;
  opt.threads = 2;
  auto model = engine::Model::load(test::real_model_dir(), opt);
  auto cache = model->new_cache(static_cast<int64_t>(ids.size()));
  const std::vector<float> got = model->forward(ids, *cache);
  const size_t vocab = static_cast<size_t>(model->config().vocab_size);
  ASSERT_EQ(got.size(), ids.size() * vocab);
  ASSERT_EQ(ref.size(), rows.size() * vocab);
  double max_abs = 0, scale = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t v = 0; v < vocab; ++v) {
      const double a = got[static_cast<size_t>(rows[r]) * vocab + v], b = ref[r * vocab + v];
      max_abs = std::max(max_abs, std::fabs(a - b));
      scale = std::max(scale, std::fabs(b));
    }
  const double rel = max_abs / std::max(1.0, scale);
  std::printf("[ real ] logits rows %zu: max_abs %.3e scale %.3f rel %.3e\n", rows.size(), max_abs, scale, rel);
  EXPECT_LE(rel, 1e-4);
}

TEST(RealSmolLM2, TokenizerMatchesHfOnAllOfWikitext) {
  const auto golden = test::real_goldens()["tokenizer"];
  const auto tok = text::Tokenizer::load(test::real_model_dir());
  const eval::TextDataset ds = eval::load_text_dataset("wikitext2");
  ASSERT_EQ(ds.text.size(), golden["text_bytes"].get<size_t>());
  const std::vector<int32_t> ids = tok.encode(ds.text);
  const auto first = golden["first_ids"].get<std::vector<int32_t>>();
  ASSERT_GE(ids.size(), first.size());
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<long>(first.size())), first);
  EXPECT_EQ(ids.size(), golden["count"].get<size_t>());
  EXPECT_EQ(sha256_hex(ids.data(), ids.size() * sizeof(int32_t)), golden["sha256_i32le"].get<std::string>());
}

TEST(RealSmolLM2, WikitextPerplexityMatchesTransformers) {
  const auto golden = test::real_goldens()["ppl_quark"];
  test::TempDir tmp("real-ppl");
  const auto limit = golden["limit"].get<int>();
  auto j = test::run_qloom_json({"eval", test::real_model_dir().string(), "--task", "ppl", "--dataset",
                                 "wikitext2", "--limit", std::to_string(limit), "--threads", "2"},
                                tmp, "ppl");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["seq_len"].get<int>(), golden["seq_len"].get<int>());
  EXPECT_EQ(j["tokens_scored"].get<int64_t>(), golden["at_limit"]["tokens_scored"].get<int64_t>());
  const double got = j["ppl"].get<double>(), want = golden["at_limit"]["ppl"].get<double>();
  std::printf("[ real ] wikitext-2 ppl (first %d windows): qloom %.8f transformers %.8f rel %.2e\n", limit, got,
              want, std::fabs(got - want) / want);
  EXPECT_LE(std::fabs(got - want) / want, 1e-4);
}

}  // namespace
}  // namespace qloom
