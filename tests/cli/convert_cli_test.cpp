// `qloom convert` and `.gguf` wherever a model directory is taken (inspect,
// eval, quantize, validate), as a user runs them, on the demo model's GGUF
// (tests/data/gguf_convert/stories260k.gguf).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using test::run_qloom;

const std::string kGguf = (fs::path(QLOOM_TEST_DATA_DIR) / "gguf_convert" / "stories260k.gguf").string();

// The CLI with QLOOM_GGUF_CACHE pointing into `cache`.
test::CommandResult qloom_cached(const fs::path& cache, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"env", "QLOOM_GGUF_CACHE=" + cache.string(), QLOOM_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

TEST(ConvertCli, WritesAModelDirAndASummary) {
  test::TempDir t("conv-cli");
  const auto r = run_qloom({"convert", kGguf, "--output-dir", (t / "hf").string(), "--progress", "on"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "model.safetensors"})
    EXPECT_TRUE(fs::exists(t / "hf" / f)) << f;
  EXPECT_NE(r.out.find("tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("BF16 x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << r.err;
  // The converted directory is a model qloom inspects like any other.
  const auto i = run_qloom({"inspect", (t / "hf").string(), "--json"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_EQ(nlohmann::json::parse(i.out)["model_type"], "llama");
}

TEST(ConvertCli, RefusesANonEmptyOutputDir) {
  test::TempDir t("conv-cli-refuse");
  t.write("hf/keep.txt", "mine");
  const auto r = run_qloom({"convert", kGguf, "--output_dir", (t / "hf").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not an empty directory"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_file(t / "hf/keep.txt"), "mine");
}

TEST(ConvertCli, InspectReadsTheGgufMetadata) {
  const auto r = run_qloom({"inspect", kGguf});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF v3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("converts to"), std::string::npos) << r.out;
  const auto j = run_qloom({"inspect", kGguf, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto s = nlohmann::json::parse(j.out);
  EXPECT_EQ(s["architecture"], "llama");
  EXPECT_EQ(s["num_hidden_layers"], 5);
  EXPECT_EQ(s["tokens"], 512);
  EXPECT_EQ(s["convertible"], true);
}

TEST(ConvertCli, EvalAndQuantizeTakeAGgufAndConvertOnce) {
  test::TempDir t("conv-cli-use");
  const auto e = qloom_cached(t / "cache", {"eval", kGguf, "--task", "ppl", "--dataset", "tinystories",
                                            "--seq_len", "64", "--limit", "2"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.err.find("converting"), std::string::npos) << e.err;
  const auto q = qloom_cached(t / "cache", {"quantize", "--model_dir", kGguf, "--output_dir", (t / "q").string(),
                                            "--quant_scheme", "ptpc_fp8", "--progress", "off"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.err.find("using the converted copy"), std::string::npos) << q.err;
  EXPECT_TRUE(fs::exists(t / "q/config.json"));
  const auto v = qloom_cached(t / "cache", {"validate", "--source", kGguf, "--quantized", (t / "q").string(), "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.err.find("using the converted copy"), std::string::npos) << v.err;
  // One conversion served all three commands.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(t / "cache")) ++entries;
  EXPECT_EQ(entries, 1u);
  // The same ppl as the demo model itself: the conversion is exact.
  const auto d = run_qloom({"eval", QLOOM_DEMO_MODEL_DIR, "--task", "ppl", "--dataset", "tinystories",
                            "--seq_len", "64", "--limit", "2"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(e.out.substr(0, e.out.find('\n')), d.out.substr(0, d.out.find('\n')));
}

}  // namespace
}  // namespace qloom
