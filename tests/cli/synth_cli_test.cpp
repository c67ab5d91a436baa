// qloom-synth writes a loadable, deterministic HuggingFace model dir.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;

TEST(SynthCli, ShardedTinyModelInspectsAndIsDeterministic) {
  test::TempDir tmp;
  const auto a = tmp.path() / "a", b = tmp.path() / "b";
  for (const auto& out : {a, b}) {
    const auto r = test::run_command({QLOOM_SYNTH_PATH, "--preset", "tiny", "--output_dir",
                                      out.string(), "--max-shard-size", "100000", "--seed", "7"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const auto r = test::run_qloom({"inspect", a.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // tiny: vocab 512 x hidden 64, 2 layers, ffn 176, 4 heads / 2 kv heads, untied head.
  EXPECT_EQ(j["parameters"], 2 * 512 * 64 + 2 * (2 * 64 + 2 * 64 * 64 + 2 * 32 * 64 + 3 * 176 * 64) + 64);
  EXPECT_EQ(j["shards"].size(), 4u);
  EXPECT_EQ(j["tokenizer_files"].size(), 4u);
  for (const auto& e : fs::directory_iterator(a))
    EXPECT_EQ(test::read_file(e.path()), test::read_file(b / e.path().filename())) << e.path();
  // A different seed gives different weights.
  const auto c = tmp.path() / "c";
  ASSERT_EQ(test::run_command({QLOOM_SYNTH_PATH, "--preset", "tiny", "--output_dir", c.string(),
                               "--max-shard-size", "100000", "--seed", "8"}).exit_code, 0);
  EXPECT_NE(test::read_file(a / "model-00002-of-00004.safetensors"),
            test::read_file(c / "model-00002-of-00004.safetensors"));
}

TEST(SynthCli, RefusesExistingOutputAndUnknownPreset) {
  test::TempDir tmp;
  auto r = test::run_command({QLOOM_SYNTH_PATH, "--preset", "tiny", "--output_dir", tmp.path().string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  r = test::run_command({QLOOM_SYNTH_PATH, "--preset", "huge", "--output_dir", (tmp.path() / "x").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown preset"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "x"));
}

}  // namespace
}  // namespace qloom
