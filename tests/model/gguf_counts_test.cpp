// GGUF metadata counts against what the file holds (model/gguf_counts.h): an
// absurd block_count or size is rejected up front naming the key, by
// read_gguf_model_info, convert and inspect alike, and in well under a second.
#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "qloom/model/gguf_config.h"
#include "qloom/model/gguf_convert.h"
#include "qloom/model/gguf_counts.h"
#include "qloom/model/gguf_inspect.h"
#include "support/expect_error.h"
#include "support/gguf_fixture.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

test::GgufFixture llama() {
  const fs::path golden = fs::path(QLOOM_TEST_DATA_DIR) / "gguf_convert/configs/llama.json";
  return test::GgufFixture::from_config_golden(nlohmann::json::parse(test::read_file(golden)));
}

// The error of each entry point for the file `fx`, each within a second.
void expect_rejected_everywhere(const test::GgufFixture& fx, const std::string& key, const std::string& fragment) {
  test::TempDir t("gguf-counts");
  fx.write(t / "m.gguf");
  const auto t0 = Clock::now();
  const io::GgufFile f = io::GgufFile::open(t / "m.gguf");
  for (const Error& e : {test::catch_error([&] { model::read_gguf_model_info(f); }),
                         test::catch_error([&] { model::convert_gguf(t / "m.gguf", t / "out"); }),
                         test::catch_error([&] { model::gguf_summary_json(t / "m.gguf"); })}) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_EQ(e.item(), key) << e.what();
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(GgufCounts, AnAbsurdBlockCountIsRejectedUpFront) {
  for (const uint64_t n : {uint64_t{2147483647}, uint64_t{3}, uint64_t{1} << 40}) {
    auto fx = llama();  // 2 blocks of tensors
    if (n > 0xFFFFFFFFu) fx.u64("llama.block_count", n);
    else fx.u32("llama.block_count", static_cast<uint32_t>(n));
    expect_rejected_everywhere(fx, "llama.block_count",
                               "is " + std::to_string(n) + " but the file holds tensors for 2 block(s)");
  }
}

TEST(GgufCounts, SizesBeyondEveryTensorDimensionAreRejected) {
  for (const char* key : {"llama.embedding_length", "llama.feed_forward_length", "llama.attention.head_count",
                          "llama.vocab_size"}) {
    auto fx = llama();  // the largest dimension is the vocabulary, 256
    fx.u64(key, uint64_t{1} << 40);
    expect_rejected_everywhere(fx, key, "more than the largest tensor dimension in the file (256)");
  }
  auto fx = llama();  // a per-layer array with one absurd entry
  fx.i32_array("llama.attention.head_count_kv", {2, 2147483647});
  expect_rejected_everywhere(fx, "llama.attention.head_count_kv", "is 2147483647");
}

TEST(GgufCounts, AFileWithoutTensorsIsNotConvertibleAndNotLooped) {
  test::GgufFixture fx;
  fx.str("general.architecture", "llama");
  fx.u32("llama.block_count", 2147483647);
  test::TempDir t("gguf-vocab-only");
  fx.write(t / "v.gguf");
  const auto t0 = Clock::now();
  const auto s = model::gguf_summary_json(t / "v.gguf");
  EXPECT_EQ(s["convertible"], false);
  EXPECT_EQ(s["not_convertible_because"].get<std::string>().rfind("tensor_count: ", 0), 0u) << s.dump();
  const Error e = test::catch_error([&] { model::convert_gguf(t / "v.gguf", t / "out"); });
  EXPECT_EQ(e.item(), "tensor_count");
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
}

TEST(GgufCounts, AnArchitectureThatIsNotUtf8IsAnErrorForInspectAndConvert) {
  auto fx = llama();
  fx.str("general.architecture", "lla\xffma");
  test::TempDir t("gguf-utf8");
  fx.write(t / "m.gguf");
  for (const Error& e : {test::catch_error([&] { model::gguf_summary_json(t / "m.gguf"); }),
                         test::catch_error([&] { model::convert_gguf(t / "m.gguf", t / "out"); })}) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_EQ(e.item(), "general.architecture");
    EXPECT_NE(e.message().find("not valid UTF-8"), std::string::npos) << e.what();
  }
}

TEST(GgufCounts, AWellFormedFileAndItsGoldensPass) {
  test::TempDir t("gguf-ok");
  llama().write(t / "m.gguf");
  EXPECT_NO_THROW(model::check_gguf_counts(io::GgufFile::open(t / "m.gguf")));
  EXPECT_EQ(model::gguf_summary_json(t / "m.gguf")["convertible"], true);
}

}  // namespace
}  // namespace qloom
