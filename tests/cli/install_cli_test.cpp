// An installed qloom is self-contained: `cmake --install` puts bin/qloom,
// lib/, share/qloom/data and share/qloom/models under the prefix; a copy of
// that tree moved elsewhere finds its data sets and demo model beside itself
// (never in the source tree it was built from), and without them says where
// it looked.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;

test::CommandResult eval_ppl(const fs::path& root) {
  return test::run_command({"env", "-u", "QLOOM_DATA_DIR", "-u", "QLOOM_DEMO_MODEL", (root / "bin/qloom").string(),
                            "eval", (root / "share/qloom/models/stories260K-hf-bf16").string(), "--task", "ppl",
                            "--dataset", "wikitext2", "--limit", "1", "--seq_len", "64", "--threads", "1"});
}

TEST(InstallCli, MovedInstallFindsItsOwnDataAndSaysWhereItLookedWithout) {
  test::TempDir t("install");
  const fs::path prefix = t / "prefix";
  auto r = test::run_command({QLOOM_CMAKE_COMMAND, "--install", QLOOM_BINARY_DIR, "--prefix", prefix.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::is_regular_file(prefix / "bin/qloom"));
  EXPECT_TRUE(fs::is_regular_file(prefix / "share/qloom/data/datasets/wikitext-2-raw/wiki.test.raw"));
  EXPECT_TRUE(fs::is_regular_file(prefix / "share/qloom/data/datasets/calibration/c4.utf8"));
  EXPECT_TRUE(fs::is_regular_file(prefix / "share/qloom/models/stories260K-hf-bf16/config.json"));
  bool lib = false;
  for (const auto& e : fs::recursive_directory_iterator(prefix))
    lib = lib || e.path().filename() == "libqloom.a" || e.path().filename() == "libqloom.so";
  EXPECT_TRUE(lib) << "no libqloom under " << prefix;

  // Moved: nothing points back at the prefix or the build.
  const fs::path root = t / "elsewhere" / "qloom-copy";
  fs::create_directories(root.parent_path());
  fs::rename(prefix, root);
  r = eval_ppl(root);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string used = (root / "share/qloom/data/datasets/wikitext-2-raw/wiki.test.raw").string();
  EXPECT_NE(r.err.find("read from " + used), std::string::npos) << r.err;
  const std::string source_data = std::string(QLOOM_SOURCE_DIR) + "/data";
  EXPECT_EQ(r.err.find(source_data), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("PPL"), std::string::npos) << r.out;

  // The bundled demo model of `qloom run` is the installed copy's too.
  const fs::path ws = t / "ws";
  r = test::run_command({"env", "-u", "QLOOM_DATA_DIR", "-u", "QLOOM_DEMO_MODEL", (root / "bin/qloom").string(), "run",
                         "quantize the bundled model to fp8 without kv cache quantization, calibrate on 4 samples, "
                         "measure perplexity on 2 samples, accept a 50% gap",
                         "--workspace", ws.string(), "--interactive", "off", "--max-requantize-attempts", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string manifest = test::read_file(ws / "run_manifest.yaml");
  EXPECT_NE(manifest.find((root / "share/qloom/models/stories260K-hf-bf16").string()), std::string::npos) << manifest;
  EXPECT_EQ(manifest.find(std::string(QLOOM_SOURCE_DIR) + "/models"), std::string::npos) << manifest;

  // Without its data: an error naming the places looked, none in the source tree.
  fs::rename(root / "share/qloom/data", root / "share/qloom/data.hidden");
  r = eval_ppl(root);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find((root / "share/qloom/data/datasets/wikitext-2-raw/wiki.test.raw").string()), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find(source_data), std::string::npos) << r.err;

  // Without its models: qloom run asks which model, saying where it looked.
  fs::rename(root / "share/qloom/models", root / "share/qloom/models.hidden");
  r = test::run_command({"env", "-u", "QLOOM_DEMO_MODEL", (root / "bin/qloom").string(), "run",
                         "quantize the bundled model to fp8", "--workspace", (t / "ws2").string(), "--interactive",
                         "off"});
  const std::string all = r.out + r.err;
  EXPECT_NE(r.exit_code, 0) << all;
  EXPECT_NE(all.find((root / "share/qloom/models/stories260K-hf-bf16").string()), std::string::npos) << all;
  EXPECT_EQ(all.find(std::string(QLOOM_SOURCE_DIR) + "/models"), std::string::npos) << all;
}

}  // namespace
}  // namespace qloom
