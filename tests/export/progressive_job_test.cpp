// The whole quantize job with the progressive int4_fp8 scheme and the MX fp6
// schemes on the demo model: the checkpoint reads back through the simulate
// runtime exactly as the quantizer produced it, its config holds the weight
// as Quark's two-spec list, and the refusals (an algorithm, a second export
// format) name the reason.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/progressive.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/scheme_registry.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

job::QuantizeOptions demo(const fs::path& out, const std::string& scheme) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.exclude_layers = {"*down_proj"};  // in_features 172: no group of 32 / 64 divides it
  o.exclude_unsupported = true;       // int4: gate / up_proj out_features 172
  return o;
}

std::vector<float> source_weight(const io::ModelDir& src, const std::string& name) {
  const io::TensorView v = src.weights().view(name);
  std::vector<float> f(v.numel());
  to_f32(v.dtype(), v.data.data(), f.data(), f.size());
  return f;
}

std::vector<float> runtime_weight(const CheckpointRuntime& rt, const std::string& name) {
  const engine::HostTensor t = rt.weights->load(name);
  EXPECT_EQ(t.dtype, DType::kF32);
  std::vector<float> f(t.bytes.size() / sizeof(float));
  std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
  return f;
}

TEST(ProgressiveJob, Int4Fp8ReadsBackAsQuantized) {
  test::TempDir tmp;
  const auto out = tmp.path() / "q";
  const job::QuantizeSummary s = job::quantize_model(demo(out, "int4_fp8"));
  EXPECT_GT(s.layers_quantized, 0u);
  const io::ModelDir q = io::ModelDir::open(out);
  const auto& w = q.config()["quantization_config"]["global_quant_config"]["weight"];
  ASSERT_TRUE(w.is_array());
  EXPECT_EQ(w[0]["dtype"], "fp8_e4m3");
  EXPECT_EQ(w[1]["dtype"], "int4");
  const std::string m = "model.layers.0.self_attn.k_proj";
  for (const char* t : {".weight", ".weight_scale", ".weight_scale_2", ".weight_zero_point_2"})
    EXPECT_NE(q.weights().find(m + t), nullptr) << t;
  EXPECT_EQ(q.weights().find(m + ".weight_zero_point"), nullptr);

  const io::ModelDir src = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR);
  const auto x = source_weight(src, m + ".weight");
  const auto& info = *src.weights().find(m + ".weight");
  const quant::LayerQuantSpec& l = quant::get_scheme("int4_fp8").linear;
  const quant::ProgressiveTensor want =
      quant::quantize_progressive(x.data(), info.shape[0], info.shape[1], *l.weight, *l.weight_stage2, "w", DType::kBF16);
  const CheckpointRuntime rt = open_checkpoint_runtime(q);
  EXPECT_EQ(runtime_weight(rt, m + ".weight"), quant::dequantize_progressive(want));
  EXPECT_FALSE(rt.rows_independent);  // dynamic per-tensor fp8 activations
}

TEST(ProgressiveJob, Mxfp6ReadsBackAsQuantized) {
  for (const char* scheme : {"mxfp6_e2m3", "mxfp6_e3m2"}) {
    test::TempDir tmp;
    const auto out = tmp.path() / "q";
    (void)job::quantize_model(demo(out, scheme));
    const io::ModelDir q = io::ModelDir::open(out);
    const io::ModelDir src = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR);
    const std::string name = "model.layers.1.mlp.gate_proj.weight";
    const auto x = source_weight(src, name);
    const auto& info = *src.weights().find(name);
    const quant::QuantSpec& ws = *quant::get_scheme(scheme).linear.weight;
    const auto want = quant::dequantize(
        quant::quantize_weight(x.data(), info.shape[0], info.shape[1], ws, DType::kE8M0, "w", DType::kBF16));
    EXPECT_EQ(runtime_weight(open_checkpoint_runtime(q), name), want) << scheme;
  }
}

TEST(ProgressiveJob, RefusesAlgorithmsAndOtherFormats) {
  test::TempDir tmp;
  job::QuantizeOptions o = demo(tmp.path() / "a", "int4_fp8");
  o.quant_algo = "gptq";
  Error e = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "--quant_algo");
  EXPECT_NE(e.message().find("two-stage weight"), std::string::npos) << e.message();
  o = demo(tmp.path() / "b", "int4_fp8");
  o.model_export = {"hf_format", "gguf"};
  e = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_FALSE(fs::exists(tmp.path() / "b"));
}

}  // namespace
}  // namespace qloom::exporter
