// `qloom convert` and `.gguf` wherever a model directory is taken (inspect,
// eval, quantize, validate), as a user runs them, on the demo model's GGUF
// (tests/data/gguf_convert/stories260k.gguf).
#include <filesystem>
#include <iterator>
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
  // One conversion served all three commands (beside it, index/ remembers the file's key).
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(t / "cache")) entries += e.path().filename() != "index";
  EXPECT_EQ(entries, 1u);
  EXPECT_EQ(std::distance(fs::directory_iterator(t / "cache/index"), fs::directory_iterator()), 1);
  // The same ppl as the demo model itself: the conversion is exact.
  const auto d = run_qloom({"eval", QLOOM_DEMO_MODEL_DIR, "--task", "ppl", "--dataset", "tinystories",
                            "--seq_len", "64", "--limit", "2"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(e.out.substr(0, e.out.find('\n')), d.out.substr(0, d.out.find('\n')));
}

// The demo GGUF with the bytes after `key`'s value type (its value) replaced
// by `value`, written to t/`name` (issue 30: hand-edited metadata).
void patch_gguf_value(const std::string& key, const std::string& value, const test::TempDir& t,
                      const std::string& name) {
  std::string bytes = test::read_file(kGguf);
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos) << key;
  bytes.replace(at + key.size() + 4, value.size(), value);
  t.write(name, bytes);
}

TEST(ConvertCli, AnAbsurdCountOrABrokenArchitectureExits2NamingTheKey) {
  test::TempDir t("conv-cli-hostile");
  // block_count (uint32) 2^31-1; the architecture's string "llama" with an invalid first byte
  // (its 8-byte length comes first).
  patch_gguf_value("llama.block_count", std::string("\xff\xff\xff\x7f", 4), t, "blocks.gguf");
  patch_gguf_value("general.architecture", std::string("\x05\0\0\0\0\0\0\0\xffl", 10), t, "arch.gguf");
  const std::pair<const char*, const char*> cases[] = {
      {"blocks.gguf", "llama.block_count: is 2147483647 but the file holds tensors for 5 block(s)"},
      {"arch.gguf", "general.architecture: metadata string is not valid UTF-8"}};
  for (const auto& [file, why] : cases)
    for (const auto& args : {std::vector<std::string>{"inspect", (t / file).string()},
                             std::vector<std::string>{"convert", (t / file).string(), "--output_dir",
                                                      (t / "out").string()}}) {
      const auto r = qloom_cached(t / "cache", args);
      EXPECT_EQ(r.exit_code, 2) << args[0] << " " << file << ": " << r.out << r.err;
      EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
      EXPECT_FALSE(fs::exists(t / "out"));
    }
}

}  // namespace
}  // namespace qloom

namespace qloom {
namespace {

// A Quark checkpoint re-exported with --to: the same bytes as the one-job
// `quantize --model_export` path, and clear errors for the wrong input.
TEST(ConvertCli, ToGgufAndCompressedTensorsFromAQuarkCheckpoint) {
  test::TempDir t("conv-to");
  const fs::path job = t / "job";
  const auto q = run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", job.string(),
                            "--quant_scheme", "int4_wo_32", "--exclude_unsupported", "--model_export", "hf_format",
                            "compressed-tensors", "gguf", "--progress", "off"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const auto g = run_qloom({"convert", job.string(), "--to", "gguf", "--output", (t / "job.gguf").string()});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("carried code for code"), std::string::npos) << g.out;
  // general.name is the checkpoint's name ("job") on both paths: byte-identical files.
  EXPECT_EQ(test::read_file(t / "job.gguf"), test::read_file(job / "llama.gguf"));
  const auto c = run_qloom({"convert", job.string(), "--to", "compressed-tensors", "--output_dir", (t / "ct").string()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(test::read_file(t / "ct" / "model.safetensors"),
            test::read_file(job / "compressed-tensors" / "model.safetensors"));
  EXPECT_EQ(test::read_file(t / "ct" / "config.json"), test::read_file(job / "compressed-tensors" / "config.json"));

  const auto no_out = run_qloom({"convert", job.string(), "--to", "gguf"});
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.err.find("--output"), std::string::npos) << no_out.err;
  const auto plain = run_qloom({"convert", QLOOM_DEMO_MODEL_DIR, "--to", "compressed-tensors", "--output_dir",
                                (t / "ct2").string()});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.err.find("not a Quark checkpoint"), std::string::npos) << plain.err;
  EXPECT_FALSE(fs::exists(t / "ct2"));
  const auto bad = run_qloom({"convert", job.string(), "--to", "gguf", "--output", (t / "x.gguf").string(),
                              "--gguf_float_type", "q5_0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--gguf_float_type"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(t / "x.gguf"));
}

}  // namespace
}  // namespace qloom
