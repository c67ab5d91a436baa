// Issue 30 item 5: non-finite statistics are errors naming the layer.
// fp8 static calibration of a model whose norm weights are NaN exited 0 with
// every input_scale at the 1.19e-7 floor; `eval` of a model with an inf
// weight printed `PPL = -nan` and exited 0. Copies of the demo model with
// one tensor poisoned (bf16 NaN / inf written into model.safetensors).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom::test {
namespace {

namespace fs = std::filesystem;

constexpr uint16_t kBf16NaN = 0x7FC0, kBf16Inf = 0x7F80;

// The demo model with every element of `tensor` (`count` < 0) or its first
// `count` elements set to the bf16 value `bits`.
fs::path demo_poisoned(const fs::path& where, const std::string& tensor, uint16_t bits, int64_t count = -1) {
  const fs::path dst = where / "model";
  fs::copy(QLOOM_DEMO_MODEL_DIR, dst, fs::copy_options::recursive);
  const fs::path st = dst / "model.safetensors";
  std::string bytes = read_file(st);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  const auto& off = header.at(tensor).at("data_offsets");
  const size_t begin = 8 + n + off[0].get<size_t>(), end = 8 + n + off[1].get<size_t>();
  const size_t last = count < 0 ? end : std::min(end, begin + 2 * size_t(count));
  for (size_t i = begin; i < last; i += 2) std::memcpy(&bytes[i], &bits, 2);
  std::ofstream(st, std::ios::binary | std::ios::trunc) << bytes;
  return dst;
}

TEST(NonFiniteCli, Fp8StaticCalibrationOnNanNormNamesTheLayer) {
  TempDir t("nonfinite");
  const fs::path m = demo_poisoned(t.path(), "model.layers.1.input_layernorm.weight", kBf16NaN);
  const CommandResult r = run_qloom({"quantize", "--model_dir", m.string(), "--output_dir", (t / "out").string(),
                                     "--quant_scheme", "fp8", "--num_calib_data", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("calibration: the input of model.layers.1.self_attn."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds NaN or inf, so no static scale can be computed for it"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(NonFiniteCli, GptqOnNanNormNamesTheLayer) {
  TempDir t("nonfinite");
  // (The demo's MLP linears do not fit int4 per-channel and stay unquantized:
  // the attention's Hessians are the first statistics after the NaN norm.)
  const fs::path m = demo_poisoned(t.path(), "model.layers.1.input_layernorm.weight", kBf16NaN);
  const CommandResult r = run_qloom({"quantize", "--model_dir", m.string(), "--output_dir", (t / "out").string(),
                                     "--quant_scheme", "int4_wo_per_channel", "--exclude_unsupported",
                                     "--quant_algo", "gptq", "--num_calib_data", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("calibration: the GPTQ Hessian of model.layers.1.self_attn."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds NaN or inf"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(t / "out"));
}

TEST(NonFiniteCli, EvalPplOfAnInfWeightNamesTheLayer) {
  TempDir t("nonfinite");
  const fs::path m = demo_poisoned(t.path(), "model.layers.2.mlp.down_proj.weight", kBf16Inf, 4);
  const CommandResult r = run_qloom({"eval", m.string(), "--task", "ppl", "--dataset", "tinystories", "--limit", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("eval ppl: the model's logits are NaN or inf; the values first turn non-finite at the "
                       "output of model.layers.2.mlp.down_proj"),
            std::string::npos)
      << r.err;
}

TEST(NonFiniteCli, EvalKldOfAnInfWeightNamesTheLayer) {
  TempDir t("nonfinite");
  const fs::path m = demo_poisoned(t.path(), "model.layers.3.self_attn.v_proj.weight", kBf16Inf, 1);
  const CommandResult r = run_qloom({"eval", m.string(), "--task", "kld", "--source", QLOOM_DEMO_MODEL_DIR,
                                     "--dataset", "tinystories", "--limit", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("eval kld: the model's logits are NaN or inf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model.layers.3.self_attn.v_proj"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace qloom::test
