// GGUF -> HuggingFace conversion against transformers' GGUF loader
// (goldens: scripts/goldens/gguf_convert_goldens.py -> tests/data/gguf_convert).
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/io/gguf.h"
#include "qloom/io/weight_index.h"
#include "qloom/model/gguf_config.h"
#include "qloom/model/gguf_convert.h"
#include "qloom/model/gguf_inspect.h"
#include "qloom/model/gguf_tensors.h"
#include "qloom/model/gguf_tokenizer.h"
#include "support/expect_error.h"
#include "support/gguf_fixture.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kData = fs::path(QLOOM_TEST_DATA_DIR) / "gguf_convert";
const fs::path kDemoGguf = kData / "stories260k.gguf";

json read_json(const fs::path& p) { return json::parse(test::read_file(p)); }

// transformers stamps its own version; qloom is not transformers.
json without_version(json j) {
  j.erase("transformers_version");
  return j;
}

std::vector<std::string> golden_archs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kData / "configs")) out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufConfig, MatchesTransformersForEveryGoldenArchitecture) {
  ASSERT_GE(golden_archs().size(), 6u);
  for (const auto& arch : golden_archs()) {
    SCOPED_TRACE(arch);
    const json g = read_json(kData / "configs" / (arch + ".json"));
    test::TempDir t("gguf-cfg");
    test::GgufFixture::from_config_golden(g).write(t / "m.gguf");
    const io::GgufFile f = io::GgufFile::open(t / "m.gguf");
    if (g.contains("refused_item")) {
      const Error e = test::catch_error([&] { model::read_gguf_model_info(f); });
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_EQ(e.item(), g["refused_item"].get<std::string>());
      continue;
    }
    EXPECT_EQ(model::read_gguf_model_info(f).config, without_version(g["config"]));
  }
}

TEST(GgufConfig, DemoAndRealConfigsMatchTransformers) {
  const io::GgufFile f = io::GgufFile::open(kDemoGguf);
  EXPECT_EQ(model::read_gguf_model_info(f).config, without_version(read_json(kData / "stories260k/config.json")));
  // f32 output says so.
  EXPECT_EQ(model::read_gguf_model_info(f, "float32").config["dtype"], "float32");
}

// A llama GGUF built from the llama golden's metadata, for breaking.
test::GgufFixture llama_fixture() {
  return test::GgufFixture::from_config_golden(read_json(kData / "configs/llama.json"));
}

Error config_error(const test::GgufFixture& fx) {
  test::TempDir t("gguf-bad");
  fx.write(t / "m.gguf");
  const io::GgufFile f = io::GgufFile::open(t / "m.gguf");
  return test::catch_error([&] { model::plan_gguf_tensors(f, model::read_gguf_model_info(f)); });
}

TEST(GgufConfig, EveryMathChangingKeyIsMappedOrRefused) {
  {
    auto fx = llama_fixture();
    fx.f32("llama.attention.clamp_kqv", 8.0f);  // a key qloom does not map
    const Error e = config_error(fx);
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(e.item(), "llama.attention.clamp_kqv");
  }
  {
    auto fx = llama_fixture();
    fx.erase("llama.block_count");
    const Error e = config_error(fx);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.item(), "llama.block_count");
  }
  {
    auto fx = llama_fixture();
    fx.str("llama.rope.scaling.type", "longrope");
    EXPECT_EQ(config_error(fx).item(), "llama.rope.scaling.type");
  }
  {
    auto fx = llama_fixture();
    fx.u32("llama.rope.dimension_count", 8);  // partial rotary: the heads are 16 wide
    fx.u32("llama.attention.key_length", 16);
    const Error e = config_error(fx);
    EXPECT_NE(e.message().find("head"), std::string::npos) << e.what();
  }
  {
    auto fx = llama_fixture();
    fx.u32("llama.expert_count", 8);
    EXPECT_EQ(config_error(fx).item(), "llama.expert_count");
  }
  {
    auto fx = llama_fixture();
    fx.zeros("rope_freqs.weight", {8});
    EXPECT_EQ(config_error(fx).item(), "rope_freqs.weight");
  }
  {
    auto fx = llama_fixture();
    fx.str("general.architecture", "falcon");
    const Error e = config_error(fx);
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(e.item(), "general.architecture");
  }
}

TEST(GgufConfig, RopeScalingTheFileStatesIsWritten) {
  auto fx = llama_fixture();
  fx.str("llama.rope.scaling.type", "linear");
  fx.f32("llama.rope.scaling.factor", 4.0f);
  test::TempDir t("gguf-rope");
  fx.write(t / "m.gguf");
  const auto c = model::read_gguf_model_info(io::GgufFile::open(t / "m.gguf")).config;
  EXPECT_EQ(c["rope_parameters"], json({{"factor", 4.0}, {"rope_theta", 10000.0}, {"rope_type", "linear"}}));
}

TEST(GgufTensors, ShapeOrNameTheMetadataDoesNotExplainIsAnError) {
  {
    auto fx = llama_fixture();
    fx.zeros("blk.0.ffn_extra.weight", {4});
    const Error e = config_error(fx);
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(e.item(), "blk.0.ffn_extra.weight");
  }
  {
    auto fx = llama_fixture();
    fx.zeros("blk.7.attn_q.weight", {64, 64});  // layer 7 of a 2-layer model
    EXPECT_EQ(config_error(fx).item(), "blk.7.attn_q.weight");
  }
  {
    auto fx = llama_fixture();
    fx.u32("llama.feed_forward_length", 96);  // the tensors are 128 wide
    const Error e = config_error(fx);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.item().rfind("blk.", 0), 0u) << e.item();
  }
}

TEST(GgufTensors, UnpermuteInvertsLlamaCppsRowOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const auto [rows, cols, heads] : {std::tuple{64, 5, 8}, {24, 3, 3}, {8, 1, 4}}) {
    std::vector<float> hf(size_t(rows * cols));
    for (auto& x : hf) x = u(rng);
    std::vector<float> g = hf;
    model::permute_qk_rows(g, rows, cols, heads);
    // llama.cpp's order: within head h, HF row (i * half + j) sits at row 2j + i.
    const int hd = rows / heads, half = hd / 2;
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < half; ++j)
          for (int c = 0; c < cols; ++c)
            ASSERT_EQ(g[size_t((h * hd + 2 * j + i) * cols + c)], hf[size_t((h * hd + i * half + j) * cols + c)]);
    model::unpermute_qk_rows(g, rows, cols, heads);
    EXPECT_EQ(g, hf);
  }
}

TEST(GgufConvert, DemoRoundTripGivesTheSourceBytesBack) {
  test::TempDir t("gguf-conv");
  const auto s = model::convert_gguf(kDemoGguf, t / "out");
  const auto src = io::WeightIndex::open(QLOOM_DEMO_MODEL_DIR);
  const auto dst = io::WeightIndex::open(t / "out");
  EXPECT_EQ(s.tensors, dst.num_tensors());
  EXPECT_EQ(dst.tensor_names(), src.tensor_names());
  for (const auto& name : src.tensor_names()) {
    SCOPED_TRACE(name);
    const auto a = src.view(name), b = dst.view(name);
    ASSERT_EQ(b.dtype(), DType::kBF16);
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_EQ(a.dtype(), DType::kBF16);
    EXPECT_TRUE(std::equal(a.data.begin(), a.data.end(), b.data.begin(), b.data.end()));
  }
  EXPECT_EQ(without_version(read_json(t / "out/config.json")),
            without_version(read_json(kData / "stories260k/config.json")));
  EXPECT_EQ(read_json(t / "out/tokenizer_config.json"), read_json(kData / "stories260k/tokenizer_config.json"));
  EXPECT_EQ(s.types_in.at("BF16") + s.types_in.at("F32"), s.tensors);
}

// The first `chars` code points (Python's str[:chars]).
std::string utf8_prefix(const std::string& s, size_t chars) {
  size_t i = 0;
  for (size_t n = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n++ == chars) break;
  return s.substr(0, i);
}

TEST(GgufTokenizer, SentencePieceStyleMatchesTransformers) {
  const auto files = model::gguf_tokenizer_files(io::GgufFile::open(kDemoGguf));
  EXPECT_EQ(json::parse(files.tokenizer_json), read_json(kData / "stories260k/tokenizer.json"));
  const auto tok = text::Tokenizer::from_json(files.tokenizer_json);
  const json ids = read_json(kData / "stories260k/ids.json");
  for (const auto& c : ids["texts"])
    EXPECT_EQ(tok.encode(c["text"].get<std::string>()), c["ids"].get<std::vector<int32_t>>()) << c["text"];
  const std::string wiki = utf8_prefix(
      test::read_file(fs::path(QLOOM_SOURCE_DIR) / "data/datasets/wikitext-2-raw/wiki.test.raw"),
      ids["wiki_prefix_chars"].get<size_t>());
  const auto got = tok.encode(wiki), want = ids["wiki_prefix_ids"].get<std::vector<int32_t>>();
  size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  EXPECT_EQ(got.size(), want.size());
  EXPECT_EQ(at, want.size()) << "first difference at id " << at;
}

TEST(GgufTokenizer, ConvertedDirLoadsInTheEngine) {
  test::TempDir t("gguf-tok");
  model::convert_gguf(kDemoGguf, t / "out");
  const auto tok = text::Tokenizer::load(t / "out");
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.bos_id(), 1);
  const json ids = read_json(kData / "stories260k/ids.json");
  EXPECT_EQ(tok.encode(ids["texts"][0]["text"].get<std::string>()), ids["texts"][0]["ids"].get<std::vector<int32_t>>());
}

TEST(GgufConvert, RefusesExistingOutputAndTheSourceDirectory) {
  test::TempDir t("gguf-refuse");
  t.write("full/x.txt", "x");
  EXPECT_EQ(test::catch_error([&] { model::convert_gguf(kDemoGguf, t / "full"); }).kind(), ErrorKind::kUsage);
  fs::copy_file(kDemoGguf, t / "m.gguf");
  EXPECT_EQ(test::catch_error([&] { model::convert_gguf(t / "m.gguf", t.path()); }).kind(), ErrorKind::kUsage);
  t.mkdir("empty");
  EXPECT_NO_THROW(model::convert_gguf(kDemoGguf, t / "empty"));
  EXPECT_TRUE(fs::exists(t / "empty/model.safetensors"));
  // Nothing half-written stays behind when the conversion fails.
  auto fx = llama_fixture();
  fx.erase("tokenizer.ggml.model");
  fx.write(t / "bad.gguf");
  EXPECT_ANY_THROW(model::convert_gguf(t / "bad.gguf", t / "badout"));
  EXPECT_FALSE(fs::exists(t / "badout"));
}

TEST(GgufConvert, F32OutputKeepsTheDequantizedValues) {
  test::TempDir t("gguf-f32");
  model::GgufConvertOptions o;
  o.dtype = DType::kF32;
  model::convert_gguf(kDemoGguf, t / "out", o);
  const auto dst = io::WeightIndex::open(t / "out");
  EXPECT_EQ(dst.view("model.norm.weight").dtype(), DType::kF32);
  EXPECT_EQ(read_json(t / "out/config.json")["dtype"], "float32");
}

TEST(GgufCache, ConvertsOnceAndReuses) {
  test::TempDir t("gguf-cache");
  ::setenv("QLOOM_GGUF_CACHE", (t / "cache").c_str(), 1);
  const fs::path a = model::resolve_gguf_model(kDemoGguf);
  ASSERT_TRUE(fs::exists(a / "config.json"));
  EXPECT_EQ(a.parent_path().parent_path(), t / "cache");
  const auto when = fs::last_write_time(a / "model.safetensors");
  fs::copy_file(kDemoGguf, t / "copy.gguf");  // same content, same key
  EXPECT_EQ(model::resolve_gguf_model(t / "copy.gguf"), a);
  EXPECT_EQ(fs::last_write_time(a / "model.safetensors"), when);
  // Intake: the config from the metadata alone equals the converted one.
  EXPECT_EQ(model::gguf_config_json(kDemoGguf), read_json(a / "config.json"));
  ::unsetenv("QLOOM_GGUF_CACHE");
}

}  // namespace
}  // namespace qloom

namespace qloom {
namespace {

std::string sha256_hex(const std::string& s);

// Byte-level (gpt2-style) tokenizers: llama-bpe (Split regex, add_bos) and qwen2.
TEST(GgufTokenizer, ByteLevelStylesMatchTransformers) {
  for (const char* style : {"llama3_bpe", "qwen2_bpe"}) {
    SCOPED_TRACE(style);
    const fs::path dir = kData / style;
    const io::GgufFile f = io::GgufFile::open(kData / (std::string(style) + ".gguf"));
    const auto n_tokens = int64_t(f.get_string_array("tokenizer.ggml.tokens").size());
    const auto files = model::gguf_tokenizer_files(f);
    json got = json::parse(files.tokenizer_json), want = read_json(dir / "tokenizer_head.json");
    // transformers appends GPT2Tokenizer's default unk "<|endoftext|>" when the file names no
    // unknown token: a token past the model's vocabulary, which qloom does not invent.
    json added = json::array();
    for (const auto& a : want["added_tokens"])
      if (a["id"].get<int64_t>() < n_tokens) added.push_back(a);
    want["added_tokens"] = added;
    std::vector<std::pair<int64_t, std::string>> byid;
    for (const auto& [t, id] : got["model"]["vocab"].items()) byid.emplace_back(id.get<int64_t>(), t);
    std::sort(byid.begin(), byid.end());
    std::string vocab, merges;
    for (const auto& [id, t] : byid) vocab += (vocab.empty() ? "" : "\n") + t;
    for (const auto& m : got["model"]["merges"])
      merges += (merges.empty() ? "" : "\n") + m[0].get<std::string>() + " " + m[1].get<std::string>();
    EXPECT_EQ(got["model"]["vocab"].size(), want["model"]["vocab"]["count"].get<size_t>());
    EXPECT_EQ(sha256_hex(vocab), want["model"]["vocab"]["sha256"]);
    EXPECT_EQ(got["model"]["merges"].size(), want["model"]["merges"]["count"].get<size_t>());
    EXPECT_EQ(sha256_hex(merges), want["model"]["merges"]["sha256"]);
    got["model"].erase("vocab"), got["model"].erase("merges");
    want["model"].erase("vocab"), want["model"].erase("merges");
    EXPECT_EQ(got, want);
    EXPECT_EQ(json::parse(files.tokenizer_config_json), read_json(dir / "tokenizer_config.json"));
    EXPECT_EQ(files.chat_template.value_or(""), test::read_file(dir / "chat_template.jinja"));

    const auto tok = text::Tokenizer::from_json(files.tokenizer_json);
    const json ids = read_json(dir / "ids.json");
    for (const auto& c : ids["texts"]) {
      const auto w = c["ids"].get<std::vector<int32_t>>();
      if (std::any_of(w.begin(), w.end(), [&](int32_t id) { return id >= n_tokens; })) continue;
      EXPECT_EQ(tok.encode(c["text"].get<std::string>()), w) << c["text"];
    }
    const std::string wiki = utf8_prefix(
        test::read_file(fs::path(QLOOM_SOURCE_DIR) / "data/datasets/wikitext-2-raw/wiki.test.raw"),
        ids["wiki_prefix_chars"].get<size_t>());
    EXPECT_EQ(tok.encode(wiki), ids["wiki_prefix_ids"].get<std::vector<int32_t>>());
  }
}

std::string sha256_hex(const std::string& s) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(s.data(), s.size(), d, &n, EVP_sha256(), nullptr);
  static const char* k = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) out += k[d[i] >> 4], out += k[d[i] & 15];
  return out;
}

}  // namespace
}  // namespace qloom

namespace qloom {
namespace {

// SentencePiece style with add_eos, a pad token and a user-defined token.
TEST(GgufTokenizer, SentencePieceVariantMatchesTransformers) {
  const fs::path dir = kData / "stories260k_variant";
  const auto files = model::gguf_tokenizer_files(io::GgufFile::open(kData / "stories260k_variant.gguf"));
  EXPECT_EQ(json::parse(files.tokenizer_json), read_json(dir / "tokenizer.json"));
  EXPECT_EQ(json::parse(files.tokenizer_config_json), read_json(dir / "tokenizer_config.json"));
  const auto tok = text::Tokenizer::from_json(files.tokenizer_json);
  const json ids = read_json(dir / "ids.json");
  for (const auto& c : ids["texts"])
    EXPECT_EQ(tok.encode(c["text"].get<std::string>()), c["ids"].get<std::vector<int32_t>>()) << c["text"];
}

}  // namespace
}  // namespace qloom

namespace qloom {
namespace {

TEST(GgufInspect, SaysWhyAFileWouldNotConvert) {
  test::TempDir t("gguf-inspect");
  test::GgufFixture::from_config_golden(read_json(kData / "configs/gemma2.json")).write(t / "g.gguf");
  const auto s = model::gguf_summary_json(t / "g.gguf");
  EXPECT_EQ(s["architecture"], "gemma2");
  EXPECT_EQ(s["convertible"], false);
  EXPECT_EQ(s["not_convertible_because"].get<std::string>().rfind("general.architecture: ", 0), 0u) << s.dump();
  const std::string text = model::format_gguf_summary(s);
  EXPECT_NE(text.find("not convertible: general.architecture"), std::string::npos) << text;
  const auto d = model::gguf_summary_json(kDemoGguf);
  EXPECT_EQ(d["convertible"], true);
  EXPECT_EQ(d["parameters"], 260032);  // from the tensor infos (gguf's GGUFReader agrees)
  EXPECT_EQ(d["tensors"], 47);
}

}  // namespace
}  // namespace qloom
