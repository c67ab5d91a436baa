// Step 5 on real qloom exports of the demo model, and on a corrupted copy.
#include "qloom/validate/numeric_check.h"

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace qloom::validate
