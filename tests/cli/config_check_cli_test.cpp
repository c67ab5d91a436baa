// Issue 30 item 7: one validation of config.json (model/config_check.h) for
// every command. Copies of the demo model with one bad value are rejected by
// each command with exit 2 and the same message naming config.json, the
// field and the value; RTN quantize used to write a checkpoint carrying them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::test {
namespace {

namespace fs = std::filesystem;

struct BadConfig {
  const char* key;
  nlohmann::json value;
  const char* message;
};

const std::vector<BadConfig>& bad_configs() {
  static const std::vector<BadConfig> t = {
      {"num_attention_heads", 0, "config field \"num_attention_heads\" = 0 must be an integer between 1 and 65536"},
      {"hidden_size", "64", "config field \"hidden_size\" = \"64\" must be an integer"},
      {"hidden_size", 64.5, "config field \"hidden_size\" = 64.5 must be an integer, not a float"},
      {"hidden_size", 64.0, "config field \"hidden_size\" = 64.0 must be an integer, not a float"},
      {"rope_theta", -1, "config field \"rope_theta\" = -1 must be a finite number > 0"},
      {"rms_norm_eps", 0, "config field \"rms_norm_eps\" = 0 must be a finite number > 0 and <= 1"},
      {"tie_word_embeddings", "yes", "config field \"tie_word_embeddings\" = \"yes\" must be true or false"},
      {"rope_scaling", {{"rope_type", "linear"}, {"factor", -2}},
       "config field \"rope_scaling.factor\" = -2 must be a finite number > 0"},
  };
  return t;
}

fs::path demo_with(const fs::path& where, const BadConfig& c) {
  const fs::path dst = where / "model";
  fs::copy(QLOOM_DEMO_MODEL_DIR, dst, fs::copy_options::recursive);
  auto cfg = nlohmann::ordered_json::parse(read_file(dst / "config.json"));
  cfg[c.key] = c.value;
  std::ofstream(dst / "config.json") << cfg.dump(2);
  return dst;
}

std::vector<std::vector<std::string>> commands(const fs::path& m, const fs::path& out) {
  const std::string d = m.string(), o = out.string();
  return {
      {"quantize", "--model_dir", d, "--output_dir", o, "--quant_scheme", "int4_wo_per_channel",
       "--exclude_unsupported"},
      {"quantize", "--model_dir", d, "--output_dir", o, "--quant_scheme", "fp8"},
      {"quantize", "--model_dir", d, "--output_dir", o, "--quant_scheme", "int4_wo_per_channel", "--quant_algo",
       "gptq", "--exclude_unsupported", "--num_calib_data", "1"},
      {"eval", d, "--task", "ppl", "--dataset", "tinystories", "--limit", "1"},
      {"inspect", d},
      {"validate", "--source", d, "--quantized", QLOOM_DEMO_MODEL_DIR},
  };
}

TEST(ConfigCheckCli, EveryCommandRejectsEachBadConfigWithTheSameMessage) {
  for (const BadConfig& c : bad_configs()) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value.dump());
    TempDir t("cfgcheck");
    const fs::path m = demo_with(t.path(), c);
    for (const auto& args : commands(m, t / "out")) {
      SCOPED_TRACE(args[0] + " " + args.back());
      const CommandResult r = run_qloom(args);
      EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
      EXPECT_NE(r.err.find((m / "config.json").string() + ": " + c.key), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
      EXPECT_FALSE(fs::exists(t / "out")) << "nothing is written";
    }
  }
}

TEST(ConfigCheckCli, ConvertAndServeRejectABadQuantizedConfig) {
  TempDir t("cfgcheck");
  const fs::path q = t / "q";
  const CommandResult made = run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir", q.string(),
                                        "--quant_scheme", "int4_wo_per_channel", "--exclude_unsupported"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto cfg = nlohmann::ordered_json::parse(read_file(q / "config.json"));
  cfg["rope_theta"] = -1;
  std::ofstream(q / "config.json") << cfg.dump(2);
  const std::string msg = "config field \"rope_theta\" = -1 must be a finite number > 0";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"convert", q.string(), "--to", "compressed-tensors", "--output_dir", (t / "ct").string()},
           {"convert", q.string(), "--to", "gguf", "--output", (t / "m.gguf").string()},
           {"serve", q.string(), "--port", "0", "--threads", "1"}}) {
    SCOPED_TRACE(args[0] + " " + args[3]);
    std::vector<std::string> argv = {"timeout", "60", QLOOM_CLI_PATH};  // serve would listen if it loaded
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult r = run_command(argv);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(msg), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(t / "ct"));
  EXPECT_FALSE(fs::exists(t / "m.gguf"));
}

TEST(ConfigCheckCli, GoodDemoConfigStillQuantizesWithRtn) {
  TempDir t("cfgcheck");
  const CommandResult r = run_qloom({"quantize", "--model_dir", QLOOM_DEMO_MODEL_DIR, "--output_dir",
                                     (t / "out").string(), "--quant_scheme", "int4_wo_per_channel",
                                     "--exclude_unsupported"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(t / "out" / "config.json"));
}

}  // namespace
}  // namespace qloom::test
