// The native runtime against the simulate runtime on SmolLM2-135M (issue 14):
// per scheme, qloom quantize (RTN, calibrated static scales where the scheme
// has them), then the checkpoint loaded twice in-process — simulate (weights
// dequantized, activation / KV quantization fake-quantized: Quark's
// arithmetic) and native (the engine's int8 / fp8 / bf16-dot / packed 4-bit
// kernels, fp8 KV cache) — and one 256-token wikitext-2 window scored by
// both and by the bf16 source (fp32 compute).
//
// Weight-only 4-bit schemes must agree BIT FOR BIT: their kernels keep the
// fp32 engine's summation order on the same dequantized values.
// Schemes with quantized activations cannot: native multiplies the scales in
// once per output (exact integer / bf16 products) where simulate rounds every
// x·s and w·s product, a ~1e-7 relative difference per output; at the next
// layer's activation quantizer that flips the odd code sitting on a rounding
// boundary (a code step is 2^-4 relative for fp8), and the flips multiply
// through 30 layers. Measured when this test was written: simulate against
// itself with 1-ulp noise on a quarter of the linear inputs gives KL 0.014
// for fp8, the same order as native vs simulate. A fixed bound like KL 1e-4
// cannot hold; what must hold is that native is as faithful to the source as
// simulate — another sample of the same quantization noise:
//   |KL(src||native) - KL(src||simulate)| <= 15% of KL(src||simulate),
//   KL(simulate||native) <= KL(src||simulate), and
//   top-1 agreement with the source within 3 points of simulate's.
// Native is also run at 1 and 2 threads: the logits must be byte-identical.
// The printed lines are the closing note's table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "qloom/eval/checkpoint_runtime.h"
#include "qloom/eval/datasets.h"
#include "qloom/text/tokenizer.h"
#include "real/real_model.h"

namespace qloom {
namespace {

struct NativeCase {
  const char* name;
  std::vector<std::string> args;
  bool bitwise;  // weight-only 4-bit: native == simulate exactly
};

void PrintTo(const NativeCase& c, std::ostream* os) { *os << c.name; }

const NativeCase kCases[] = {
    {"fp8", {"--quant_scheme", "fp8"}, false},
    {"fp8_kv_fp8", {"--quant_scheme", "fp8", "--kv_cache_dtype", "fp8"}, false},
    {"ptpc_fp8", {"--quant_scheme", "ptpc_fp8"}, false},
    {"int8", {"--quant_scheme", "int8"}, false},
    {"int4_wo_64", {"--quant_scheme", "int4_wo_64"}, true},
    {"int4_wo_per_channel", {"--quant_scheme", "int4_wo_per_channel"}, true},
    {"uint4_wo_32", {"--quant_scheme", "uint4_wo_32"}, true},
    {"mxfp4_weight_only", {"--quant_scheme", "mxfp4_weight_only"}, true},
};

std::vector<int32_t> window(const std::filesystem::path& model, size_t n) {
  const text::Tokenizer tok = text::Tokenizer::load(model);
  std::vector<int32_t> ids = tok.encode(eval::load_text_dataset("wikitext2").text.substr(0, 8000), true);
  ids.resize(std::min(ids.size(), n));
  return ids;
}

struct NativeRun {
  std::vector<float> logits;
  size_t native_linears = 0;
  bool fp8_kv = false;
};

NativeRun run(const std::filesystem::path& dir, exporter::Runtime rt, unsigned threads, const std::vector<int32_t>& ids) {
  engine::LoadOptions o;
  o.threads = threads;
  exporter::LoadedModel m = exporter::load_for_eval(dir, o, rt);
  auto cache = m.model->new_cache(static_cast<int64_t>(ids.size()));
  const auto& h = m.runtime.hooks;
  const bool hooked = static_cast<bool>(h.linear_input) || static_cast<bool>(h.linear_output);
  NativeRun r;
  r.logits = m.model->forward(ids, *cache, false, hooked ? &h : nullptr);
  r.native_linears = m.runtime.native_linears;
  r.fp8_kv = !m.runtime.kv_cache_fp8_scales.empty();
  return r;
}

struct Agreement {
  double kld_mean = 0, kld_max = 0, top1 = 0;
};

// KL(p || q) per position of two [T, V] logit matrices, in double.
Agreement compare(const std::vector<float>& p, const std::vector<float>& q, int64_t vocab) {
  Agreement a;
  const int64_t T = static_cast<int64_t>(p.size()) / vocab;
  for (int64_t t = 0; t < T; ++t) {
    const float* x = p.data() + t * vocab;
    const float* y = q.data() + t * vocab;
    const double mx = *std::max_element(x, x + vocab), my = *std::max_element(y, y + vocab);
    double sx = 0, sy = 0;
    for (int64_t v = 0; v < vocab; ++v) sx += std::exp(x[v] - mx), sy += std::exp(y[v] - my);
    const double lx = mx + std::log(sx), ly = my + std::log(sy);
    double kl = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double lp = x[v] - lx, lq = y[v] - ly;
      kl += std::exp(lp) * (lp - lq);
    }
    a.kld_mean += kl / static_cast<double>(T);
    a.kld_max = std::max(a.kld_max, kl);
    a.top1 += (std::max_element(x, x + vocab) - x == std::max_element(y, y + vocab) - y) ? 1.0 / T : 0.0;
  }
  return a;
}

class NativeReal : public ::testing::TestWithParam<NativeCase> {};

TEST_P(NativeReal, NativeAgreesWithSimulate) {
  const NativeCase& c = GetParam();
  const auto src = test::real_model_dir();
  // The checkpoint the scheme test (schemes_real_test.cpp) reads too.
  const auto out = test::shared_checkpoint(test::real_quantize_args(c.args, 16));
  ASSERT_FALSE(out.empty());

  const std::vector<int32_t> ids = window(src, 256);
  const NativeRun sim = run(out, exporter::Runtime::kSimulate, 2, ids);
  const NativeRun nat = run(out, exporter::Runtime::kNative, 2, ids);
  EXPECT_EQ(sim.native_linears, 0u);
  EXPECT_EQ(nat.native_linears, 210u) << "every quantized linear of SmolLM2 (30 layers x 7) must run natively";
  EXPECT_EQ(nat.fp8_kv, std::string(c.name) == "fp8_kv_fp8");
  ASSERT_EQ(sim.logits.size(), nat.logits.size());
  const int64_t vocab = static_cast<int64_t>(sim.logits.size() / ids.size());
  const Agreement a = compare(sim.logits, nat.logits, vocab);
  const std::vector<float> ref = run(src, exporter::Runtime::kSimulate, 2, ids).logits;
  const Agreement qs = compare(ref, sim.logits, vocab), qn = compare(ref, nat.logits, vocab);
  std::printf("[ real ] native %-20s vs simulate: kld %.3g top1 %.4f | vs source: simulate kld %.4f top1 %.4f, "
              "native kld %.4f top1 %.4f%s\n",
              c.name, a.kld_mean, a.top1, qs.kld_mean, qs.top1, qn.kld_mean, qn.top1,
              c.bitwise ? " (bitwise case)" : "");
  if (c.bitwise) {
    EXPECT_EQ(std::memcmp(sim.logits.data(), nat.logits.data(), sim.logits.size() * sizeof(float)), 0)
        << "weight-only 4-bit native logits must equal simulate's bit for bit";
  } else {
    EXPECT_LE(std::fabs(qn.kld_mean - qs.kld_mean), 0.15 * qs.kld_mean);
    EXPECT_LE(a.kld_mean, qs.kld_mean);
    EXPECT_GE(qn.top1, qs.top1 - 0.03);
  }

  const NativeRun one = run(out, exporter::Runtime::kNative, 1, ids);
  EXPECT_EQ(std::memcmp(one.logits.data(), nat.logits.data(), nat.logits.size() * sizeof(float)), 0)
      << "native logits must not depend on the thread count";
}

INSTANTIATE_TEST_SUITE_P(Schemes, NativeReal, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<NativeCase>& i) { return std::string(i.param.name); });

// --compute bf16 on the bf16 source: activations rounded to bf16 on the bf16
// dot kernel, against the exact fp32 path. Bound: KL <= 1e-3 mean (bf16
// activation rounding is ~2^-9 relative per element, larger than the
// quantized schemes' native-vs-simulate differences but far below int8's noise).
TEST(NativeRealBf16, ComputeBf16AgreesWithF32) {
  const auto src = test::real_model_dir();
  const std::vector<int32_t> ids = window(src, 256);
  auto logits = [&](engine::LoadOptions::Compute c, unsigned threads) {
    engine::LoadOptions o;
    o.threads = threads;
    o.compute = c;
    exporter::LoadedModel m = exporter::load_for_eval(src, o);
    auto cache = m.model->new_cache(static_cast<int64_t>(ids.size()));
    return m.model->forward(ids, *cache, false, nullptr);
  };
  const std::vector<float> f32 = logits(engine::LoadOptions::Compute::kF32, 2);
  const std::vector<float> bf16 = logits(engine::LoadOptions::Compute::kBF16, 2);
  const Agreement a = compare(f32, bf16, static_cast<int64_t>(f32.size() / ids.size()));
  std::printf("[ real ] compute bf16 vs f32: kld_mean %.3g kld_max %.3g top1 %.4f\n", a.kld_mean, a.kld_max, a.top1);
  EXPECT_LE(a.kld_mean, 1e-3);
  EXPECT_GE(a.top1, 0.97);
  const std::vector<float> one = logits(engine::LoadOptions::Compute::kBF16, 1);
  EXPECT_EQ(std::memcmp(one.data(), bf16.data(), bf16.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace qloom
