// Issue 12 item 12: a config.json whose size fields contradict the tensors
// (copies of the demo model with one field changed) fails fast as bad input
// naming config.json, the field and the tensor evidence, in every command
// that reads the model — never "out of memory" or a hang.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLayersMsg = "config.json num_hidden_layers = 1000000000000 but the weights hold layers 0..4";

fs::path demo_with(const fs::path& where, const char* key, const nlohmann::json& value) {
  const fs::path dst = where / "model";
  fs::copy(QLOOM_DEMO_MODEL_DIR, dst, fs::copy_options::recursive);
  auto cfg = nlohmann::ordered_json::parse(read_file(dst / "config.json"));
  cfg[key] = value;
  std::ofstream(dst / "config.json") << cfg.dump(2);
  return dst;
}

// Runs qloom and checks it took under 30 s (the broken runs took an OOM or a hang).
CommandResult timed(const std::vector<std::string>& args) {
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = run_qloom(args);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  return r;
}

TEST(ConfigSizes, EvalFailsFastNamingLayers) {
  TempDir t("sizes");
  const fs::path m = demo_with(t.path(), "num_hidden_layers", 1000000000000LL);
  const CommandResult r = timed({"eval", m.string(), "--task", "ppl", "--dataset", "tinystories", "--limit", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(kLayersMsg), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << r.err;
}

TEST(ConfigSizes, QuantizeFp8FailsFast) {
  TempDir t("sizes");
  const fs::path m = demo_with(t.path(), "num_hidden_layers", 1000000000000LL);
  const CommandResult r = timed({"quantize", "--model_dir", m.string(), "--output_dir", (t / "out").string(),
                                 "--quant_scheme", "fp8"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(kLayersMsg), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(ConfigSizes, ValidateReportsTheMismatch) {
  TempDir t("sizes");
  const fs::path m = demo_with(t.path(), "num_hidden_layers", 1000000000000LL);
  const CommandResult r = timed({"validate", "--source", m.string(), "--quantized", QLOOM_DEMO_MODEL_DIR});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find(kLayersMsg), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(ConfigSizes, InspectNamesEachField) {
  const struct {
    const char* key;
    long long value;
    const char* evidence;
  } cases[] = {
      {"num_hidden_layers", 1000000000000LL, kLayersMsg},
      {"num_hidden_layers", 4, "config.json num_hidden_layers = 4 but the weights hold layers 0..4"},
      {"hidden_size", 128, "config.json hidden_size = 128 but tensor model.embed_tokens.weight has 64 columns"},
      {"vocab_size", 100000, "config.json vocab_size = 100000 but tensor model.embed_tokens.weight has 512 rows"},
      {"intermediate_size", 4096, "config.json intermediate_size = 4096 but tensor model.layers.0.mlp.gate_proj"},
      {"num_attention_heads", 16, "config.json head_dim = 8 but model.layers.0.self_attn.q_proj.weight has 64 rows"},
      {"num_key_value_heads", 8, "config.json num_key_value_heads = 8 but model.layers.0.self_attn.k_proj.weight"},
      {"head_dim", 16, "config.json head_dim = 16 but model.layers.0.self_attn.q_proj.weight has 64 rows"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    TempDir t("sizes");
    const fs::path m = demo_with(t.path(), c.key, c.value);
    const CommandResult r = timed({"inspect", m.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.evidence), std::string::npos) << r.err;
  }
}

TEST(ConfigSizes, RunStopsWithModelLoadFailed) {
  TempDir t("sizes");
  const fs::path m = demo_with(t.path(), "num_hidden_layers", 1000000000000LL);
  const CommandResult r = timed({"run", "Quantize the model at " + m.string() + " to ptpc_fp8 without kv cache "
                                 "quantization", "--interactive", "off", "--workspace", (t / "ws").string()});
  EXPECT_NE(r.out.find("exec_model_load_failed"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find(kLayersMsg), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qloom::test
