// The whole `qloom quantize` job on the demo model, checked against the bytes
// AMD Quark 0.12.post1 itself exported for the same model and scheme
// (tests/data/quark/quark_tensors.safetensors, see its README), plus its
// refusals.
#include "qloom/job/quantize_job.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "qloom/core/convert.h"

#include "qloom/core/error.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/weight_index.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

job::QuantizeOptions demo_options(const fs::path& out, const std::string& scheme) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.exclude_layers = {"*down_proj"};  // as generate.py did: in_features 172
  o.exclude_unsupported = true;       // int4 gate/up_proj: out_features 172
  return o;
}

class QuarkBytes : public ::testing::TestWithParam<const char*> {};

TEST_P(QuarkBytes, LayerZeroKProjMatchesQuarkExactly) {
  const std::string scheme = GetParam();
  test::TempDir tmp;
  const auto out = tmp.path() / "q";
  const job::QuantizeSummary s = job::quantize_model(demo_options(out, scheme));
  EXPECT_GT(s.layers_quantized, 0u);

  const auto golden = io::SafetensorsFile::open(fs::path(QLOOM_TEST_DATA_DIR) / "quark/quark_tensors.safetensors");
  const auto ours = io::WeightIndex::open(out);
  const std::string module = "model.layers.0.self_attn.k_proj";
  int compared = 0;
  for (const char* suffix : {".weight", ".weight_scale", ".weight_zero_point"}) {
    const std::string name = module + suffix;
    const io::TensorInfo* g = golden.find(scheme + "/" + name);
    const io::TensorInfo* q = ours.find(name);
    ASSERT_EQ(g == nullptr, q == nullptr) << name;
    if (g == nullptr) continue;
    EXPECT_EQ(g->dtype, q->dtype) << name;
    EXPECT_EQ(g->shape, q->shape) << name;
    const auto gv = golden.view(*g).data, qv = ours.view(name).data;
    ASSERT_EQ(gv.size(), qv.size()) << name;
    size_t diff = 0;
    for (size_t i = 0; i < gv.size(); ++i) diff += gv[i] != qv[i];
    EXPECT_EQ(diff, 0u) << name << ": " << diff << " of " << gv.size() << " bytes differ from Quark's";
    ++compared;
  }
  EXPECT_GE(compared, 2);
}

INSTANTIATE_TEST_SUITE_P(WeightSchemes, QuarkBytes,
                         ::testing::Values("int4_wo_32", "uint4_wo_32", "int4_wo_per_channel",
                                           "uint4_wo_per_channel", "ptpc_fp8", "mxfp4"));

TEST(QuantizeJob, RefusesWhatItCannotDoYet) {
  test::TempDir tmp;
  auto o = demo_options(tmp.path() / "q", "int4_wo_128");
  o.quant_algo = "autoround";  // a Quark algorithm without a qloom stage
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).item(), "--quant_algo");
  o.quant_algo = "gptq,rotation";  // rotation rotates the float model: it must come first
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).item(), "--quant_algo");
  o = demo_options(tmp.path() / "q", "int4_wo_128x");
  const Error e = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(e.remedy().find("int4_wo_128"), std::string::npos) << e.remedy();
  EXPECT_FALSE(fs::exists(tmp.path() / "q"));
}

// --quant_algo rotation: the rotated model is quantized (no scratch
// directory left behind), the tied lm_head is written, the norms are ones
// and algo_config lists rotation first (then the per-layer stages).
TEST(QuantizeJob, RotationRunsBeforeTheStages) {
  test::TempDir tmp;
  auto o = demo_options(tmp.path() / "q", "int4_wo_32");
  o.quant_algo = "rotation,gptq";
  o.num_calib_data = 4;
  o.seq_len = 32;
  (void)job::quantize_model(o);
  const io::ModelDir q = io::ModelDir::open(o.output_dir);
  const auto& algos = q.config()["quantization_config"]["algo_config"];
  ASSERT_EQ(algos.size(), 2u);
  EXPECT_EQ(algos[0]["name"], "rotation");
  EXPECT_EQ(algos[1]["name"], "gptq");
  EXPECT_NE(q.weights().find("lm_head.weight"), nullptr);
  const io::TensorView n = q.weights().view("model.layers.1.post_attention_layernorm.weight");
  std::vector<float> f(n.numel());
  to_f32(n.dtype(), n.data.data(), f.data(), f.size());
  for (float v : f) EXPECT_EQ(v, 1.0f);
  for (const auto& e : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(e.path().filename().string().find(".qloom-rotated"), std::string::npos) << e.path();
}

TEST(QuantizeJob, UnsupportedShapesNameLayersUnlessExcluded) {
  test::TempDir tmp;
  auto o = demo_options(tmp.path() / "q", "mxfp4");
  o.exclude_layers.clear();
  o.exclude_unsupported = false;
  const Error e = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_NE(e.message().find("*.mlp.down_proj"), std::string::npos) << e.what();
  EXPECT_FALSE(fs::exists(o.output_dir));
  o.exclude_unsupported = true;
  const auto s = job::quantize_model(o);
  EXPECT_EQ(s.layers_excluded, 5u);
  EXPECT_EQ(s.layers_quantized, 30u);
  ASSERT_EQ(s.warnings.size(), 1u);
}

TEST(QuantizeJob, UnsupportedLayersEachGetTheirOwnReason) {
  // int4 g32 on the demo: gate/up_proj [172, 64] fail the int4 packing of
  // out_features, down_proj [64, 172] the group size; neither takes the other's.
  test::TempDir tmp;
  auto o = demo_options(tmp.path() / "q", "int4_wo_32");
  o.exclude_layers.clear();
  o.exclude_unsupported = false;
  const Error e = test::catch_error([&] { job::quantize_model(o); });
  const std::string m = e.message();
  EXPECT_NE(m.find("15 layer(s)"), std::string::npos) << m;
  const std::string pack = "int4 weights need out_features divisible by 8, got 172";
  const std::string group = "group size 32 does not divide in_features 172";
  EXPECT_NE(m.find("*.mlp.gate_proj x5 [172, 64]: " + pack), std::string::npos) << m;
  EXPECT_NE(m.find("*.mlp.up_proj x5 [172, 64]: " + pack), std::string::npos) << m;
  EXPECT_NE(m.find("*.mlp.down_proj x5 [64, 172]: " + group), std::string::npos) << m;
  EXPECT_EQ(m.find("gate_proj x5 [172, 64]: " + group), std::string::npos) << m;
  EXPECT_NE(e.remedy().find("'*.mlp.down_proj' '*.mlp.gate_proj' '*.mlp.up_proj'"), std::string::npos)
      << e.remedy();

  o.exclude_unsupported = true;
  const auto s = job::quantize_model(o);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("*.mlp.up_proj x5 [172, 64]: " + pack), std::string::npos) << s.warnings[0];
  EXPECT_NE(s.warnings[0].find("*.mlp.down_proj x5 [64, 172]: " + group), std::string::npos) << s.warnings[0];
}

TEST(QuantizeJob, ExcludePatternThatMatchesNothingWarnsWithNearMisses) {
  test::TempDir tmp;
  auto o = demo_options(tmp.path() / "q", "ptpc_fp8");
  o.exclude_layers = {"*q_prj"};
  const auto s = job::quantize_model(o);
  ASSERT_FALSE(s.warnings.empty());
  EXPECT_NE(s.warnings[0].find("q_proj"), std::string::npos) << s.warnings[0];
}

TEST(QuantizeJob, RefusesOutputInsideTheSourceAndExistingOutput) {
  test::TempDir tmp;
  auto o = demo_options(fs::path(QLOOM_DEMO_MODEL_DIR) / "quantized", "ptpc_fp8");
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).kind(), ErrorKind::kUsage);
  EXPECT_FALSE(fs::exists(o.output_dir));
  o = demo_options(tmp.path(), "ptpc_fp8");  // exists
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).kind(), ErrorKind::kUsage);
}

TEST(QuantizeJob, DeterministicOutput) {
  test::TempDir tmp;
  job::quantize_model(demo_options(tmp.path() / "a", "uint4_wo_32"));
  auto o = demo_options(tmp.path() / "b", "uint4_wo_32");
  o.threads = 1;
  job::quantize_model(o);
  for (const auto& e : fs::directory_iterator(tmp.path() / "a"))
    EXPECT_EQ(test::read_file(e.path()), test::read_file(tmp.path() / "b" / e.path().filename())) << e.path();
}

}  // namespace
}  // namespace qloom::exporter
