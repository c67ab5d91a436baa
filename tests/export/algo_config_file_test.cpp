// `qloom quantize --quant_algo gptq --quant_algo_config_file gptq FILE`
// (job/algo_config_file.h) on the demo model: the file's settings reach
// the stage (the codes change, quantization_config.algo_config records them),
// unset keys keep Quark's defaults, the file's sha256 is reported, and every
// bad file is an error naming the file (and the key) before anything is
// written.
#include "qloom/job/algo_config_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/job/quantize_args.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/weight_index.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

job::QuantizeOptions gptq_options(const fs::path& out) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = "int4_wo_64";
  o.exclude_unsupported = true;  // the MLP's 172 columns / rows do not fit int4's layout
  o.quant_algo = "gptq";
  o.num_calib_data = 8;
  o.seq_len = 64;
  o.threads = 2;
  return o;
}

nlohmann::json algo_config(const fs::path& dir) {
  std::ifstream f(dir / "config.json");
  return nlohmann::json::parse(f)["quantization_config"]["algo_config"];
}

std::vector<std::byte> bytes_of(const fs::path& dir, const std::string& tensor) {
  const auto w = io::WeightIndex::open(dir);
  const auto d = w.view(tensor).data;
  return {d.begin(), d.end()};
}

TEST(AlgoConfigFile, Sha256OfKnownVectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(job::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(job::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(AlgoConfigFile, GptqFileChangesTheCodesAndIsRecorded) {
  test::TempDir tmp("algo-file");
  const std::string text = R"({"name": "gptq", "damp_percent": 0.1, "desc_act": false, "static_groups": false,
                               "block_size": 32, "true_sequential": false})";
  const fs::path cfg = tmp.write("gptq config.json", text);

  (void)job::quantize_model(gptq_options(tmp / "default"));
  job::QuantizeOptions o = gptq_options(tmp / "file");
  o.algo_config_files = {{"gptq", cfg.string()}};
  const job::QuantizeSummary s = job::quantize_model(o);

  ASSERT_EQ(s.algo_config_files.size(), 1u);
  EXPECT_EQ(s.algo_config_files[0].algo, "gptq");
  EXPECT_EQ(s.algo_config_files[0].path, cfg.string());
  EXPECT_EQ(s.algo_config_files[0].sha256, job::sha256_hex(text));

  const nlohmann::json a = algo_config(tmp / "file");
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["damp_percent"], 0.1);
  EXPECT_EQ(a[0]["desc_act"], false);
  EXPECT_EQ(a[0]["static_groups"], false);
  EXPECT_EQ(a[0]["block_size"], 32);
  EXPECT_EQ(algo_config(tmp / "default")[0]["desc_act"], true);

  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  EXPECT_NE(bytes_of(tmp / "file", q), bytes_of(tmp / "default", q)) << "the config file did not reach GPTQ";
}

TEST(AlgoConfigFile, UnsetKeysKeepQuarksDefaults) {
  test::TempDir tmp("algo-file-defaults");
  job::QuantizeOptions o = gptq_options(tmp / "q");
  o.algo_config_files = {{"gptq", tmp.write("g.json", R"({"damp_percent": 0.05})").string()}};
  (void)job::quantize_model(o);
  const nlohmann::json a = algo_config(tmp / "q")[0];
  EXPECT_EQ(a["name"], "gptq");
  EXPECT_EQ(a["damp_percent"], 0.05);
  EXPECT_EQ(a["block_size"], 128);
  EXPECT_EQ(a["desc_act"], true);
}

TEST(AlgoConfigFile, BadFilesAreErrorsNamingTheFileAndKey) {
  test::TempDir tmp("algo-file-bad");
  job::QuantizeOptions o = gptq_options(tmp / "q");
  auto fails = [&](const std::string& algo, const fs::path& file) {
    o.algo_config_files = {{algo, file.string()}};
    const Error e = test::catch_error([&] { job::quantize_model(o); });
    EXPECT_FALSE(fs::exists(o.output_dir));
    return e;
  };
  const fs::path unknown = tmp.write("unknown.json", R"({"name": "gptq", "dampening": 0.1})");
  Error e = fails("gptq", unknown);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.file(), unknown.string());
  EXPECT_EQ(e.item(), "algo_config.gptq.dampening");

  const fs::path range = tmp.write("range.json", R"({"damp_percent": -1})");
  e = fails("gptq", range);
  EXPECT_EQ(e.file(), range.string());
  EXPECT_EQ(e.item(), "algo_config.gptq.damp_percent");

  const fs::path other = tmp.write("awq-named.json", R"({"name": "awq"})");
  e = fails("gptq", other);  // a file written for another algorithm
  EXPECT_EQ(e.file(), other.string());
  EXPECT_EQ(e.item(), "algo_config.gptq.name");

  const fs::path broken = tmp.write("broken.json", "{\"damp_percent\": ");
  e = fails("gptq", broken);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), broken.string());

  e = fails("gptq", tmp.write("list.json", "[1, 2]"));
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("JSON object"), std::string::npos) << e.what();

  e = fails("gptq", tmp / "missing.json");
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos) << e.what();

  // A file for an algorithm --quant_algo does not run.
  const fs::path awq = tmp.write("awq.json", R"({"name": "awq"})");
  e = fails("awq", awq);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.file(), awq.string());

  // Two files for one algorithm.
  const fs::path good = tmp.write("good.json", R"({"name": "gptq"})");
  o.algo_config_files = {{"gptq", good.string()}, {"gptq", good.string()}};
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).kind(), ErrorKind::kUsage);
  EXPECT_FALSE(fs::exists(o.output_dir));
}

// The CLI's spelling end to end: the flag parses into the options the job runs.
TEST(AlgoConfigFile, SmoothQuantFileFromTheCommandLine) {
  test::TempDir tmp("algo-file-sq");
  const fs::path cfg = tmp.write("sq.json", R"({"name": "smooth", "alpha": 0.25})");
  job::QuantizeCommand c = job::parse_quantize_args({"--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", (tmp / "q").string(),
                                           "--quant_scheme", "int8", "--quant_algo", "smoothquant",
                                           "--quant_algo_config_file", "smoothquant", cfg.string(),
                                           "--num_calib_data", "4", "--seq_len", "32"});
  (void)job::quantize_model(c.options);
  EXPECT_EQ(algo_config(tmp / "q")[0]["alpha"], 0.25);
}

}  // namespace
}  // namespace qloom::exporter
