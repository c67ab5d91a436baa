// The packed 4-bit native kernels (engine/native/packed4_linear.cpp):
// int4 / uint4 / mxfp4 weight-only with fp32 activations.
//
// Tolerance: none. The design keeps linear()'s canonical summation order
// (gemm_dispatch.h) and forms every weight with quant::dequantize_ref's one
// rounding, so run() and run_ref() must give the same bits as the fp32
// linear() on the dequantized weights ("simulate"), for every row count,
// thread count and QLOOM_MAX_ISA cap. The one exception is which NaN comes
// out: x86 propagates the payload of the first NaN operand, and the compiler
// may swap operands of commutative adds and pick any FMA form, so a NaN result
// must be matched by a NaN result (any payload), never by a number. Signed
// zeros and infinities are compared bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/native/qlinear.h"
#include "qloom/quant/quantize_ref.h"
#include "support/subprocess.h"

namespace qloom::engine {
namespace {

constexpr QWeightFormat kFormats[] = {QWeightFormat::kInt4, QWeightFormat::kUInt4, QWeightFormat::kMxfp4};

// How codes, zero points and scales are drawn.
// kNearOverflow: codes in [-3, 3] around the zero point (fp4 within ±1.5)
// with scale 1e38, so every weight is finite but index 0 (int4 -8, uint4 zp 8)
// would be -inf: a kernel that let a padded lane past `in` see that table
// entry (0 · -inf = NaN) instead of fma(0, 0, p) fails here. x is scaled by
// 1e-30 to keep the sums finite.
enum class Fill { kRandom, kZeroCodes, kSaturated, kZeroScales, kHugeScales, kNearOverflow };

struct Case {
  QWeightFormat format;
  int64_t out, in, group;  // group 0: per-tensor, == in: per-channel
  Fill fill = Fill::kRandom;
  int zp = -1;  // uint4: this zero point everywhere, or -1: random
};

std::string describe(const Case& c) {
  return std::string(qweight_format_name(c.format)) + " out=" + std::to_string(c.out) + " in=" +
         std::to_string(c.in) + " group=" + std::to_string(c.group) + " fill=" +
         std::to_string(static_cast<int>(c.fill)) + " zp=" + std::to_string(c.zp);
}

uint8_t code_for(QWeightFormat f, int n) {  // n in [0, 15]
  return f == QWeightFormat::kInt4 ? static_cast<uint8_t>(static_cast<int8_t>(n - 8)) : static_cast<uint8_t>(n);
}

QuantLinearData make_data(const Case& c, std::mt19937& rng) {
  QuantLinearData d;
  d.weight = c.format;
  d.act = QActFormat::kF32;
  d.out = c.out;
  d.in = c.in;
  d.group = c.group;
  d.name = "test.linear";
  std::uniform_int_distribution<int> nib(0, 15);
  d.codes.resize(static_cast<size_t>(c.out * c.in));
  for (uint8_t& q : d.codes) {
    int n = nib(rng);
    if (c.fill == Fill::kZeroCodes)  // w = 0: q = zp (uint4), 0 (int4: index 8), +0 (fp4)
      n = c.format == QWeightFormat::kUInt4 ? std::max(c.zp, 0) : (c.format == QWeightFormat::kInt4 ? 8 : 0);
    if (c.fill == Fill::kSaturated) n = nib(rng) < 8 ? 0 : 15;  // int4 -8 / 7, uint4 0 / 15, fp4 +0 / -6
    if (c.fill == Fill::kNearOverflow) n = c.format == QWeightFormat::kMxfp4 ? n % 4 + (n & 8) : 5 + n % 7;
    q = code_for(c.format, n);
  }
  const size_t ns = c.group == 0 ? 1 : static_cast<size_t>(c.out * (c.in / c.group));
  std::uniform_real_distribution<float> mant(0.5f, 2.0f);
  std::uniform_int_distribution<int> e8m0(-12, 4);
  for (size_t i = 0; i < ns; ++i) {
    float s = c.format == QWeightFormat::kMxfp4 ? std::ldexp(1.0f, e8m0(rng)) : mant(rng) * 0.05f;
    if (c.fill == Fill::kZeroScales && i % 3 != 2) s = 0.0f;
    if (c.fill == Fill::kHugeScales) s = c.format == QWeightFormat::kMxfp4 ? 0x1p127f : 3.0e38f;
    if (c.fill == Fill::kNearOverflow) s = c.format == QWeightFormat::kMxfp4 ? 0x1p126f : 1.0e38f;
    d.scales.push_back(s);
  }
  if (c.format == QWeightFormat::kUInt4)
    for (size_t i = 0; i < ns; ++i) d.zero_points.push_back(c.zp >= 0 ? c.zp : nib(rng));
  return d;
}

// quant::dequantize_ref of the same codes: the simulate runtime's weights.
std::vector<float> reference_weights(const QuantLinearData& d) {
  quant::QuantizedTensor t;
  t.spec.dtype = d.weight == QWeightFormat::kInt4    ? quant::QDtype::kInt4
                 : d.weight == QWeightFormat::kUInt4 ? quant::QDtype::kUInt4
                                                     : quant::QDtype::kFp4;
  t.spec.symmetric = d.weight != QWeightFormat::kUInt4;
  t.spec.qscheme = d.group == 0 ? quant::QScheme::kPerTensor
                   : d.group == d.in ? quant::QScheme::kPerChannel
                                     : quant::QScheme::kPerGroup;
  t.spec.group_size = static_cast<int>(d.group);
  t.shape = {static_cast<uint64_t>(d.out), static_cast<uint64_t>(d.in)};
  t.codes = d.codes;
  t.scales = d.scales;
  t.zero_points = d.zero_points;
  return quant::dequantize_ref(t);
}

std::vector<float> random_x(int64_t rows, int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (float& v : x) v = dist(rng);
  return x;
}

// Bitwise equality, except that NaN matches NaN (see the tolerance note).
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

// run(), run_ref() and dequantize() against linear() / dequantize_ref on the
// dequantized fp32 weights, for each row count and thread count.
void check_case(const Case& c, const std::vector<int64_t>& row_counts, std::mt19937& rng,
                const std::vector<float>* x_override = nullptr) {
  const QuantLinearData d = make_data(c, rng);
  const auto q = make_quant_linear(d);
  LinearWeight sim;
  sim.out = c.out;
  sim.in = c.in;
  sim.f32 = reference_weights(d);
  expect_same(q->dequantize(), sim.f32, describe(c) + " dequantize");
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const bool with_bias : {false, true}) {
    sim.bias.clear();
    if (with_bias)
      for (int64_t o = 0; o < c.out; ++o) sim.bias.push_back(o % 5 == 0 ? -0.0f : dist(rng));
    const float* bias = with_bias ? sim.bias.data() : nullptr;
    for (const int64_t rows : row_counts) {
      std::vector<float> x = x_override ? *x_override : random_x(rows, c.in, rng);
      if (c.fill == Fill::kNearOverflow)
        for (float& v : x) v *= 1e-30f;
      ASSERT_EQ(x.size(), static_cast<size_t>(rows * c.in));
      const std::string what = describe(c) + " rows=" + std::to_string(rows) + " bias=" + std::to_string(with_bias);
      std::vector<float> want(static_cast<size_t>(rows * c.out)), got(want.size(), 1.0f), ref(want.size(), 2.0f);
      ThreadPool one(1);
      linear(x.data(), rows, sim, want.data(), one);
      q->run_ref(x.data(), rows, bias, ref.data());
      expect_same(ref, want, what + " run_ref");
      for (const unsigned threads : {1u, 2u, 3u}) {
        ThreadPool pool(threads);
        std::fill(got.begin(), got.end(), 3.0f);
        q->run(x.data(), rows, bias, got.data(), pool);
        expect_same(got, want, what + " threads=" + std::to_string(threads));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

const std::vector<int64_t> kAllRows = {1, 2, 3, 4, 5, 127, 128, 200, 600};

// Group sizes 32 / 64 / 128 / 256 (in a multiple of them, > one 384-deep
// GEMM k block), out odd and not a multiple of any tile width; in = 576 and 96
// end in a partial 128-k superchunk whose steps change group.
TEST(Packed4Test, GroupedMatchesFp32LinearBitwise) {
  std::mt19937 rng(1);
  for (const QWeightFormat f : kFormats)
    for (const int64_t group : {32, 64, 128, 256}) {
      if (f == QWeightFormat::kMxfp4 && group != 32) continue;
      check_case({f, 37, 512, group}, kAllRows, rng);
      check_case({f, 67, 256, group}, {1, 4, 5, 128}, rng);
      if (group <= 64) check_case({f, 13, 576, group}, {1, 3, 4, 128}, rng);
      if (group == 32) check_case({f, 7, 96, group}, {1, 2, 128}, rng);
      if (HasFatalFailure()) return;
    }
}

// Per-channel (group == in) for any in, odd ones included: partial last
// superchunks of 1..8 steps (1, 2 and 4 bytes per lane), a partial last
// 16-k step or not, in < 16, in = 1, in past a GEMM k block; and per-tensor.
TEST(Packed4Test, PerChannelOddInMatchesFp32LinearBitwise) {
  std::mt19937 rng(2);
  for (const QWeightFormat f : {QWeightFormat::kInt4, QWeightFormat::kUInt4}) {
    for (const int64_t in : {1, 7, 16, 33, 48, 57, 64, 77, 127, 200, 401})
      check_case({f, 19, in, in}, {1, 2, 3, 4, 5, 127, 128, 200}, rng);
    check_case({f, 21, 57, 0}, {1, 5, 128}, rng);   // per-tensor
    check_case({f, 9, 0, 0}, {1, 3, 130}, rng);     // in = 0: y = bias
    if (HasFatalFailure()) return;
  }
}

// Zero points 0 / 8 / 15, zero codes, saturated codes, zero scales and
// scales so large that w overflows to inf (then y is inf or NaN like
// linear()'s), every format.
TEST(Packed4Test, AdversarialWeightsMatchFp32LinearBitwise) {
  std::mt19937 rng(3);
  for (const int zp : {0, 8, 15})
    for (const Fill fill : {Fill::kRandom, Fill::kZeroCodes, Fill::kSaturated})
      check_case({QWeightFormat::kUInt4, 33, 64, 32, fill, zp}, {1, 5, 128}, rng);
  for (const int64_t in : {45, 57})  // the partial last chunk with / without its second half
    check_case({QWeightFormat::kUInt4, 35, in, in, Fill::kNearOverflow, 8}, {1, 3, 4, 128}, rng);
  for (const QWeightFormat f : kFormats)
    for (const Fill fill : {Fill::kZeroCodes, Fill::kSaturated, Fill::kZeroScales, Fill::kHugeScales,
                            Fill::kNearOverflow}) {
      check_case({f, 35, 96, 32, fill}, {1, 3, 4, 128}, rng);
      if (f != QWeightFormat::kMxfp4) check_case({f, 35, 45, 45, fill}, {1, 3, 4, 128}, rng);
    }
}

// NaN / inf in the activations: a NaN row gives NaN in every output (every
// weight multiplies it), an inf gives what linear() gives (inf, or NaN where
// a zero weight or an opposite inf meets it), other rows are untouched.
TEST(Packed4Test, NonFiniteActivationsPropagateLikeFp32) {
  std::mt19937 rng(4);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const QWeightFormat f : kFormats)
    for (const int64_t rows : {1, 3, 130}) {
      const int64_t in = 96;
      std::vector<float> x = random_x(rows, in, rng);
      x[static_cast<size_t>((rows - 1) * in + 50)] = nan;
      if (rows > 1) x[static_cast<size_t>(5)] = inf, x[static_cast<size_t>(70)] = -inf;
      check_case({f, 29, in, 32}, {rows}, rng, &x);
      const auto q = make_quant_linear(make_data({f, 29, in, 32}, rng));
      std::vector<float> y(static_cast<size_t>(rows * 29));
      ThreadPool pool(2);
      q->run(x.data(), rows, nullptr, y.data(), pool);
      for (int64_t o = 0; o < 29; ++o) EXPECT_TRUE(std::isnan(y[static_cast<size_t>((rows - 1) * 29 + o)])) << o;
      for (int64_t r = 1; r + 1 < rows; ++r)
        for (int64_t o = 0; o < 29; ++o) EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(r * 29 + o)]));
    }
}

// The same bits on every ISA cap: the capped subprocesses compare against
// linear(), which itself gives the same bits on every cap (gemm_test.cpp), so
// native agrees with simulate across caps too. kernel_name follows the cap.
TEST(Packed4Test, KernelNameFollowsIsaCap) {
  std::mt19937 rng(5);
  const auto q = make_quant_linear(make_data({QWeightFormat::kInt4, 4, 64, 32}, rng));
  const std::string name = q->kernel_name();
  if (isa_supported(Isa::kAvx512)) EXPECT_EQ(name, "avx512-packed4");
  else if (isa_supported(Isa::kAvx2)) EXPECT_EQ(name, "avx2-packed4");
  else EXPECT_EQ(name, "scalar-packed4");
}

TEST(Packed4Test, CappedIsaSubprocesses) {
  test::expect_passes_under_isa_caps(
      "Packed4Test.GroupedMatchesFp32LinearBitwise:Packed4Test.PerChannelOddInMatchesFp32LinearBitwise:"
      "Packed4Test.AdversarialWeightsMatchFp32LinearBitwise:Packed4Test.NonFiniteActivationsPropagateLikeFp32:"
      "Packed4Test.KernelNameFollowsIsaCap");
}

// bytes() counts the packed codes (half a byte per weight), the f32 scales,
// the uint4 zero points (a byte each) and the 1 KiB of tables; shape and
// format accessors say what was built.
TEST(Packed4Test, BytesAndAccessors) {
  std::mt19937 rng(6);
  const auto u = make_quant_linear(make_data({QWeightFormat::kUInt4, 64, 256, 64}, rng));
  EXPECT_EQ(u->bytes(), size_t{64 * 128 + 64 * 4 * 4 + 64 * 4 + 1024});
  EXPECT_EQ(u->weight_format(), QWeightFormat::kUInt4);
  EXPECT_EQ(u->act_format(), QActFormat::kF32);
  EXPECT_EQ(u->out(), 64);
  EXPECT_EQ(u->in(), 256);
  // in = 576: four 128-k superchunks and a 64-k tail at 2 bytes per lane,
  // no padding.
  const auto t = make_quant_linear(make_data({QWeightFormat::kInt4, 8, 576, 64}, rng));
  EXPECT_EQ(t->bytes(), size_t{8 * 288 + 8 * 9 * 4 + 1024});
  // Per-channel in = 33: a 3-step tail at 2 bytes per lane (32 bytes per
  // row); out padded to a whole tile of 4 rows.
  const auto p = make_quant_linear(make_data({QWeightFormat::kInt4, 3, 33, 33}, rng));
  EXPECT_EQ(p->bytes(), size_t{4 * 32 + 4 * 4 + 1024});
}

// What the family does not take is kUnsupported (make_quant_linear says so
// before validating); malformed data is kInvalidInput from the validation.
TEST(Packed4Test, UnsupportedAndInvalidInputs) {
  EXPECT_TRUE(quant_linear_supported(QWeightFormat::kInt4, QActFormat::kF32, 128, 4096));
  EXPECT_TRUE(quant_linear_supported(QWeightFormat::kUInt4, QActFormat::kF32, 77, 77));
  EXPECT_TRUE(quant_linear_supported(QWeightFormat::kMxfp4, QActFormat::kF32, 32, 64));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kMxfp4, QActFormat::kF32, 64, 128));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kInt4, QActFormat::kF32, 16, 64));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kInt4, QActFormat::kF32, 96, 192));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kInt4, QActFormat::kInt8PerToken, 32, 64));
  std::mt19937 rng(7);
  QuantLinearData d = make_data({QWeightFormat::kInt4, 4, 64, 32}, rng);
  d.group = 16;
  d.scales.resize(16);
  try {
    make_quant_linear(d);
    ADD_FAILURE() << "group 16 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
  d = make_data({QWeightFormat::kInt4, 4, 64, 32}, rng);
  d.codes[3] = 9;  // int4 codes are sign-extended bytes in [-8, 7]
  try {
    make_quant_linear(d);
    ADD_FAILURE() << "int4 code 9 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
}

}  // namespace
}  // namespace qloom::engine
