// Step 5 on AWQ / SmoothQuant exports (validate/folded_scales.h): the folded
// per-channel scales are taken out before comparing with the source, so a
// correct export passes; a corrupted folded norm (exempt from step 2's byte
// identity) or a corrupted quantized weight still fails step 5.
#include "qloom/validate/folded_scales.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/float_codec.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/validator.h"
#include "support/temp_dir.h"

namespace qloom::validate {
namespace {

namespace fs = std::filesystem;

// ---- fold_check on synthetic weights -----------------------------------------

std::vector<float> ramp(uint64_t n, float a) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = a * std::sin(0.7f * static_cast<float>(i) + 0.3f);
  return v;
}

TEST(FoldCheck, ExactFoldMatchesAndAWrongScaleDoesNot) {
  const uint64_t rows = 16, cols = 8;
  const std::vector<float> src = ramp(rows * cols, 1.0f);
  FoldTransform t;
  t.col = {1, 2, 0.5, 4, 1, 1, 3, 0.25};
  t.col_exact.assign(cols, 1);  // as read from a norm
  t.row.assign(rows, 1.0);
  t.row[3] = 2.0;
  std::vector<float> folded = src;
  apply_fold(t, folded, rows, cols);
  EXPECT_FLOAT_EQ(folded[3 * cols + 1], src[3 * cols + 1] / 2.0f * 2.0f);
  // A small "quantization" error on top.
  std::vector<float> deq = folded;
  for (size_t i = 0; i < deq.size(); ++i) deq[i] += 1e-3f * std::cos(static_cast<float>(i));
  const FoldFit ok = fold_check(t, src, deq, rows, cols);
  EXPECT_GT(ok.expected_db, 40.0);
  EXPECT_TRUE(ok.mismatched.empty());
  EXPECT_NEAR(ok.worst_gain, 1.0, 0.01);
  // The plan reads a scale 4x off for column 3 (a corrupted folded norm).
  FoldTransform bad = t;
  bad.col[3] *= 4.0;
  const FoldFit b = fold_check(bad, src, deq, rows, cols);
  EXPECT_EQ(b.mismatched, (std::vector<uint64_t>{3}));
  EXPECT_NEAR(b.worst_gain, 0.25, 0.01);
  EXPECT_LT(b.expected_db, ok.expected_db - 20.0);
  // A fitted (not exactly read) column is not judged by its gain.
  bad.col_exact[3] = 0;
  EXPECT_TRUE(fold_check(bad, src, deq, rows, cols).mismatched.empty());
  // A wrong row scale shows in the SQNR (judged against the floor).
  FoldTransform bad_row = t;
  bad_row.row[3] = 8.0;
  EXPECT_LT(fold_check(bad_row, src, deq, rows, cols).expected_db, ok.expected_db - 20.0);
  // Columns quantized mostly to zero are not judged.
  std::vector<float> zeroed = deq;
  for (uint64_t i = 0; i < rows; ++i)
    if (i % 4) zeroed[i * cols + 3] = 0.0f;
  EXPECT_TRUE(fold_check(bad, src, zeroed, rows, cols).mismatched.empty());
}

// ---- on real exports ---------------------------------------------------------

fs::path export_demo(const fs::path& out, const std::string& scheme, const std::string& algo) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.exclude_unsupported = true;
  o.quant_algo = algo;
  o.num_calib_data = 16;
  o.seq_len = 64;
  o.threads = 2;
  job::quantize_model(o);
  return out;
}

ValidationReport validate_q(const fs::path& q) {
  ValidateOptions vo;
  vo.numeric_step = check_dequantized_weights;
  return validate_checkpoint(QLOOM_DEMO_MODEL_DIR, q, vo);
}

// Rewrites the bf16 tensor `name` in place: element i becomes f(i, old).
void edit_tensor_bf16(const fs::path& file, const std::string& name, const std::function<float(uint64_t, float)>& f) {
  uint64_t offset = 0, n = 0;
  {
    const auto sf = io::SafetensorsFile::open(file);
    const io::TensorInfo* t = sf.find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->dtype, DType::kBF16) << name;
    offset = sf.data_offset() + t->data_begin;
    n = t->numel();
  }
  std::vector<uint16_t> v(n);
  std::fstream s(file, std::ios::in | std::ios::out | std::ios::binary);
  s.seekg(static_cast<std::streamoff>(offset));
  s.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(2 * n));
  for (uint64_t i = 0; i < n; ++i) v[i] = float_to_bf16(f(i, bf16_to_float(v[i])));
  s.seekp(static_cast<std::streamoff>(offset));
  s.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(2 * n));
}

void edit_bf16(const fs::path& file, const std::string& name, uint64_t index, float (*f)(float)) {
  edit_tensor_bf16(file, name, [&](uint64_t i, float v) { return i == index ? f(v) : v; });
}

struct ExportCase {
  const char* scheme;
  const char* algo;
  const char* norm;  // a folded norm to corrupt
};

class FoldedExport : public ::testing::TestWithParam<ExportCase> {};

TEST_P(FoldedExport, PassesAndACorruptedFoldedNormFailsStepFive) {
  const ExportCase c = GetParam();
  test::TempDir tmp;
  const fs::path q = export_demo(tmp.path() / "q", c.scheme, c.algo);
  const ValidationReport good = validate_q(q);
  ASSERT_TRUE(good.passed()) << render_markdown(good);
  const StepResult* s5 = good.step(5);
  EXPECT_GT(s5->data["folded_scales_checked"].get<int>(), 0);
  EXPECT_EQ(s5->data["failed"].get<int>(), 0);
  EXPECT_GT(s5->data["folded_scale_entries"].get<int>(), 0);
  std::printf("[ folded ] %s %s: worst gain ratio of the exactly read channels %.4f (limit %.1f)\n", c.scheme, c.algo,
              s5->data["folded_scale_worst_gain_ratio"].get<double>(), kFoldRatioLimit);

  // One channel of a folded norm / 8: step 2 exempts the norm (its bytes
  // changed with the fold anyway), step 5 sees the fold no longer matches
  // the quantized weights reading it.
  edit_bf16(q / "model.safetensors", c.norm, 5, [](float v) { return v / 8.0f; });
  const ValidationReport bad = validate_q(q);
  EXPECT_FALSE(bad.passed());
  EXPECT_EQ(bad.step(2)->status, StepResult::kOk) << bad.step(2)->summary;
  EXPECT_EQ(bad.step(5)->status, StepResult::kFail) << bad.step(5)->summary;
  EXPECT_GT(bad.step(5)->data["failed"].get<int>(), 0);
  bool named = false;
  for (const auto& d : bad.step(5)->details) named = named || d.find("disagree") != std::string::npos;
  EXPECT_TRUE(named) << render_markdown(bad);
}

INSTANTIATE_TEST_SUITE_P(Demo, FoldedExport,
                         ::testing::Values(ExportCase{"int8", "smoothquant", "model.layers.1.post_attention_layernorm.weight"},
                                           ExportCase{"fp8", "smoothquant", "model.layers.3.input_layernorm.weight"},
                                           ExportCase{"int4_wo_32", "awq", "model.layers.2.input_layernorm.weight"}),
                         [](const auto& info) { return std::string(info.param.scheme) + "_" + info.param.algo; });

// Quark's own GQA fold of v_proj -> o_proj (awq/scale.py scale_fc_fc: one
// scale per KV head and head dim; qloom does not fold this group): a demo
// model whose layer 1 carries such a fold (powers of two, exact in bf16),
// quantized, with the entry in algo_config, validates against the original;
// v_proj rows scaled without the matching o_proj columns do not.
void fold_gqa_v_o(const fs::path& model, bool scale_o) {
  const fs::path file = model / "model.safetensors";
  const uint64_t rep = 2, hd = 8, hidden = 64;  // stories260K: 8 query heads, 4 KV heads of dim 8
  auto t = [](uint64_t r) { return std::ldexp(1.0f, static_cast<int>(r % 5) - 2); };  // 1/4 .. 4
  edit_tensor_bf16(file, "model.layers.1.self_attn.v_proj.weight",
                   [&](uint64_t i, float v) { return v / t(i / hidden); });
  if (!scale_o) return;
  edit_tensor_bf16(file, "model.layers.1.self_attn.o_proj.weight", [&](uint64_t i, float v) {
    const uint64_t j = i % hidden, h = j / hd, d = j % hd;
    return v * t((h / rep) * hd + d);
  });
}

ValidationReport validate_gqa_fold(const test::TempDir& tmp, bool scale_o) {
  const fs::path model = tmp.path() / (scale_o ? "folded" : "broken");
  fs::copy(QLOOM_DEMO_MODEL_DIR, model, fs::copy_options::recursive);
  fold_gqa_v_o(model, scale_o);
  job::QuantizeOptions o;
  o.model_dir = model;
  o.output_dir = tmp.path() / (scale_o ? "q_folded" : "q_broken");
  o.quant_scheme = "int8";
  o.num_calib_data = 4;
  o.seq_len = 32;
  o.threads = 2;
  job::quantize_model(o);
  const fs::path cfg = o.output_dir / "config.json";
  std::ifstream in(cfg);
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  j["quantization_config"]["algo_config"] = nlohmann::json::array(
      {{{"name", "awq"},
        {"scaling_layers", {{{"prev_op", "self_attn.v_proj"}, {"layers", {"self_attn.o_proj"}}, {"inp", "self_attn.o_proj"}}}},
        {"model_decoder_layers", "model.layers"}}});
  std::ofstream(cfg) << j.dump(2);
  return validate_q(o.output_dir);
}

TEST(FoldedExport, QuarksGqaValueOutputFoldValidates) {
  test::TempDir tmp;
  const ValidationReport good = validate_gqa_fold(tmp, true);
  EXPECT_TRUE(good.passed()) << render_markdown(good);
  EXPECT_EQ(good.step(5)->status, StepResult::kOk) << good.step(5)->summary;
  EXPECT_GT(good.step(5)->data["folded_scales_checked"].get<int>(), 0);
  const ValidationReport bad = validate_gqa_fold(tmp, false);
  EXPECT_EQ(bad.step(5)->status, StepResult::kFail) << bad.step(5)->summary;
}

TEST(FoldedExportCorruption, AFlippedScaleByteOfAFoldedLinearFailsStepFive) {
  test::TempDir tmp;
  const fs::path q = export_demo(tmp.path() / "q", "int4_wo_32", "awq");
  edit_bf16(q / "model.safetensors", "model.layers.1.self_attn.v_proj.weight_scale", 0,
            [](float v) { return v * 64.0f; });
  const ValidationReport rep = validate_q(q);
  EXPECT_FALSE(rep.passed());
  EXPECT_EQ(rep.step(5)->status, StepResult::kFail) << rep.step(5)->summary;
  EXPECT_EQ(rep.step(5)->data["failed"].get<int>(), 1);
}

}  // namespace
}  // namespace qloom::validate
