// The checkpoint runtime's native mode (--runtime native) on the demo model:
// which Quark specs go to a native kernel (native_format), how many linears
// a checkpoint puts there, the fp8 KV cache taken from k_proj / v_proj's
// output scales, the fallback of specs without a kernel, and logits close to
// the simulate runtime's (the SmolLM2 tier, tests/real/native_real_test.cpp,
// holds the tight per-scheme bounds).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/export/native_linear.h"
#include "qloom/job/quantize_job.h"
#include "qloom/quant/scheme_registry.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

quant::LayerQuantSpec scheme(const std::string& name) {
  const quant::SchemeDef* s = quant::find_scheme(name);
  EXPECT_NE(s, nullptr) << name;
  return s ? s->linear : quant::LayerQuantSpec{};
}

TEST(NativeFormat, MapsEachFirstWaveSchemeToItsKernelFamily) {
  using engine::QActFormat;
  using engine::QWeightFormat;
  struct Want {
    const char* scheme;
    QWeightFormat w;
    QActFormat a;
    int64_t group;  // for in = 256
  };
  const Want wants[] = {
      {"int8", QWeightFormat::kInt8, QActFormat::kInt8PerTensor, 0},
      {"fp8", QWeightFormat::kFp8E4M3, QActFormat::kFp8PerTensor, 0},
      {"ptpc_fp8", QWeightFormat::kFp8E4M3, QActFormat::kFp8PerToken, 256},
      {"int4_wo_64", QWeightFormat::kInt4, QActFormat::kF32, 64},
      {"int4_wo_per_channel", QWeightFormat::kInt4, QActFormat::kF32, 256},
      {"uint4_wo_32", QWeightFormat::kUInt4, QActFormat::kF32, 32},
      {"mxfp4_weight_only", QWeightFormat::kMxfp4, QActFormat::kF32, 32},
  };
  for (const Want& w : wants) {
    const auto f = native_format(scheme(w.scheme), 256);
    if (!engine::quant_linear_supported(w.w, w.a, w.group, 256)) {
      EXPECT_FALSE(f.has_value()) << w.scheme << ": no kernel built for it, so no native format";
      continue;
    }
    ASSERT_TRUE(f.has_value()) << w.scheme;
    EXPECT_EQ(f->weight, w.w) << w.scheme;
    EXPECT_EQ(f->act, w.a) << w.scheme;
    EXPECT_EQ(f->group, w.group) << w.scheme;
  }
  // MX fp4 activations have no native kernel: that linear stays simulated.
  EXPECT_FALSE(native_format(scheme("mxfp4"), 256).has_value());
  // Nor does an asymmetric int8 input.
  quant::LayerQuantSpec asym = scheme("int8");
  asym.input->symmetric = false;
  EXPECT_FALSE(native_format(asym, 256).has_value());
}

TEST(NativeLinearData, StaticInputNeedsASymmetricScale) {
  NativeFormat f{engine::QWeightFormat::kInt8, engine::QActFormat::kInt8PerTensor, 0};
  quant::QuantizedTensor t;
  t.shape = {2, 4};
  t.codes.assign(8, 1);
  t.scales = {0.5f};
  EXPECT_THROW(native_linear_data("m", f, t, std::nullopt), Error);
  EXPECT_THROW(native_linear_data("m", f, t, quant::StaticQParams{0.1f, 3}), Error);
  const engine::QuantLinearData d = native_linear_data("m", f, t, quant::StaticQParams{0.1f, 0});
  EXPECT_EQ(d.act_scale, 0.1f);
  EXPECT_EQ(d.out, 2);
  EXPECT_EQ(d.in, 4);
  EXPECT_EQ(d.name, "m");
}

std::filesystem::path quantize(const test::TempDir& tmp, const std::string& scheme, bool kv_fp8) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = tmp / (scheme + (kv_fp8 ? "_kv" : ""));
  o.quant_scheme = scheme;
  if (kv_fp8) o.kv_cache_dtype = "fp8";
  o.exclude_layers = {"*down_proj"};  // intermediate 172: no 32-group fits
  o.num_calib_data = 4;
  o.seq_len = 32;
  job::quantize_model(o);
  return o.output_dir;
}

std::vector<float> logits(const std::filesystem::path& dir, Runtime rt, CheckpointRuntime* info = nullptr) {
  engine::LoadOptions lo;
  lo.threads = 2;
  LoadedModel m = load_for_eval(dir, lo, rt);
  std::vector<int32_t> ids;
  for (int i = 0; i < 48; ++i) ids.push_back(1 + (i * 31) % 500);
  auto cache = m.model->new_cache(48);
  const auto& h = m.runtime.hooks;
  const bool hooked = static_cast<bool>(h.linear_input) || static_cast<bool>(h.linear_output);
  std::vector<float> out = m.model->forward(ids, *cache, false, hooked ? &h : nullptr);
  if (info) {
    info->description = m.runtime.description;
    info->native_linears = m.runtime.native_linears;
    info->kv_cache_fp8_scales = m.runtime.kv_cache_fp8_scales;
  }
  return out;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i] - b[i]) * (a[i] - b[i]), n += double(b[i]) * b[i];
  return std::sqrt(d / n);
}

TEST(NativeRuntime, Fp8WithAnFp8KvCacheRunsNatively) {
  test::TempDir tmp("native-rt");
  const auto dir = quantize(tmp, "fp8", true);
  CheckpointRuntime sim_info, nat_info;
  const std::vector<float> sim = logits(dir, Runtime::kSimulate, &sim_info);
  const std::vector<float> nat = logits(dir, Runtime::kNative, &nat_info);
  EXPECT_EQ(sim_info.native_linears, 0u);
  EXPECT_TRUE(sim_info.kv_cache_fp8_scales.empty());
  EXPECT_NE(sim_info.description.find("quark (simulate)"), std::string::npos) << sim_info.description;
  const bool kernel = engine::quant_linear_supported(engine::QWeightFormat::kFp8E4M3,
                                                     engine::QActFormat::kFp8PerTensor, 0, 64);
  EXPECT_EQ(nat_info.native_linears, kernel ? 30u : 0u) << nat_info.description;  // 5 layers x 6 (down excluded)
  ASSERT_EQ(nat_info.kv_cache_fp8_scales.size(), 5u) << nat_info.description;
  for (const auto& [k, v] : nat_info.kv_cache_fp8_scales) EXPECT_TRUE(k > 0 && v > 0);
  EXPECT_NE(nat_info.description.find("fp8 KV cache"), std::string::npos) << nat_info.description;
  EXPECT_EQ(nat_info.description.find("simulated output"), std::string::npos) << nat_info.description;
  // The native KV cache rounds K after RoPE (vLLM's order) where simulate
  // rounds k_proj's output: close, not equal. Bound: 5% relative on the toy
  // model's logits (fp8 steps are 2^-4 relative).
  EXPECT_LT(rel_diff(nat, sim), 0.05);
}

TEST(NativeRuntime, Mxfp4ActivationsFallBackToSimulate) {
  test::TempDir tmp("native-rt");
  const auto dir = quantize(tmp, "mxfp4", false);
  CheckpointRuntime info;
  const std::vector<float> nat = logits(dir, Runtime::kNative, &info);
  const std::vector<float> sim = logits(dir, Runtime::kSimulate);
  EXPECT_EQ(info.native_linears, 0u);
  EXPECT_NE(info.description.find("30 dequantized"), std::string::npos) << info.description;
  EXPECT_EQ(nat, sim) << "a fallen-back linear computes exactly as simulate";
}

TEST(NativeRuntime, ParseRuntime) {
  EXPECT_EQ(parse_runtime("native"), Runtime::kNative);
  EXPECT_EQ(parse_runtime("simulate"), Runtime::kSimulate);
  EXPECT_THROW(parse_runtime("fast"), Error);
  EXPECT_STREQ(runtime_name(Runtime::kNative), "native");
}

}  // namespace
}  // namespace qloom::exporter
