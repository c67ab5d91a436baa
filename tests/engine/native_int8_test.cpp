// Native int8 x int8 linears (engine/native/int8_linear.cpp).
//
// What is checked, and how close:
//  - Activation codes and scales: every ISA's quantizer gives exactly the
//    codes / scales of quant::quantize_weight (what simulate's dynamic path
//    calls) and exactly the values of quant::fake_quantize_activation
//    (x' == code · scale, bitwise), static and dynamic, on random and
//    adversarial rows (ties, ±amax, zeros, -0, denormals, huge, ±inf, NaN).
//  - run() == run_ref() BITWISE (integer sums are exact; the epilogue is the
//    same three float operations), for odd shapes, both activation formats,
//    per-tensor / per-channel scales, bias or not, 1 / 2 / 3 threads, and
//    (CappedIsaSubprocesses) under QLOOM_MAX_ISA=avx2 and =scalar too, so
//    every kernel equals the same ISA-independent reference.
//  - run() against the simulate computation (x fake-quantized, W dequantized
//    by quant::dequantize_ref, then linear_ref in double or the fp32 linear()).
//    Both start from the same codes and scales, so only rounding differs.
//    With T = Σ_k |x'_k · w'_k| + |b| and u = 2^-24: simulate's x'·w' terms
//    are each off the exact quantized product by <= 2u (two dequantization
//    roundings), linear_ref sums them ~exactly and rounds once (u·|y|);
//    native converts the exact int32 sum (u), multiplies by s_x and s_w (2u)
//    and adds the bias (u·|y|). Hence |native - linear_ref| <= 8u·T (+ one
//    2^-149 per operation for gradual underflow). The fp32 linear() adds
//    its own summation error, 2·(in + 2)·u·T (the bound of gemm_test.cpp).
//  - Non-finite activations as simulate treats them: static: a NaN makes
//    its whole output row NaN, ±inf clamps to the extreme codes; dynamic:
//    any NaN / inf skips quantization for the whole call, and run() then
//    equals linear_ref(x, dequantize(W)) BITWISE.
//  - Saturated codes at the largest `in` (int32 sums at 2^30), zeros.
// The int8 speed table (vs fp32 linear()) is DISABLED_Speed (run with
// --gtest_also_run_disabled_tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/native/int8_act_quant.h"
#include "qloom/engine/native/int8_kernels.h"
#include "qloom/engine/native/int8_linear.h"
#include "qloom/engine/native/qlinear.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "support/subprocess.h"

#if defined(__x86_64__)
#include "qloom/core/x86_intrinsics.h"
#endif

namespace qloom::engine {
namespace {

using native::int8_quantize_row;
using native::int8_row_amax;
using native::int8_token_scale;

constexpr double kU = 0x1.0p-24;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

quant::QuantSpec act_spec(QActFormat act) {
  quant::QuantSpec s;
  s.dtype = quant::QDtype::kInt8;
  s.symmetric = true;
  s.is_dynamic = act == QActFormat::kInt8PerToken;
  s.qscheme = s.is_dynamic ? quant::QScheme::kPerChannel : quant::QScheme::kPerTensor;
  s.ch_axis = s.is_dynamic ? 1 : -1;  // Quark's per-token axis
  return s;
}

// What simulate does to x: fake quantization in place.
void fake_quant(QActFormat act, float act_scale, std::vector<float>& x, int64_t rows, int64_t in) {
  std::optional<quant::StaticQParams> qp;
  if (act == QActFormat::kInt8PerTensor) qp = quant::StaticQParams{act_scale, 0};
  quant::fake_quantize_activation(x.data(), rows, in, act_spec(act), qp);
}

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

QuantLinearData random_data(int64_t out, int64_t in, QActFormat act, bool per_channel, std::mt19937& rng) {
  QuantLinearData d;
  d.weight = QWeightFormat::kInt8;
  d.act = act;
  d.out = out;
  d.in = in;
  d.group = per_channel ? in : 0;
  d.codes.resize(static_cast<size_t>(out * in));
  std::uniform_int_distribution<int> code(-128, 127);
  for (uint8_t& c : d.codes) c = static_cast<uint8_t>(code(rng));
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  d.scales.resize(per_channel ? static_cast<size_t>(out) : 1);
  for (float& s : d.scales) s = scale(rng);
  if (act == QActFormat::kInt8PerTensor) d.act_scale = 0.03f;
  d.name = "test.linear";
  return d;
}

quant::QuantizedTensor as_quantized(const QuantLinearData& d) {
  quant::QuantizedTensor t;
  t.spec.dtype = quant::QDtype::kInt8;
  t.spec.symmetric = true;
  t.spec.qscheme = d.group == 0 ? quant::QScheme::kPerTensor : quant::QScheme::kPerChannel;
  t.spec.ch_axis = d.group == 0 ? -1 : 0;
  t.shape = {static_cast<uint64_t>(d.out), static_cast<uint64_t>(d.in)};
  t.codes = d.codes;
  t.scales = d.scales;
  return t;
}

std::vector<float> random_x(int64_t rows, int64_t in, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<float> random_bias(int64_t out, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> b(static_cast<size_t>(out));
  for (float& v : b) v = dist(rng);
  return b;
}

// Same bits, NaN matching any NaN.
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!same(got[i], want[i])) ++bad, ADD_FAILURE() << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

std::vector<float> run_native(const QuantLinear& q, const std::vector<float>& x, int64_t rows,
                              const std::vector<float>& bias, unsigned threads) {
  ThreadPool pool(threads);
  std::vector<float> y(static_cast<size_t>(rows * q.out()), -7.0f);
  q.run(x.data(), rows, bias.empty() ? nullptr : bias.data(), y.data(), pool);
  return y;
}

std::vector<float> run_reference(const QuantLinear& q, const std::vector<float>& x, int64_t rows,
                                 const std::vector<float>& bias) {
  std::vector<float> y(static_cast<size_t>(rows * q.out()), -7.0f);
  q.run_ref(x.data(), rows, bias.empty() ? nullptr : bias.data(), y.data());
  return y;
}

// ---- activation codes -----------------------------------------------------------

std::vector<std::vector<float>> adversarial_rows(std::mt19937& rng) {
  std::vector<std::vector<float>> rows;
  for (int64_t n : {1, 3, 15, 16, 17, 31, 32, 33, 100, 577}) {
    rows.push_back(random_x(1, n, rng));
    rows.push_back(random_x(1, n, rng, 1e3f));
    rows.push_back(random_x(1, n, rng, 1e-39f));  // float denormals
    rows.push_back(std::vector<float>(static_cast<size_t>(n), 0.0f));
    rows.push_back(std::vector<float>(static_cast<size_t>(n), -0.0f));
    std::vector<float> r = random_x(1, n, rng);
    r[static_cast<size_t>(n / 2)] = 300.0f;  // one outlier
    rows.push_back(r);
    std::vector<float> pm(static_cast<size_t>(n));  // ±amax: the extreme codes
    for (int64_t k = 0; k < n; ++k) pm[static_cast<size_t>(k)] = k % 2 ? -2.75f : 2.75f;
    rows.push_back(pm);
    std::vector<float> huge = random_x(1, n, rng);  // near FLT_MAX: scale 2.4e36
    huge[0] = -3e38f;
    rows.push_back(huge);
  }
  // amax 127.5 gives scale 1 exactly, so these are exact ties x / s = m + 0.5.
  rows.push_back({127.5f, -127.5f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 126.5f, -126.5f, 3.5f, -2.5f, 64.5f, 0.0f,
                  -0.0f, 1e-45f, 127.49999f, -128.5f / 1.0079f, 17.0f});
  return rows;
}

TEST(NativeInt8Test, ActCodesMatchSimulate) {
  std::mt19937 rng(1);
  const auto rows = adversarial_rows(rng);
  for (Isa isa : isas()) {
    SCOPED_TRACE(isa_name(isa));
    for (const auto& x : rows) {
      const int64_t n = static_cast<int64_t>(x.size());
      // Dynamic: codes and scale as quant::quantize_weight gives them row-wise.
      quant::QuantSpec rowwise = act_spec(QActFormat::kInt8PerToken);
      rowwise.ch_axis = 0;
      const quant::QuantizedTensor want = quant::quantize_weight(x.data(), 1, static_cast<uint64_t>(n), rowwise,
                                                                 DType::kF32, "activation", DType::kF32, 1);
      bool bad = true;
      const float scale = int8_token_scale(int8_row_amax(isa, x.data(), n, &bad));
      EXPECT_FALSE(bad);
      EXPECT_EQ(std::bit_cast<uint32_t>(scale), std::bit_cast<uint32_t>(want.scales[0]));
      std::vector<int8_t> codes(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
      EXPECT_FALSE(int8_quantize_row(isa, x.data(), n, 1.0f / scale, codes.data()));
      EXPECT_FALSE(native::int8_quantize_row_ref(x.data(), n, 1.0f / scale, ref.data()));
      EXPECT_EQ(std::memcmp(codes.data(), want.codes.data(), codes.size()), 0) << "n=" << n;
      EXPECT_EQ(codes, ref);
      // ... and the fake-quantized values simulate computes from them.
      std::vector<float> fq = x;
      fake_quant(QActFormat::kInt8PerToken, 0, fq, 1, n);
      for (int64_t k = 0; k < n; ++k) ASSERT_TRUE(same(fq[k], static_cast<float>(codes[k]) * scale)) << k;
      // Static, several scales, with ±inf and ±huge appended.
      std::vector<float> xs = x;
      xs.push_back(kInf);
      xs.push_back(-kInf);
      xs.push_back(3e38f);
      xs.push_back(-3e38f);
      for (float s : {0.05f, 1.0f, 3e-3f, 7.0f, 1e-30f}) {
        const int64_t m = static_cast<int64_t>(xs.size());
        std::vector<int8_t> sc(static_cast<size_t>(m)), sr(static_cast<size_t>(m));
        const float inv = 1.0f / s;
        EXPECT_FALSE(int8_quantize_row(isa, xs.data(), m, inv, sc.data()));
        EXPECT_FALSE(native::int8_quantize_row_ref(xs.data(), m, inv, sr.data()));
        EXPECT_EQ(sc, sr);
        std::vector<float> sq = xs;
        fake_quant(QActFormat::kInt8PerTensor, s, sq, 1, m);
        for (int64_t k = 0; k < m; ++k) ASSERT_TRUE(same(sq[k], static_cast<float>(sc[k]) * s)) << k << " s=" << s;
        EXPECT_EQ(sc[static_cast<size_t>(m - 4)], 127);
        EXPECT_EQ(sc[static_cast<size_t>(m - 3)], -128);
      }
    }
    // NaN / inf detection, in the SIMD body (k < 192) and in the tail.
    for (int64_t at : {5, 70, 199}) {
      std::vector<float> x = random_x(1, 200, rng);
      for (float v : {kNan, kInf, -kInf}) {
        x[static_cast<size_t>(at)] = v;
        bool bad = false;
        int8_row_amax(isa, x.data(), 200, &bad);
        EXPECT_TRUE(bad) << at;
        std::vector<int8_t> c(200), r(200);
        EXPECT_EQ(int8_quantize_row(isa, x.data(), 200, 3.0f, c.data()), std::isnan(v)) << at;
        native::int8_quantize_row_ref(x.data(), 200, 3.0f, r.data());
        std::vector<float> sq = x;
        fake_quant(QActFormat::kInt8PerTensor, 1.0f / 3.0f, sq, 1, 200);
        for (int64_t k = 0; k < 200; ++k) {
          if (k == at && std::isnan(v)) continue;  // its code is unspecified; simulate keeps the NaN
          EXPECT_EQ(c[static_cast<size_t>(k)], r[static_cast<size_t>(k)]) << k;
        }
        EXPECT_EQ(std::isnan(sq[static_cast<size_t>(at)]), std::isnan(v));
      }
    }
  }
}

// ---- run() vs run_ref() -----------------------------------------------------------

struct Shape {
  int64_t rows, in, out;
};

TEST(NativeInt8Test, RunMatchesRefBitwise) {
  std::mt19937 rng(2);
  const Shape shapes[] = {{1, 1, 1},      {1, 3, 7},      {2, 5, 17},    {7, 17, 16},   {8, 63, 47},
                          {9, 64, 48},    {15, 65, 49},   {16, 130, 97}, {17, 577, 145}, {600, 100, 50},
                          {33, 1030, 96}, {128, 257, 33}, {1, 576, 200}, {3, 4, 300}};
  int variant = 0;
  for (const Shape& s : shapes) {
    for (QActFormat act : {QActFormat::kInt8PerTensor, QActFormat::kInt8PerToken}) {
      for (bool per_channel : {false, true}) {
        const bool with_bias = (variant++ % 2) == 0;
        const auto q = make_quant_linear(random_data(s.out, s.in, act, per_channel, rng));
        const std::vector<float> x = random_x(s.rows, s.in, rng, 2.0f);
        const std::vector<float> bias = with_bias ? random_bias(s.out, rng) : std::vector<float>{};
        const std::vector<float> want = run_reference(*q, x, s.rows, bias);
        for (unsigned threads : {1u, 2u, 3u})
          expect_same(run_native(*q, x, s.rows, bias, threads), want,
                      std::string(q->kernel_name()) + " " + qact_format_name(act) + " rows " + std::to_string(s.rows) +
                          " in " + std::to_string(s.in) + " out " + std::to_string(s.out) + " threads " +
                          std::to_string(threads) + (per_channel ? " per-channel" : " per-tensor"));
      }
    }
  }
}

// The engine reaches the kernel through linear() / linear_ref() (gemm.cpp).
TEST(NativeInt8Test, RunsThroughLinear) {
  std::mt19937 rng(11);
  LinearWeight w;
  w.native = make_quant_linear(random_data(70, 90, QActFormat::kInt8PerToken, true, rng));
  w.out = 70;
  w.in = 90;
  w.bias = random_bias(70, rng);
  const std::vector<float> x = random_x(20, 90, rng);
  std::vector<float> y(20 * 70), ref(20 * 70);
  ThreadPool pool(2);
  linear(x.data(), 20, w, y.data(), pool);
  linear_ref(x.data(), 20, w, ref.data());
  expect_same(y, run_native(*w.native, x, 20, w.bias, 2), "linear()");
  expect_same(ref, run_reference(*w.native, x, 20, w.bias), "linear_ref()");
}

TEST(NativeInt8Test, KernelNameFollowsIsa) {
  std::mt19937 rng(3);
  const auto q = make_quant_linear(random_data(4, 8, QActFormat::kInt8PerToken, false, rng));
  const std::string want = cpu_has_avx512_vnni() ? "avx512-vnni" : isa_supported(Isa::kAvx2) ? "avx2" : "scalar";
  EXPECT_EQ(q->kernel_name(), want);
  const char* cap = std::getenv("QLOOM_MAX_ISA");
  if (cap && std::string(cap) == "scalar") {
    EXPECT_EQ(want, "scalar");
  }
  if (cap && std::string(cap) == "avx2" && isa_supported(Isa::kAvx2)) {
    EXPECT_EQ(want, "avx2");
  }
}

// ---- saturated codes, zeros ------------------------------------------------------------

TEST(NativeInt8Test, SaturatedCodesAndZeros) {
  // The largest `in`, every code at an extreme: int32 sums of ±2^30 (and
  // a VNNI biased sum of 255 · -128 · 65536), exact, then the epilogue.
  const int64_t in = native::kInt8MaxIn, out = 17;
  for (int w_code : {-128, 127}) {
    QuantLinearData d;
    d.act = QActFormat::kInt8PerTensor;
    d.out = out;
    d.in = in;
    d.codes.assign(static_cast<size_t>(out * in), static_cast<uint8_t>(w_code));
    d.scales = {0.5f};
    d.act_scale = 1.0f;
    const auto q = make_quant_linear(d);
    std::vector<float> x(static_cast<size_t>(2 * in), 1000.0f);  // row 0: codes 127
    std::fill(x.begin() + in, x.end(), -1000.0f);                // row 1: codes -128
    const std::vector<float> want_ref = run_reference(*q, x, 2, {});
    for (int r = 0; r < 2; ++r) {
      const int64_t acc = int64_t{r == 0 ? 127 : -128} * w_code * in;
      const float want = static_cast<float>(acc) * 1.0f * 0.5f;
      for (int64_t o = 0; o < out; ++o) ASSERT_EQ(want_ref[static_cast<size_t>(r * out + o)], want) << r;
    }
    for (unsigned threads : {1u, 2u}) expect_same(run_native(*q, x, 2, {}, threads), want_ref, "saturated");
  }
  // Zeros: activations (static and dynamic: scale eps, codes 0), weights, scales.
  std::mt19937 rng(4);
  for (QActFormat act : {QActFormat::kInt8PerTensor, QActFormat::kInt8PerToken}) {
    QuantLinearData d = random_data(33, 70, act, true, rng);
    d.scales[5] = 0.0f;
    std::fill(d.codes.begin() + 7 * 70, d.codes.begin() + 8 * 70, uint8_t{0});
    const auto q = make_quant_linear(d);
    std::vector<float> x = random_x(3, 70, rng);
    std::fill(x.begin(), x.begin() + 70, 0.0f);
    const std::vector<float> bias = random_bias(33, rng);
    const std::vector<float> y = run_native(*q, x, 3, bias, 2);
    expect_same(y, run_reference(*q, x, 3, bias), "zeros");
    for (int64_t o = 0; o < 33; ++o) EXPECT_EQ(y[static_cast<size_t>(o)], bias[static_cast<size_t>(o)]);
    for (int64_t r = 0; r < 3; ++r) {
      EXPECT_EQ(y[static_cast<size_t>(r * 33 + 5)], bias[5]);
      EXPECT_EQ(y[static_cast<size_t>(r * 33 + 7)], bias[7]);
    }
  }
}

// ---- against the simulate computation -----------------------------------------------------

double g_max_err_ref = 0.0, g_max_err_linear = 0.0;  // max |native - simulate| / T seen

// Checks run() against simulate on x: NaN where simulate is NaN, the same
// inf, finite values within the bounds of the file comment.
void check_vs_simulate(const QuantLinearData& d, const std::vector<float>& x, int64_t rows,
                       const std::vector<float>& bias) {
  const auto q = make_quant_linear(d);
  const std::vector<float> y = run_native(*q, x, rows, bias, 2);
  std::vector<float> xq = x;
  fake_quant(d.act, d.act_scale, xq, rows, d.in);
  LinearWeight w;
  w.out = d.out;
  w.in = d.in;
  w.f32 = quant::dequantize_ref(as_quantized(d));
  w.bias = bias;
  std::vector<float> ref(y.size()), lin(y.size());
  linear_ref(xq.data(), rows, w, ref.data());
  ThreadPool pool(2);
  linear(xq.data(), rows, w, lin.data(), pool);
  int bad = 0;
  for (int64_t r = 0; r < rows && bad < 5; ++r)
    for (int64_t o = 0; o < d.out && bad < 5; ++o) {
      const size_t i = static_cast<size_t>(r * d.out + o);
      if (!std::isfinite(ref[i])) {
        if (!same(y[i], ref[i])) ++bad, ADD_FAILURE() << "row " << r << " out " << o << ": " << y[i] << " vs " << ref[i];
        continue;
      }
      double t = bias.empty() ? 0.0 : std::fabs(bias[static_cast<size_t>(o)]);
      for (int64_t k = 0; k < d.in; ++k) t += std::fabs(double{xq[r * d.in + k]} * w.f32[o * d.in + k]);
      const double under = (d.in + 4) * 0x1.0p-149;
      const double e_ref = std::fabs(double{y[i]} - ref[i]), e_lin = std::fabs(double{y[i]} - lin[i]);
      const double tol_ref = 8 * kU * t + under, tol_lin = (2.0 * (d.in + 2) + 8) * kU * t + under;
      if (!(e_ref <= tol_ref) || !(e_lin <= tol_lin))
        ++bad, ADD_FAILURE() << "row " << r << " out " << o << ": native " << y[i] << " linear_ref " << ref[i]
                             << " linear " << lin[i] << " T " << t;
      if (t > 0) g_max_err_ref = std::max(g_max_err_ref, e_ref / t), g_max_err_linear = std::max(g_max_err_linear, e_lin / t);
    }
}

TEST(NativeInt8Test, MatchesSimulate) {
  std::mt19937 rng(5);
  const Shape shapes[] = {{1, 576, 300}, {5, 1536, 97}, {64, 576, 160}, {9, 65, 33}, {130, 200, 50}};
  for (const Shape& s : shapes)
    for (QActFormat act : {QActFormat::kInt8PerTensor, QActFormat::kInt8PerToken})
      for (bool per_channel : {false, true}) {
        SCOPED_TRACE(std::string(qact_format_name(act)) + " in " + std::to_string(s.in));
        const QuantLinearData d = random_data(s.out, s.in, act, per_channel, rng);
        check_vs_simulate(d, random_x(s.rows, s.in, rng), s.rows, random_bias(s.out, rng));
      }
  std::printf("max |native - simulate| / T: %.3g·u vs linear_ref, %.3g·u vs fp32 linear()\n", g_max_err_ref / kU,
              g_max_err_linear / kU);
}

// ---- non-finite activations --------------------------------------------------------------

TEST(NativeInt8Test, NonFiniteStatic) {
  std::mt19937 rng(6);
  for (bool per_channel : {false, true}) {
    const QuantLinearData d = random_data(50, 37, QActFormat::kInt8PerTensor, per_channel, rng);
    std::vector<float> x = random_x(6, 37, rng);
    x[0 * 37 + 3] = kNan;                       // row 0: a NaN -> all NaN
    x[1 * 37 + 5] = kInf;                       // row 1: +inf -> code 127
    x[2 * 37 + 0] = -kInf;                      // row 2: -inf -> code -128
    x[4 * 37 + 1] = kInf, x[4 * 37 + 9] = kNan;  // row 4: both -> all NaN
    const std::vector<float> bias = random_bias(50, rng);
    check_vs_simulate(d, x, 6, bias);
    const auto q = make_quant_linear(d);
    const std::vector<float> want = run_reference(*q, x, 6, bias);
    for (unsigned threads : {1u, 2u, 3u}) expect_same(run_native(*q, x, 6, bias, threads), want, "static non-finite");
    for (int64_t o = 0; o < 50; ++o) {
      EXPECT_TRUE(std::isnan(want[static_cast<size_t>(o)]));
      EXPECT_TRUE(std::isnan(want[static_cast<size_t>(4 * 50 + o)]));
      for (int64_t r : {1, 2, 3, 5}) EXPECT_TRUE(std::isfinite(want[static_cast<size_t>(r * 50 + o)]));
    }
  }
}

TEST(NativeInt8Test, NonFiniteDynamicSkipsQuantization) {
  std::mt19937 rng(7);
  for (float bad : {kNan, kInf, -kInf}) {
    QuantLinearData d = random_data(70, 45, QActFormat::kInt8PerToken, true, rng);
    d.codes[3 * 45 + 2] = 0;  // an inf times a zero weight: NaN
    std::vector<float> x = random_x(5, 45, rng);
    x[2 * 45 + 2] = bad;
    // Simulate leaves the whole call's x alone...
    std::vector<float> fq = x;
    fake_quant(d.act, 0, fq, 5, 45);
    EXPECT_EQ(std::memcmp(fq.data(), x.data(), x.size() * sizeof(float)), 0);
    // ... so native must give linear_ref(x, dequantized W), bit for bit.
    LinearWeight w;
    w.out = d.out;
    w.in = d.in;
    w.f32 = quant::dequantize_ref(as_quantized(d));
    w.bias = random_bias(70, rng);
    std::vector<float> want(static_cast<size_t>(5 * 70));
    linear_ref(x.data(), 5, w, want.data());
    const auto q = make_quant_linear(d);
    expect_same(run_reference(*q, x, 5, w.bias), want, "dynamic non-finite run_ref");
    for (unsigned threads : {1u, 2u, 3u}) expect_same(run_native(*q, x, 5, w.bias, threads), want, "dynamic non-finite");
    EXPECT_FALSE(std::isfinite(want[2 * 70 + 3]));
    EXPECT_TRUE(std::isfinite(want[0]));  // other rows: unquantized fp32 values
  }
}

// ---- weights, support, errors ----------------------------------------------------------

TEST(NativeInt8Test, DequantizeMatchesQuant) {
  std::mt19937 rng(8);
  for (bool per_channel : {false, true}) {
    const QuantLinearData d = random_data(61, 29, QActFormat::kInt8PerToken, per_channel, rng);
    const auto q = make_quant_linear(d);
    EXPECT_EQ(q->dequantize(), quant::dequantize_ref(as_quantized(d)));
    EXPECT_EQ(q->dequantize(), quant::dequantize(as_quantized(d), 1));
    EXPECT_GE(q->bytes(), d.codes.size());
    EXPECT_EQ(q->out(), 61);
    EXPECT_EQ(q->in(), 29);
    EXPECT_EQ(q->act_format(), QActFormat::kInt8PerToken);
  }
}

TEST(NativeInt8Test, SupportAndErrors) {
  using native::int8_linear_supported;
  EXPECT_TRUE(int8_linear_supported(QActFormat::kInt8PerTensor, 0, 576));
  EXPECT_TRUE(int8_linear_supported(QActFormat::kInt8PerToken, 576, 576));
  EXPECT_TRUE(int8_linear_supported(QActFormat::kInt8PerToken, 0, native::kInt8MaxIn));
  EXPECT_FALSE(int8_linear_supported(QActFormat::kInt8PerToken, 0, native::kInt8MaxIn + 1));
  EXPECT_FALSE(int8_linear_supported(QActFormat::kInt8PerToken, 32, 64));  // per-group
  EXPECT_FALSE(int8_linear_supported(QActFormat::kF32, 0, 64));           // weight-only int8
  EXPECT_FALSE(int8_linear_supported(QActFormat::kFp8PerTensor, 0, 64));
  EXPECT_FALSE(int8_linear_supported(QActFormat::kInt8PerToken, 0, 0));
  EXPECT_TRUE(quant_linear_supported(QWeightFormat::kInt8, QActFormat::kInt8PerToken, 0, 64));
  std::mt19937 rng(9);
  QuantLinearData d = random_data(4, 64, QActFormat::kInt8PerTensor, false, rng);
  d.group = 32;
  d.scales.assign(8, 0.01f);
  try {
    make_quant_linear(d);
    ADD_FAILURE() << "per-group int8 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(e.item(), "test.linear");
  }
  d = random_data(4, 64, QActFormat::kInt8PerTensor, false, rng);
  d.act_scale = 1e-39f;  // finite and positive, but 1 / scale overflows
  try {
    make_quant_linear(d);
    ADD_FAILURE() << "tiny act_scale accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  // Empty calls write nothing.
  const auto q = make_quant_linear(random_data(4, 64, QActFormat::kInt8PerToken, false, rng));
  ThreadPool pool(2);
  float y = 5.0f;
  q->run(nullptr, 0, nullptr, &y, pool);
  q->run_ref(nullptr, 0, nullptr, &y);
  EXPECT_EQ(y, 5.0f);
}

// ---- speed ------------------------------------------------------------------------------
// GOPS = 2 · rows · in · out / best time (of >= 10 calls and >= 0.6 s), 2
// threads, against the fp32 linear() on the same shape (as the engine runs
// it, W not prepacked, and prepacked). The VNNI peak is measured with 12
// independent vpdpbusd chains per thread (64 MACs each). On a shared machine
// the wall time of long calls includes time the other users hold a core;
// the process CPU time (both threads; the pool waits without spinning) shows
// what one core does while it runs: "int8/core".

struct Timing {
  double wall = 1e30, cpu = 1e30;  // seconds, best of the calls
};

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <class F>
Timing best_seconds(F&& f) {
  f();  // warm: scratch, caches
  Timing best;
  double total = 0;
  for (int i = 0; i < 10 || total < 0.6; ++i) {
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best.wall = std::min(best.wall, s);
    best.cpu = std::min(best.cpu, cpu_now() - c0);
    total += s;
  }
  return best;
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512vnni"))) int32_t vnni_chains(int64_t iters, int32_t seed) {
  __m512i acc[12];
  const __m512i a = _mm512_set1_epi32(seed), b = _mm512_set1_epi32(seed + 1);
#pragma GCC unroll 12
  for (int j = 0; j < 12; ++j) acc[j] = _mm512_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  __m512i all = acc[0];  // every chain feeds the result, so none is dropped
  for (int j = 1; j < 12; ++j) all = _mm512_xor_si512(all, acc[j]);
  int32_t lane[16];
  _mm512_storeu_si512(lane, all);
  return lane[0] ^ lane[15];
}
#endif

double vnni_peak_gops(ThreadPool& pool) {
#if defined(__x86_64__)
  if (!cpu_has_avx512_vnni()) return 0;
  const int64_t iters = 20000;  // short calls: the best of many dodges the other users' load
  volatile int32_t seed = 0x01020304, sink = 0;
  const double s = best_seconds([&] {
    pool.parallel_for(static_cast<int64_t>(pool.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sink = sink + vnni_chains(iters, seed);
    });
  }).wall;
  return 2.0 * 12 * 64 * iters * pool.size() / s / 1e9;
#else
  (void)pool;
  return 0;
#endif
}

TEST(NativeInt8Test, DISABLED_Speed) {
  ThreadPool pool(2);
  std::printf("VNNI peak (12 vpdpbusd chains per thread, %u threads): %.0f GOPS\n", pool.size(), vnni_peak_gops(pool));
  std::mt19937 rng(10);
  const Shape shapes[] = {{0, 576, 1536}, {0, 1536, 576}, {0, 576, 576}, {0, 2048, 5632}, {0, 5632, 2048}};
  std::printf("%-6s %-11s %11s %11s %9s %9s %9s   (GOPS, 2 threads, kernel %s)\n", "rows", "in x out", "int8-static",
              "int8-token", "fp32", "fp32-pack", "int8/core",
              make_quant_linear(random_data(16, 16, QActFormat::kInt8PerToken, false, rng))->kernel_name());
  for (const Shape& sh : shapes) {
    const auto qs = make_quant_linear(random_data(sh.out, sh.in, QActFormat::kInt8PerTensor, true, rng));
    const auto qt = make_quant_linear(random_data(sh.out, sh.in, QActFormat::kInt8PerToken, true, rng));
    LinearWeight w;
    w.out = sh.out;
    w.in = sh.in;
    w.f32 = random_x(sh.out, sh.in, rng, 0.05f);
    LinearWeight wp = w;
    prepack(wp);
    for (int64_t rows : {int64_t{1}, int64_t{512}}) {
      const std::vector<float> x = random_x(rows, sh.in, rng);
      std::vector<float> y(static_cast<size_t>(rows * sh.out));
      const double ops = 2.0 * rows * sh.in * sh.out / 1e9;
      const Timing t_s = best_seconds([&] { qs->run(x.data(), rows, nullptr, y.data(), pool); });
      const Timing t_t = best_seconds([&] { qt->run(x.data(), rows, nullptr, y.data(), pool); });
      const Timing t_f = best_seconds([&] { linear(x.data(), rows, w, y.data(), pool); });
      const Timing t_p = best_seconds([&] { linear(x.data(), rows, wp, y.data(), pool); });
      std::printf("%-6lld %5lldx%-5lld %11.1f %11.1f %9.1f %9.1f %9.1f\n", static_cast<long long>(rows),
                  static_cast<long long>(sh.in), static_cast<long long>(sh.out), ops / t_s.wall, ops / t_t.wall,
                  ops / t_f.wall, ops / t_p.wall, ops / std::min(t_s.cpu, t_t.cpu));
    }
  }
}

TEST(NativeInt8Test, CappedIsaSubprocesses) {
  test::expect_passes_under_isa_caps(
      "NativeInt8Test.ActCodesMatchSimulate:NativeInt8Test.RunMatchesRefBitwise:NativeInt8Test.KernelNameFollowsIsa:"
      "NativeInt8Test.RunsThroughLinear:"
      "NativeInt8Test.SaturatedCodesAndZeros:NativeInt8Test.MatchesSimulate:NativeInt8Test.NonFiniteStatic:"
      "NativeInt8Test.NonFiniteDynamicSkipsQuantization");
}

}  // namespace
}  // namespace qloom::engine
