// Issue 30 item 9: --overwrite deleted any existing directory
// (`--output_dir . --overwrite` removed the user's files); `--output_dir ""`
// was an internal error (exit 1); `qloom run ""` ran an attempt.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> quantize(const std::string& out) {
  return {"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", out, "--quant_scheme",
          "int4_wo_per_channel", "--exclude_unsupported", "--overwrite"};
}

TEST(OverwriteCli, RefusesADirectoryThatHoldsNoCheckpoint) {
  TempDir t("overwrite");
  t.write("mine/notes.txt", "keep me");
  t.write("mine/src/main.cpp", "int main() {}");
  const CommandResult r = run_qloom(quantize((t / "mine").string()));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--overwrite refuses to replace"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(t / "mine" / "notes.txt"), "keep me");
  EXPECT_TRUE(fs::exists(t / "mine" / "src" / "main.cpp"));
}

TEST(OverwriteCli, RefusesTheCurrentDirectory) {
  TempDir t("overwrite");
  t.write("mine/notes.txt", "keep me");
  std::string cmd = "cd " + shell_quote((t / "mine").string()) + " && " + shell_quote(QLOOM_CLI_PATH);
  for (const std::string& a : quantize(".")) cmd += " " + shell_quote(a);
  const CommandResult r = run_command({"/bin/sh", "-c", cmd});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("it is or contains the current directory"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(t / "mine" / "notes.txt"), "keep me");
}

TEST(OverwriteCli, ReplacesItsOwnOutputAndAnEmptyDirectory) {
  TempDir t("overwrite");
  t.mkdir("empty");
  for (const char* out : {"empty", "empty"}) {  // the second run replaces the first's checkpoint
    const CommandResult r = run_qloom(quantize((t / out).string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(t / out / "config.json"));
  }
}

TEST(OverwriteCli, EmptyOutputDirIsAUsageError) {
  const CommandResult r = run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", "",
                                     "--quant_scheme", "int4_wo_per_channel"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("usage"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--output_dir"), std::string::npos) << r.err;
}

TEST(OverwriteCli, RunRefusesEmptyAndControlCharacterPrompts) {
  for (const std::string prompt : {std::string(""), std::string("   "), std::string("quantize the bundled model\x1b[2J")}) {
    SCOPED_TRACE(prompt);
    TempDir t("overwrite");
    const CommandResult r = run_qloom({"run", prompt, "--workspace", (t / "ws").string(), "--interactive", "off"});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("prompt"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(t / "ws" / "assessment.json"));
  }
}

}  // namespace
}  // namespace qloom::test
