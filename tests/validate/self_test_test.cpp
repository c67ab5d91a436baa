// Tests for the validator self-test and the fake checkpoint writer it uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "qloom/core/error.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"
#include "qloom/validate/self_test.h"
#include "qloom/validate/validator.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "validate/validate_fixture.h"

namespace {

namespace fs = std::filesystem;
using namespace qloom::validate;
using qloom::test::TempDir;

TEST(SelfTest, EveryDefectIsCaughtByExactlyItsStep) {
  TempDir d("selftest");
  const ValidationReport r = run_validator_self_test(d / "scratch");
  EXPECT_TRUE(r.passed()) << render_markdown(r);
  ASSERT_EQ(r.steps.size(), 9u);
  for (const auto& c : r.steps) {
    EXPECT_EQ(c.status, StepResult::kOk) << c.title << ": " << c.summary;
    EXPECT_EQ(c.data["expected"], c.data["got"]) << c.title;
  }
  EXPECT_EQ(r.steps[0].summary, "steps 4, 1, 3, 2 all ok");
  EXPECT_EQ(r.steps[1].title, "tokenizer.json missing");
  EXPECT_EQ(r.steps[1].summary, "caught by step 1 only");
  EXPECT_EQ(r.step_label, "Case");
  // The scratch directory is cleaned up.
  EXPECT_TRUE(fs::is_empty(d / "scratch"));
}

TEST(SelfTest, ReportDoesNotDependOnTheScratchDirectory) {
  TempDir a("selftest-a"), b("selftest-b");
  EXPECT_EQ(render_markdown(run_validator_self_test(a.path())),
            render_markdown(run_validator_self_test(b / "deeper" / "still")));
}

TEST(SelfTestSource, IsAValidModelWithFixedBytes) {
  TempDir a("src-a"), b("src-b");
  write_self_test_source_model(a / "m");
  write_self_test_source_model(b / "m");
  const auto m = qloom::io::ModelDir::open(a / "m", /*open_weights=*/true);
  EXPECT_EQ(m.model_type(), "llama");
  EXPECT_EQ(m.weights().num_tensors(), 27u);  // embed, 2 x 12 per layer, norm, lm_head
  for (const auto& f : {"model.safetensors", "config.json", "tokenizer.json", "README.md"})
    EXPECT_EQ(qloom::test::read_file(a / "m" / f), qloom::test::read_file(b / "m" / f)) << f;
  EXPECT_EQ(qloom::test::catch_error([&] { write_self_test_source_model(a / "m"); }).kind(),
            qloom::ErrorKind::kUsage);
}

TEST(FakeQuarkCheckpoint, LooksLikeAQuarkFp8Export) {
  qloom::test::ValidateFixture f;
  const auto q = f.make("q");
  const auto m = qloom::io::ModelDir::open(q, /*open_weights=*/true);
  const auto& w = m.weights();
  const auto* wq = w.find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->dtype, qloom::DType::kF8_E4M3);
  EXPECT_EQ(wq->shape, (std::vector<uint64_t>{64, 64}));
  const auto* s = w.find("model.layers.0.self_attn.q_proj.weight_scale");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->dtype, qloom::DType::kBF16);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_NE(w.find("model.layers.0.self_attn.q_proj.input_scale"), nullptr);
  EXPECT_EQ(w.find("model.embed_tokens.weight")->dtype, qloom::DType::kBF16);
  EXPECT_EQ(w.num_tensors(), 47u + 2 * 35u);
  const auto& qc = m.config().at("quantization_config");
  EXPECT_EQ(qc.at("quant_method"), "quark");
  EXPECT_EQ(qc.at("global_quant_config").at("weight").at("dtype"), "fp8_e4m3");
  EXPECT_EQ(qc.at("exclude"), nlohmann::json::array({"lm_head"}));
  // Key order of the source config is kept; quantization_config comes last.
  const std::string text = qloom::test::read_file(q / "config.json");
  EXPECT_LT(text.find("\"architectures\""), text.find("\"model_type\""));
  EXPECT_LT(text.find("\"transformers_version\""), text.find("\"quantization_config\""));
  // Writing into an existing directory is refused.
  EXPECT_EQ(qloom::test::catch_error([&] { write_fake_quark_checkpoint(f.demo(), q); }).kind(),
            qloom::ErrorKind::kUsage);
}

}  // namespace
