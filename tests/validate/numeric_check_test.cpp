// Step 5 on real qloom exports of the demo model, and on a corrupted copy.
#include "qloom/validate/numeric_check.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "qloom/export/quantize_job.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/validate/validator.h"
#include "support/temp_dir.h"

namespace qloom::validate {
namespace {

namespace fs = std::filesystem;

fs::path export_demo(const fs::path& out, const std::string& scheme) {
  exporter::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.exclude_unsupported = true;
  exporter::quantize_model(o);
  return out;
}

class NumericStepOnExports : public ::testing::TestWithParam<const char*> {};

TEST_P(NumericStepOnExports, QloomExportReproducesTheReferenceAndPassesEveryStep) {
  test::TempDir tmp;
  const auto q = export_demo(tmp.path() / "q", GetParam());
  ValidateOptions vo;
  vo.numeric_step = check_dequantized_weights;
  const ValidationReport rep = validate_checkpoint(QLOOM_DEMO_MODEL_DIR, q, vo);
  EXPECT_TRUE(rep.passed()) << render_markdown(rep);
  const StepResult* s5 = rep.step(5);
  ASSERT_NE(s5, nullptr);
  EXPECT_EQ(s5->status, StepResult::kOk) << s5->summary;
  EXPECT_EQ(s5->data["checked"], s5->data["reproduced_rtn"]);
  EXPECT_GT(s5->data["checked"].get<int>(), 0);
  // The engine loaded the checkpoint and scored a window close to the source.
  EXPECT_GT(s5->data["engine_window_tokens"].get<int>(), 16);
  EXPECT_GT(s5->data["engine_top1_agreement"].get<double>(), 0.5);
  EXPECT_LT(s5->data["engine_kld_mean"].get<double>(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Schemes, NumericStepOnExports,
                         ::testing::Values("int4_wo_32", "uint4_wo_64", "uint4_wo_per_channel",
                                           "ptpc_fp8", "mxfp4_weight_only"));

TEST(NumericStepCorruption, AFlippedScaleByteFailsStepFiveOnly) {
  test::TempDir tmp;
  const auto q = export_demo(tmp.path() / "q", "int4_wo_32");
  // Flip a byte inside layer 0's q_proj weight_scale in place.
  const fs::path file = q / "model.safetensors";
  uint64_t offset = 0;
  {
    const auto f = io::SafetensorsFile::open(file);
    const io::TensorInfo* t = f.find("model.layers.0.self_attn.q_proj.weight_scale");
    ASSERT_NE(t, nullptr);
    offset = f.data_offset() + t->data_begin + 1;  // high byte of the first bf16 scale
  }
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  f.close();

  ValidateOptions vo;
  vo.numeric_step = check_dequantized_weights;
  const ValidationReport rep = validate_checkpoint(QLOOM_DEMO_MODEL_DIR, q, vo);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.step(5)->status, StepResult::kFail) << rep.step(5)->summary;
  for (int n : {4, 1, 3, 2}) EXPECT_EQ(rep.step(n)->status, StepResult::kOk) << n;
  EXPECT_EQ(rep.step(5)->data["failed"], 1);
}

// A config that promises static input scales the checkpoint lacks: the
// weights still dequantize, but the engine cannot load it as it would
// compute, and step 5 says so.
TEST(NumericStepCorruption, EngineLoadFailureFailsStepFive) {
  test::TempDir tmp;
  const auto q = export_demo(tmp.path() / "q", "ptpc_fp8");
  const fs::path cfg = q / "config.json";
  std::ifstream in(cfg);
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  j["quantization_config"]["global_quant_config"]["input_tensors"]["is_dynamic"] = false;
  j["quantization_config"]["global_quant_config"]["input_tensors"]["qscheme"] = "per_tensor";
  j["quantization_config"]["global_quant_config"]["input_tensors"]["ch_axis"] = nullptr;
  std::ofstream(cfg) << j.dump(2);

  const StepResult s5 = check_dequantized_weights(io::ModelDir::open(QLOOM_DEMO_MODEL_DIR), io::ModelDir::open(q));
  EXPECT_EQ(s5.status, StepResult::kFail) << s5.summary;
  EXPECT_NE(s5.summary.find("engine: FAIL"), std::string::npos) << s5.summary;
  EXPECT_NE(s5.summary.find("input_scale"), std::string::npos) << s5.summary;
}

}  // namespace
}  // namespace qloom::validate
