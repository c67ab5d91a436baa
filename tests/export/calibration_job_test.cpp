// Static activation and KV-cache scales (`qloom quantize --quant_scheme fp8 /
// int8 --kv_cache_dtype fp8`) on the demo model: every quantized linear gets
// an input_scale, k/v projections of one layer share one output_scale, and
// each scale is Quark's per-tensor min-max scale of the running amax that an
// independent pass over the same calibration samples observes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/convert.h"
#include "qloom/core/dtype.h"
#include "qloom/engine/model.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/calib_data.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

float scalar(const io::WeightIndex& w, const std::string& name) {
  const io::TensorView v = w.view(name);
  EXPECT_TRUE(v.shape().empty()) << name;
  float out = 0;
  to_f32(v.dtype(), v.data.data(), &out, 1);
  return out;
}

// amax of every linear's input and of k/v outputs, observed independently.
struct Observed {
  std::map<std::string, float> in, out;
  std::map<std::string, float> rotated_keys;  // by k_proj: the keys after RoPE
};
Observed observe(const quant::CalibrationData& data) {
  Observed o;
  auto model = engine::Model::load(QLOOM_DEMO_MODEL_DIR);
  engine::ForwardHooks hooks;
  auto amax = [](const float* x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
  };
  hooks.linear_input = [&](const engine::LinearSite& s, float* x, int64_t r, int64_t c) {
    o.in[s.module] = std::max(o.in[s.module], amax(x, r * c));
  };
  hooks.linear_output = [&](const engine::LinearSite& s, float* y, int64_t r, int64_t c) {
    o.out[s.module] = std::max(o.out[s.module], amax(y, r * c));
  };
  hooks.rotated_keys = [&](const engine::LinearSite& s, const float* k, int64_t r, int64_t c) {
    o.rotated_keys[s.module] = std::max(o.rotated_keys[s.module], amax(k, r * c));
  };
  for (const auto& sample : data.samples) {
    auto cache = model->new_cache(static_cast<int64_t>(sample.size()));
    (void)model->forward(sample, *cache, false, &hooks);
  }
  return o;
}

// fp8 weights and inputs with an fp8 KV cache, 6 calibration samples of 48 tokens.
job::QuantizeOptions fp8_kv_options(const fs::path& out) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = "fp8";
  o.kv_cache_dtype = "fp8";
  o.num_calib_data = 6;
  o.seq_len = 48;
  return o;
}

Observed observe_fp8_kv_samples() {
  quant::CalibrationRequest req;
  req.num_samples = 6;
  req.seq_len = 48;
  return observe(quant::load_calibration_data(QLOOM_DEMO_MODEL_DIR, req));
}

TEST(CalibrationJob, Fp8WithFp8KvCacheScalesAreQuarkMinMaxOfObservedAmax) {
  test::TempDir tmp;
  const job::QuantizeOptions o = fp8_kv_options(tmp.path() / "q");
  const job::QuantizeSummary s = job::quantize_model(o);
  ASSERT_TRUE(s.calibrated);
  EXPECT_EQ(s.calib_samples, 6u);
  EXPECT_GT(s.calib_tokens, 6u * 10u);
  // 5 layers x 7 linears input scales + 5 x (k, v) output scales.
  EXPECT_EQ(s.static_scales, 5u * 7u + 5u * 2u);

  const Observed obs = observe_fp8_kv_samples();
  const auto w = io::WeightIndex::open(o.output_dir);
  const quant::QuantSpec in_spec = *quant::get_scheme("fp8").linear.input;
  const quant::QuantSpec kv_spec = quant::kv_cache_spec("fp8");
  const DType bf16 = DType::kBF16;  // the demo model's dtype = the scales' dtype
  for (int layer = 0; layer < 5; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
      const std::string module = p + m;
      ASSERT_TRUE(obs.in.count(module)) << module;
      const float want = quant::static_scale_from_amax(obs.in.at(module), in_spec, bf16, bf16);
      EXPECT_EQ(scalar(w, module + ".input_scale"), want) << module;
    }
    const std::string k = p + "self_attn.k_proj", v = p + "self_attn.v_proj";
    const float ks = quant::static_scale_from_amax(obs.out.at(k), kv_spec, bf16, bf16);
    const float vs = quant::static_scale_from_amax(obs.out.at(v), kv_spec, bf16, bf16);
    EXPECT_EQ(scalar(w, k + ".output_scale"), std::max(ks, vs)) << k;
    EXPECT_EQ(scalar(w, v + ".output_scale"), std::max(ks, vs)) << v;
  }
  EXPECT_EQ(w.find("lm_head.input_scale"), nullptr);  // excluded by the llama template
}

// --kv_cache_post_rope (Quark's cache integration): k_proj's KV scale is
// observed on the keys after RoPE, v_proj's on its output, and each is
// written as its own scale (Quark's post-RoPE export overwrites the grouped
// k/v maximum with the cache quantizers' scales); the config says so.
TEST(CalibrationJob, PostRopeKvScalesAreObservedOnTheRotatedKeys) {
  test::TempDir tmp;
  job::QuantizeOptions o = fp8_kv_options(tmp.path() / "q");
  o.kv_cache_post_rope = true;
  (void)job::quantize_model(o);
  const Observed obs = observe_fp8_kv_samples();
  const auto w = io::WeightIndex::open(o.output_dir);
  const quant::QuantSpec kv_spec = quant::kv_cache_spec("fp8");
  const DType bf16 = DType::kBF16;
  size_t rope_changed = 0;
  for (int layer = 0; layer < 5; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const std::string k = p + "self_attn.k_proj", v = p + "self_attn.v_proj";
    ASSERT_TRUE(obs.rotated_keys.count(k)) << k;
    EXPECT_EQ(scalar(w, k + ".output_scale"),
              quant::static_scale_from_amax(obs.rotated_keys.at(k), kv_spec, bf16, bf16))
        << k;
    EXPECT_EQ(scalar(w, v + ".output_scale"), quant::static_scale_from_amax(obs.out.at(v), kv_spec, bf16, bf16)) << v;
    rope_changed += obs.rotated_keys.at(k) != obs.out.at(k);
  }
  EXPECT_GT(rope_changed, 0u) << "RoPE changes the keys' max in some layer";
  std::ifstream cfg_in(o.output_dir / "config.json");
  const nlohmann::json cfg = nlohmann::json::parse(cfg_in);
  EXPECT_EQ(cfg["quantization_config"]["kv_cache_post_rope"], true);
  o.kv_cache_dtype.clear();  // post-RoPE without a KV cache is a usage error
  o.output_dir = tmp.path() / "q2";
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).item(), "--kv_cache_post_rope");
  // phi3 fuses k and v into qkv_proj, whose one scale covers the values too.
  o = fp8_kv_options(tmp.path() / "q3");
  o.model_dir = fs::path(QLOOM_TEST_DATA_DIR) / "engine" / "phi3";
  o.kv_cache_post_rope = true;
  const Error e = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "model.layers.0.self_attn.qkv_proj");
  EXPECT_FALSE(fs::exists(o.output_dir));
}

TEST(CalibrationJob, Int8InputScalesAndMissingDatasetError) {
  test::TempDir tmp;
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = tmp.path() / "q";
  o.quant_scheme = "int8";
  o.num_calib_data = 2;
  o.seq_len = 32;
  const job::QuantizeSummary s = job::quantize_model(o);
  EXPECT_EQ(s.static_scales, 5u * 7u);
  const auto w = io::WeightIndex::open(o.output_dir);
  const io::TensorInfo* t = w.find("model.layers.0.mlp.down_proj.input_scale");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);  // Quark's symmetric per-tensor int8 scale promotes to f32

  o.output_dir = tmp.path() / "r";
  o.dataset = (tmp.path() / "nope.jsonl").string();
  const Error e = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_NE(std::string(e.what()).find("nope.jsonl"), std::string::npos) << e.what();
  EXPECT_FALSE(fs::exists(o.output_dir));

  // A Quark data set name with no local copy: an error naming where it was looked for.
  o.dataset = "pileval";
  ::setenv("QLOOM_DATA_DIR", tmp.path().c_str(), 1);
  const Error p = test::catch_error([&] { job::quantize_model(o); });
  EXPECT_EQ(p.kind(), ErrorKind::kNotFound);
  EXPECT_NE(p.file().find("calibration/pileval.jsonl"), std::string::npos) << p.what();
  EXPECT_FALSE(fs::exists(o.output_dir));
  // ... and with one, it calibrates on it.
  fs::create_directories(tmp.path() / "calibration");
  std::ofstream(tmp.path() / "calibration" / "pileval.jsonl")
      << "{\"text\": \"Once upon a time there was a little dog.\"}\n{\"text\": \"The sun was hot.\"}\n";
  const job::QuantizeSummary q = job::quantize_model(o);
  ::unsetenv("QLOOM_DATA_DIR");
  EXPECT_EQ(q.calib_samples, 2u);
  EXPECT_NE(q.calib_source.find("pileval.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace qloom::exporter
