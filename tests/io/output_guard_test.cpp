// check_replaceable_output (io/output_guard.h): what --overwrite may delete
// (issue 30 item 9: `--output_dir . --overwrite` removed the user's files).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "qloom/core/error.h"
#include "qloom/io/output_guard.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::Error;
using qloom::ErrorKind;
using qloom::io::check_replaceable_output;
using qloom::test::catch_error;
using qloom::test::TempDir;

void write_checkpoint(const TempDir& t, const fs::path& rel) {
  t.write(rel / "config.json", R"({"model_type": "llama", "quantization_config": {"quant_method": "quark"}})");
  t.write(rel / "model.safetensors", "x");
  t.write(rel / "tokenizer.json", "{}");
  t.write(rel / "README.md", "copied from the source");
}

std::string refusal(const fs::path& p) {
  const Error e = catch_error([&] { check_replaceable_output(p); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "--output_dir");
  return e.message();
}

// Runs with the current directory set to `dir`, restored afterwards.
struct InDir {
  fs::path old = fs::current_path();
  explicit InDir(const fs::path& dir) { fs::current_path(dir); }
  ~InDir() { fs::current_path(old); }
};

// Sets $HOME, restored afterwards.
struct HomeIs {
  std::optional<std::string> old;
  explicit HomeIs(const fs::path& home) {
    if (const char* h = std::getenv("HOME")) old = h;
    ::setenv("HOME", home.c_str(), 1);
  }
  ~HomeIs() {
    if (old) ::setenv("HOME", old->c_str(), 1);
    else ::unsetenv("HOME");
  }
};

TEST(OutputGuard, EmptyMissingAndCheckpointDirsMayBeReplaced) {
  TempDir t("guard");
  EXPECT_NO_THROW(check_replaceable_output(t / "absent"));
  t.mkdir("empty");
  EXPECT_NO_THROW(check_replaceable_output(t / "empty"));
  write_checkpoint(t, "quark");
  EXPECT_NO_THROW(check_replaceable_output(t / "quark"));
  write_checkpoint(t, "multi");
  write_checkpoint(t, "multi/compressed-tensors");
  t.write("multi/llama.gguf", "GGUF");
  EXPECT_NO_THROW(check_replaceable_output(t / "multi"));
  t.write("gguf_only/llama.gguf", "GGUF");
  EXPECT_NO_THROW(check_replaceable_output(t / "gguf_only"));
  t.write("no_weights/config.json", R"({"architectures": ["LlamaForCausalLM"]})");  // a broken export
  EXPECT_NO_THROW(check_replaceable_output(t / "no_weights"));
}

TEST(OutputGuard, UserDirectoriesAreRefused) {
  TempDir t("guard");
  t.write("notes/todo.txt", "mine");
  EXPECT_NE(refusal(t / "notes").find("holds no model checkpoint"), std::string::npos);
  write_checkpoint(t, "project");
  t.write("project/src/main.cpp", "int main() {}");
  EXPECT_NE(refusal(t / "project").find("holds the directory \"src\""), std::string::npos);
  t.write("weights_only/model.safetensors", "x");  // no config.json
  EXPECT_NE(refusal(t / "weights_only").find("holds no model checkpoint"), std::string::npos);
  t.write("bad_config/config.json", "not json");
  t.write("bad_config/model.safetensors", "x");
  EXPECT_NE(refusal(t / "bad_config").find("holds no model checkpoint"), std::string::npos);
  t.write("tool_config/config.json", R"({"name": "my tool", "verbose": true})");  // not a model's
  t.write("tool_config/data.txt", "x");
  EXPECT_NE(refusal(t / "tool_config").find("holds no model checkpoint"), std::string::npos);
  write_checkpoint(t, "nested");
  write_checkpoint(t, "nested/hf_format");
  t.write("nested/hf_format/extra/file", "x");
  EXPECT_NE(refusal(t / "nested").find("hf_format/"), std::string::npos);
}

TEST(OutputGuard, CwdHomeRootAndTheirParentsAreRefusedEvenWhenTheyLookLikeCheckpoints) {
  TempDir t("guard");
  write_checkpoint(t, "ckpt");
  t.mkdir("ckpt/sub");
  {
    const InDir in(t / "ckpt");
    EXPECT_NE(refusal(".").find("current directory"), std::string::npos);
    EXPECT_NE(refusal(t / "ckpt").find("current directory"), std::string::npos);
    EXPECT_NE(refusal("sub/..").find("current directory"), std::string::npos);
  }
  {
    const InDir in(t / "ckpt" / "sub");
    EXPECT_NE(refusal("..").find("current directory"), std::string::npos);  // a parent of the cwd
  }
  {
    const HomeIs home(t / "ckpt");
    EXPECT_NE(refusal(t / "ckpt").find("home directory"), std::string::npos);
    EXPECT_NE(refusal(t.path()).find("home directory"), std::string::npos);
  }
  EXPECT_NE(refusal("/").find("root directory"), std::string::npos);
}

}  // namespace
