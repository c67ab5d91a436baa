// The bf16 dot-product family of native quantized linears
// (engine/native/bf16dot_*): fp8 e4m3 W x fp8 A (static / dynamic per-token)
// and bf16 W x bf16 A through vdpbf16ps.
//
// What is exact and why:
//  - The hardware instruction: vdpbf16ps equals the scalar emulation dp_fma
//    (bf16dot_kernels.h: two FMAs per lane, odd pair element first, DAZ in,
//    FTZ out with tininess after rounding) bit for bit on random and
//    adversarial lanes (VdpbfMatchesTheEmulation), and so does an AVX2 FMA
//    under MXCSR FTZ + DAZ. So run() (every ISA, every thread count) must
//    equal run_ref() bit for bit: memcmp, no tolerance. Output NaNs are
//    canonical (0x7FC00000), so not even NaN payloads may differ.
//  - The activation codes and per-token scales equal what the simulate path
//    (quant::fake_quantize_activation / quant::quantize_weight) computes, bit
//    for bit, for every quantizer ISA.
//  - A dynamic call with NaN / inf activations is not quantized (as in
//    simulate): run() equals engine::linear() on the dequantized W bit for bit.
// Versus simulate (x fake-quantized, W dequantized, linear_ref in double) the
// only differences are fp32 rounding: see CloseToSimulate for the bound.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/native/bf16dot_act.h"
#include "qloom/engine/native/bf16dot_kernels.h"
#include "qloom/engine/native/bf16dot_linear.h"
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

namespace bd = native::bf16dot;
constexpr double kU = 0x1.0p-24;

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
float widen(uint16_t h) { return from_bits(static_cast<uint32_t>(h) << 16); }
std::string hex(float f) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", bits(f));
  return b;
}

struct Combo {
  QWeightFormat w;
  QActFormat a;
  bool per_channel;
};
const std::vector<Combo>& combos() {
  static const std::vector<Combo> c = {{QWeightFormat::kFp8E4M3, QActFormat::kFp8PerTensor, false},
                                       {QWeightFormat::kFp8E4M3, QActFormat::kFp8PerTensor, true},
                                       {QWeightFormat::kFp8E4M3, QActFormat::kFp8PerToken, false},
                                       {QWeightFormat::kFp8E4M3, QActFormat::kFp8PerToken, true},
                                       {QWeightFormat::kBf16, QActFormat::kBf16, false}};
  return c;
}
std::string combo_name(const Combo& c) {
  return std::string(qweight_format_name(c.w)) + (c.per_channel ? "/channel " : "/tensor ") + qact_format_name(c.a);
}

// A random bf16 of exponent in [lo, hi] (unbiased), any mantissa and sign.
uint16_t random_bf16(std::mt19937& rng, int lo, int hi) {
  const int e = lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1));
  return static_cast<uint16_t>(((rng() & 1u) << 15) | (static_cast<uint32_t>(e + 127) << 7) | (rng() & 0x7Fu));
}

// W of the combo: fp8 codes (any non-NaN code, some saturated; `hard` adds
// NaN codes) or bf16 (`hard`: denormals, products near the FTZ limit, whole
// rows of them so that some outputs end up tiny, overflowing products, inf,
// NaN).
QuantLinearData make_data(const Combo& c, int64_t out, int64_t in, std::mt19937& rng, bool hard = false) {
  QuantLinearData d;
  d.weight = c.w;
  d.act = c.a;
  d.out = out;
  d.in = in;
  d.name = "test.linear";
  const size_t n = static_cast<size_t>(out * in);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  if (c.w == QWeightFormat::kBf16) {
    d.codes.resize(2 * n);
    for (size_t i = 0; i < n; ++i) {
      uint16_t h = float_to_bf16(nd(rng));
      if (hard) {
        const bool tiny_row = (i / static_cast<size_t>(in)) % 7 == 1;
        const uint32_t m = rng() % 16;
        if (tiny_row) h = random_bf16(rng, -72, -66);                  // products below 2^-126
        else if (m == 0) h = static_cast<uint16_t>(rng() & 0x807Fu);  // denormal or zero
        else if (m < 8) h = random_bf16(rng, -72, -58);           // products near 2^-126
        else if (m == 8) h = random_bf16(rng, 60, 127);           // overflowing products
        else if (m == 9 && rng() % 64 == 0) h = (rng() & 1) ? 0x7F80 : 0xFFC1;
      }
      d.codes[2 * i] = static_cast<uint8_t>(h), d.codes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return d;
  }
  d.codes.resize(n);
  for (auto& code : d.codes) {
    code = static_cast<uint8_t>(rng());
    if ((code & 0x7F) == 0x7F) code = static_cast<uint8_t>(hard ? code : code - 1);
    if (rng() % 50 == 0) code = (rng() & 1) ? 0x7E : 0xFE;  // +-448
  }
  d.group = c.per_channel ? in : 0;
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  d.scales.resize(c.per_channel ? static_cast<size_t>(out) : 1);
  for (float& s : d.scales) s = sd(rng);
  if (c.a == QActFormat::kFp8PerTensor) d.act_scale = 0.0123f;
  return d;
}

std::vector<float> random_x(int64_t rows, int64_t in, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (float& v : x) v = nd(rng);
  return x;
}

// Row r of x made adversarial by kind: zeros, saturating, denormal, NaN,
// inf, near the bf16 FTZ limit, huge, below it (with the tiny W rows every
// product is tiny, so FTZ decides the output).
void make_row_hard(float* row, int64_t in, int kind, std::mt19937& rng) {
  for (int64_t k = 0; k < in; ++k) {
    float& v = row[k];
    switch (kind) {
      case 0: v = (k % 2) ? -0.0f : 0.0f; break;
      case 1: v = (rng() & 1) ? 1e30f : -3e5f; break;
      case 2: v = from_bits(rng() & 0x807FFFFFu); break;                   // denormals
      case 3: v = k == in / 2 ? NAN : v; break;
      case 4: v = k == in / 3 ? -INFINITY : (k == 0 ? INFINITY : v); break;
      case 5: v = widen(random_bf16(rng, -72, -58)); break;
      case 6: v = widen(random_bf16(rng, 60, 127)); break;
      case 7: v = widen(random_bf16(rng, -72, -66)); break;
      default: break;
    }
  }
}

::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (bits(a[i]) != bits(b[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " (" << hex(a[i]) << ") vs " << b[i]
                                           << " (" << hex(b[i]) << ")";
  return ::testing::AssertionSuccess();
}

std::vector<ThreadPool*> pools() {
  static ThreadPool p1(1), p2(2), p3(3);
  return {&p1, &p2, &p3};
}

// run() on 1, 2 and 3 threads equals run_ref() bit for bit.
void expect_run_equals_ref(const QuantLinear& q, const std::vector<float>& x, int64_t rows, const float* bias,
                           const std::string& what) {
  std::vector<float> want(static_cast<size_t>(rows * q.out())), got(want.size());
  q.run_ref(x.data(), rows, bias, want.data());
  for (ThreadPool* pool : pools()) {
    std::fill(got.begin(), got.end(), 12345.0f);
    q.run(x.data(), rows, bias, got.data(), *pool);
    EXPECT_TRUE(same_bits(got, want)) << what << ", " << pool->size() << " threads, kernel " << q.kernel_name();
  }
}

TEST(Bf16Dot, SupportedCombinations) {
  for (const Combo& c : combos()) EXPECT_TRUE(quant_linear_supported(c.w, c.a, c.per_channel ? 64 : 0, 64));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kFp8E4M3, QActFormat::kFp8PerTensor, 32, 64));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kFp8E4M3, QActFormat::kF32, 0, 64));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kFp8E4M3, QActFormat::kBf16, 0, 64));
  EXPECT_FALSE(quant_linear_supported(QWeightFormat::kBf16, QActFormat::kFp8PerToken, 0, 64));
  QuantLinearData d;
  d.weight = QWeightFormat::kFp8E4M3;
  d.act = QActFormat::kInt8PerToken;
  EXPECT_THROW(native::make_bf16dot_linear(d), Error);
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) void hw_dpbf16(const float* acc, const uint32_t* a, const uint32_t* b,
                                                            float* out) {
  const __m512bh va = reinterpret_cast<__m512bh>(_mm512_loadu_si512(a));
  const __m512bh vb = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b));
  _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), va, vb));
}
// The AVX2 kernel's arithmetic: odd then even FMA under MXCSR FTZ + DAZ.
__attribute__((target("avx2,fma"))) void ftz_fma_pairs(const float* acc, const uint32_t* a, const uint32_t* b,
                                                      float* out) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);
  __asm__ volatile("" ::: "memory");
  for (int h = 0; h < 16; h += 8) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + h));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + h));
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    __m256 r = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(va, hi)),
                               _mm256_castsi256_ps(_mm256_and_si256(vb, hi)), _mm256_loadu_ps(acc + h));
    r = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(va, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(vb, 16)),
                        r);
    __asm__ volatile("" : "+x"(r));
    _mm256_storeu_ps(out + h, r);
  }
  _mm_setcsr(csr);
}
#endif

// The measurement behind the design: vdpbf16ps (and the AVX2 FMA pair) vs
// the emulation, on 2^21 lanes per class: random bit patterns (inf, NaN,
// denormals included), products near the FTZ limit with accumulators there,
// cancelling pairs, and the hand-made tininess-after-rounding cases.
TEST(Bf16Dot, VdpbfMatchesTheEmulation) {
#if defined(__x86_64__)
  const bool hw = cpu_has_avx512_bf16(), avx2 = isa_supported(Isa::kAvx2);
  if (!hw && !avx2) GTEST_SKIP() << "neither AVX512_BF16 nor AVX2 here";
  std::mt19937 rng(7);
  bd::IeeeEnv env;
  int64_t lanes = 0, hw_bad = 0, avx2_bad = 0;
  auto bf = [](float f) { return static_cast<uint16_t>(bits(f) >> 16); };
  for (int it = 0; it < 4 * 131072; ++it) {
    const int cls = it % 4;
    alignas(64) float acc[16], o1[16], o2[16];
    alignas(64) uint32_t a[16], b[16];
    for (int j = 0; j < 16; ++j) {
      uint16_t h[4];
      for (uint16_t& v : h) v = cls == 0 ? static_cast<uint16_t>(rng()) : random_bf16(rng, -70, -56);
      if (cls == 2) h[0] = h[2] ^ 0x8000u, h[1] = h[3];  // a0*b0 = -(a1*b1)
      a[j] = h[0] | (uint32_t{h[2]} << 16), b[j] = h[1] | (uint32_t{h[3]} << 16);
      const uint32_t r = rng();
      acc[j] = cls == 0 ? from_bits(r) : std::ldexp(static_cast<float>(static_cast<int>(r % 4096) - 2048), -137);
      if (std::fabs(acc[j]) < 0x1p-126f) acc[j] = 0.0f;  // accumulators are never denormal
      if (cls == 3 && j < 4) {  // exact value 2^-126 - 2^-150 (flushed), - 2^-151 (kept), 2^-126 - 2^-149
        const float m[4] = {-0x1p-75f, -0x1p-76f, -0x1p-74f, 0x1p-75f};
        acc[j] = j == 3 ? -0x1p-126f : 0x1p-126f;
        a[j] = uint32_t{bf(m[j])} << 16, b[j] = uint32_t{bf(0x1p-75f)} << 16;
      }
    }
    if (hw) hw_dpbf16(acc, a, b, o1);
    if (avx2) ftz_fma_pairs(acc, a, b, o2);
    for (int j = 0; j < 16; ++j) {
      const float e1 = bd::dp_fma(widen(static_cast<uint16_t>(a[j] >> 16)), widen(static_cast<uint16_t>(b[j] >> 16)),
                                  acc[j]);
      const float e = bd::dp_fma(widen(static_cast<uint16_t>(a[j])), widen(static_cast<uint16_t>(b[j])), e1);
      ++lanes;
      // NaN payloads are not part of the contract (outputs are canonical).
      auto same = [&](float v) { return bits(v) == bits(e) || (std::isnan(v) && std::isnan(e)); };
      if (hw && !same(o1[j]) && hw_bad++ < 5)
        ADD_FAILURE() << "vdpbf16ps " << o1[j] << " vs emulation " << e << " class " << cls;
      if (avx2 && !same(o2[j]) && avx2_bad++ < 5)
        ADD_FAILURE() << "avx2 fma " << o2[j] << " vs emulation " << e << " class " << cls;
    }
  }
  std::printf("[ measured ] %lld lanes: vdpbf16ps %s (%lld differ), avx2 FTZ/DAZ FMA %s (%lld differ)\n",
              static_cast<long long>(lanes), hw ? "run" : "absent", static_cast<long long>(hw_bad),
              avx2 ? "run" : "absent", static_cast<long long>(avx2_bad));
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

std::vector<Isa> quantizer_isas() {
  std::vector<Isa> v{Isa::kScalar};
  for (Isa i : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(i)) v.push_back(i);
  return v;
}

// Rows of activations every quantizer must get right: random at several
// magnitudes, every e4m3 value and midpoint times the scale, the clamp
// boundary, denormals, signed zeros, non-finite values.
std::vector<std::vector<float>> quantizer_rows(float scale, std::mt19937& rng) {
  std::vector<std::vector<float>> rows;
  for (float mag : {1.0f, 1e-3f, 1e3f, 1e-38f, 1e37f}) {
    std::vector<float> r = random_x(1, 67, rng, mag);
    rows.push_back(r);
  }
  std::vector<float> grid;
  for (int c = 0; c < 127; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c)), next = fp8_e4m3_to_float(static_cast<uint8_t>(c + 1));
    for (float q : {v, (v + next) / 2, std::nextafter((v + next) / 2, 0.0f), std::nextafter((v + next) / 2, 1e9f)})
      grid.push_back(q * scale), grid.push_back(-q * scale);
  }
  for (float q : {448.0f, 456.0f, 464.0f, 470.0f, 1e9f}) grid.push_back(q * scale), grid.push_back(-q * scale);
  rows.push_back(grid);
  rows.push_back({0.0f, -0.0f, 1e-45f, -1e-40f, 0x1p-126f, 0.0f, -0.0f});
  rows.push_back({0.0f, 0.0f, 0.0f});
  rows.push_back({1.0f, NAN, -2.0f, 3.0f});
  rows.push_back({1.0f, -INFINITY, INFINITY, 2.0f, -NAN});
  return rows;
}

TEST(Bf16Dot, QuantizersMatchSimulateCodes) {
  std::mt19937 rng(11);
  const float act_scale = 0.0123f;
  quant::QuantSpec st;
  st.dtype = quant::QDtype::kFp8E4M3;
  quant::QuantSpec dyn = st;
  dyn.qscheme = quant::QScheme::kPerChannel;
  dyn.is_dynamic = true;
  dyn.ch_axis = 1;
  for (Isa isa : quantizer_isas()) {
    for (const std::vector<float>& row : quantizer_rows(act_scale, rng)) {
      const int64_t n = static_cast<int64_t>(row.size());
      const std::string where = std::string(isa_name(isa)) + ", row of " + std::to_string(n);
      std::vector<uint16_t> codes(static_cast<size_t>(n + 1));
      float s = 0.0f;
      // Static fp8: code value * scale is what fake quantization leaves.
      ASSERT_TRUE(bd::quantize_row(isa, bd::ActCode::kFp8Static, row.data(), n, act_scale, codes.data(), &s));
      EXPECT_EQ(bits(s), bits(act_scale));
      std::vector<float> sim = row;
      quant::fake_quantize_activation(sim.data(), 1, n, st, quant::StaticQParams{act_scale, 0});
      for (int64_t k = 0; k < n; ++k) {
        const float mine = widen(codes[k]) * s;
        EXPECT_TRUE(bits(mine) == bits(sim[k]) || (std::isnan(mine) && std::isnan(sim[k])))
            << where << " static k=" << k << " x=" << row[k] << ": " << mine << " vs " << sim[k];
      }
      // Dynamic per-token fp8: codes and scale as quantize_weight's per-channel row.
      std::vector<float> dsim = row;
      quant::fake_quantize_activation(dsim.data(), 1, n, dyn, std::nullopt);
      bool finite = true;
      for (float v : row) finite = finite && std::isfinite(v);
      const bool ok = bd::quantize_row(isa, bd::ActCode::kFp8Dynamic, row.data(), n, 0.0f, codes.data(), &s);
      EXPECT_EQ(ok, finite) << where;
      if (finite && ok) {
        quant::QuantSpec rowwise = dyn;
        rowwise.ch_axis = 0;
        const quant::QuantizedTensor q =
            quant::quantize_weight(row.data(), 1, static_cast<uint64_t>(n), rowwise, DType::kF32, "x", DType::kF32, 1);
        EXPECT_EQ(bits(s), bits(q.scales[0])) << where;
        for (int64_t k = 0; k < n; ++k) {
          EXPECT_EQ(float_to_fp8_e4m3(widen(codes[k])), q.codes[k]) << where << " dynamic k=" << k;
          EXPECT_EQ(bits(widen(codes[k]) * s), bits(dsim[k])) << where << " dynamic k=" << k;
        }
      }
      // bf16: float_to_bf16 (NaN quiet, RNE, overflow to inf).
      ASSERT_TRUE(bd::quantize_row(isa, bd::ActCode::kBf16, row.data(), n, 0.0f, codes.data(), &s));
      for (int64_t k = 0; k < n; ++k) EXPECT_EQ(codes[k], float_to_bf16(row[k])) << where << " bf16 k=" << k;
      if (n % 2) {
        EXPECT_EQ(codes[n], 0) << "pad";
      }
    }
    // Every float class for bf16, and random bit patterns for fp8.
    std::vector<float> anyf(4099);
    for (float& v : anyf) v = from_bits(static_cast<uint32_t>(rng()));
    std::vector<uint16_t> c(anyf.size() + 1), cs(anyf.size() + 1);
    float s;
    bd::quantize_row(isa, bd::ActCode::kBf16, anyf.data(), 4099, 0.0f, c.data(), &s);
    bd::quantize_row(Isa::kScalar, bd::ActCode::kBf16, anyf.data(), 4099, 0.0f, cs.data(), &s);
    EXPECT_EQ(c, cs) << isa_name(isa);
    bd::quantize_row(isa, bd::ActCode::kFp8Static, anyf.data(), 4099, 1e-20f, c.data(), &s);
    bd::quantize_row(Isa::kScalar, bd::ActCode::kFp8Static, anyf.data(), 4099, 1e-20f, cs.data(), &s);
    EXPECT_EQ(c, cs) << isa_name(isa);
  }
}

struct Shape {
  int64_t rows, in, out;
};

TEST(Bf16Dot, RunEqualsRunRefBitwise) {
  std::mt19937 rng(3);
  // Rows 1, 2 (decode: 8-panel tiles), up to 6 (one row tile), more (fp8 W
  // widened per panel group); in odd and even; out odd, below and above 8 panels.
  const Shape shapes[] = {{1, 1, 1},     {1, 2, 16},    {1, 31, 17},    {1, 40, 300},  {2, 64, 33},
                          {2, 24, 257},  {3, 95, 49},   {5, 96, 64},    {6, 33, 65},   {7, 128, 80},
                          {13, 47, 129}, {37, 200, 31}, {600, 37, 19},  {128, 161, 70}, {3, 0, 5}};
  for (const Combo& c : combos())
    for (const Shape& s : shapes) {
      if (s.in == 0 && c.per_channel) continue;  // in = 0 has one (per-tensor) scale
      const auto q = make_quant_linear(make_data(c, s.out, s.in, rng));
      const std::vector<float> x = random_x(s.rows, s.in, rng);
      const std::vector<float> bias = random_x(1, s.out, rng);
      const std::string what = combo_name(c) + " rows " + std::to_string(s.rows) + " in " + std::to_string(s.in) +
                               " out " + std::to_string(s.out);
      expect_run_equals_ref(*q, x, s.rows, nullptr, what);
      expect_run_equals_ref(*q, x, s.rows, bias.data(), what + " with bias");
    }
}

// Zeros, saturated codes, denormals, NaN / inf rows, products at the FTZ
// limit and overflowing products: still run() == run_ref() bit for bit, and
// the simulate semantics of non-finite inputs hold.
TEST(Bf16Dot, AdversarialInputs) {
  std::mt19937 rng(5);
  for (const Combo& c : combos())
    for (const Shape& s : {Shape{9, 70, 140}, Shape{14, 33, 17}}) {
      const QuantLinearData d = make_data(c, s.out, s.in, rng, /*hard=*/true);
      const auto q = make_quant_linear(d);
      std::vector<float> x = random_x(s.rows, s.in, rng);
      for (int64_t r = 0; r < 8; ++r) make_row_hard(x.data() + r * s.in, s.in, static_cast<int>(r), rng);
      const std::string what = combo_name(c) + " hard";
      std::vector<float> clean = x;  // without the NaN / inf rows 3 and 4
      for (int64_t r = 3; r < 5; ++r) make_row_hard(clean.data() + r * s.in, s.in, 0, rng);
      expect_run_equals_ref(*q, clean, s.rows, nullptr, what + " (finite rows)");
      // The same rows one at a time (decode tiles) and five at once (one row tile).
      for (int64_t r = 0; r < 8; ++r)
        expect_run_equals_ref(*q, std::vector<float>(clean.begin() + r * s.in, clean.begin() + (r + 1) * s.in), 1,
                              nullptr, what + " row " + std::to_string(r));
      const std::vector<float> five(clean.begin(), clean.begin() + 5 * s.in);
      expect_run_equals_ref(*q, five, 5, nullptr, what + " 5 rows");
      // (A dynamic call with NaN / inf is not quantized: see the next test.)
      if (c.a == QActFormat::kFp8PerToken) continue;
      expect_run_equals_ref(*q, x, s.rows, nullptr, what + " (NaN, inf rows)");
      if (c.a != QActFormat::kFp8PerTensor) continue;
      // Static fp8: a NaN activation makes its whole output row NaN (canonical);
      // +-inf saturates to +-448, so with finite W codes the row stays finite.
      std::vector<float> y(static_cast<size_t>(s.rows * s.out));
      q->run(x.data(), s.rows, nullptr, y.data(), *pools()[1]);
      for (int64_t o = 0; o < s.out; ++o) EXPECT_EQ(bits(y[3 * s.out + o]), 0x7FC00000u) << what;
      const QuantLinearData finite_w = make_data(c, s.out, s.in, rng);
      make_quant_linear(finite_w)->run(x.data(), s.rows, nullptr, y.data(), *pools()[1]);
      for (int64_t o = 0; o < s.out; ++o) EXPECT_TRUE(std::isfinite(y[4 * s.out + o])) << what;
    }
}

// An fp8 NaN weight code makes every output it feeds NaN (x · NaN), the
// others stay finite, whichever tile shape computes them.
TEST(Bf16Dot, NanWeightCodeMakesItsOutputNan) {
  std::mt19937 rng(19);
  for (const Combo& c : combos()) {
    if (c.w != QWeightFormat::kFp8E4M3) continue;
    QuantLinearData d = make_data(c, 150, 41, rng);
    d.codes[static_cast<size_t>(7 * 41 + 40)] = 0xFF;  // -NaN, last k (odd in: the pair's pad partner)
    d.codes[static_cast<size_t>(133 * 41 + 3)] = 0x7F;
    const auto q = make_quant_linear(d);
    for (int64_t rows : {1, 2, 5, 9}) {
      const std::vector<float> x = random_x(rows, 41, rng);
      expect_run_equals_ref(*q, x, rows, nullptr, combo_name(c) + " NaN W codes");
      std::vector<float> y(static_cast<size_t>(rows * 150));
      q->run(x.data(), rows, nullptr, y.data(), *pools()[1]);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < 150; ++o)
          EXPECT_EQ(std::isnan(y[r * 150 + o]), o == 7 || o == 133) << combo_name(c) << " r " << r << " o " << o;
    }
    const std::vector<float> w = q->dequantize();
    EXPECT_EQ(bits(w[7 * 41 + 40]), 0xFFC00000u);
    EXPECT_TRUE(std::isnan(w[133 * 41 + 3]));
  }
}

LinearWeight simulate_weight(const QuantLinearData& d, const float* bias) {
  LinearWeight w;
  w.out = d.out;
  w.in = d.in;
  if (d.weight == QWeightFormat::kBf16) {
    for (size_t i = 0; i < d.codes.size(); i += 2) w.f32.push_back(widen(d.codes[i] | (d.codes[i + 1] << 8)));
  } else {
    quant::QuantizedTensor t;
    t.spec.dtype = quant::QDtype::kFp8E4M3;
    t.spec.qscheme = d.group == 0 ? quant::QScheme::kPerTensor : quant::QScheme::kPerChannel;
    t.shape = {static_cast<uint64_t>(d.out), static_cast<uint64_t>(d.in)};
    t.codes = d.codes;
    t.scales = d.scales;
    w.f32 = quant::dequantize_ref(t);
  }
  if (bias) w.bias.assign(bias, bias + d.out);
  return w;
}

// The simulate path's activations: fake quantization (or bf16 rounding).
std::vector<float> simulate_x(const QuantLinearData& d, std::vector<float> x, int64_t rows) {
  quant::QuantSpec spec;
  spec.dtype = quant::QDtype::kFp8E4M3;
  if (d.act == QActFormat::kBf16) {
    for (float& v : x) v = bf16_to_float(float_to_bf16(v));
  } else if (d.act == QActFormat::kFp8PerTensor) {
    quant::fake_quantize_activation(x.data(), rows, d.in, spec, quant::StaticQParams{d.act_scale, 0});
  } else {
    spec.qscheme = quant::QScheme::kPerChannel, spec.is_dynamic = true, spec.ch_axis = 1;
    quant::fake_quantize_activation(x.data(), rows, d.in, spec, std::nullopt);
  }
  return x;
}

// A dynamic call with a NaN or inf activation skips quantization, as the
// simulate hook does: run() is then engine::linear() on the dequantized W
// (bit for bit: it is that call) and run_ref() is linear_ref().
TEST(Bf16Dot, DynamicNonFiniteCallIsUnquantized) {
  std::mt19937 rng(9);
  for (const Combo& c : combos()) {
    if (c.a != QActFormat::kFp8PerToken) continue;
    const QuantLinearData d = make_data(c, 33, 70, rng);
    const auto q = make_quant_linear(d);
    std::vector<float> x = random_x(5, 70, rng);
    x[2 * 70 + 9] = INFINITY;
    const std::vector<float> bias = random_x(1, 33, rng);
    const LinearWeight w = simulate_weight(d, bias.data());
    std::vector<float> want(5 * 33), got(want.size());
    for (ThreadPool* pool : pools()) {
      linear(x.data(), 5, w, want.data(), *pool);
      q->run(x.data(), 5, bias.data(), got.data(), *pool);
      EXPECT_TRUE(same_bits(got, want)) << combo_name(c) << " " << pool->size() << " threads";
    }
    linear_ref(x.data(), 5, w, want.data());
    q->run_ref(x.data(), 5, bias.data(), got.data());
    EXPECT_TRUE(same_bits(got, want)) << combo_name(c) << " run_ref";
    for (int64_t o = 0; o < 33; ++o) EXPECT_FALSE(std::isfinite(got[2 * 33 + o])) << "the inf row";
  }
}

// run() vs simulate (x fake-quantized / bf16-rounded, W dequantized,
// linear_ref accumulating in double: the exact sum of the simulate terms t_k
// = x'_k w'_k up to one rounding). Native sums the exact code products in an
// fp32 FMA chain (relative error <= in·u of Σ|t|), then scales once (2 roundings);
// simulate's x' and w' are each rounded once (2u per term). Bound:
//   |y - y_sim| <= 2·(in + 6)·u·(Σ|t_k| + |b|) + 2u·|y_sim|,
// the factor 2 covering γ's denominator and the reference's own rounding.
// The largest error seen, normalized by Σ|t| + |b|, is printed.
TEST(Bf16Dot, CloseToSimulate) {
  std::mt19937 rng(13);
  double worst = 0.0;
  for (const Combo& c : combos())
    for (const Shape& s : {Shape{1, 576, 96}, Shape{7, 1536, 40}, Shape{64, 255, 33}}) {
      const QuantLinearData d = make_data(c, s.out, s.in, rng);
      const auto q = make_quant_linear(d);
      const std::vector<float> x = random_x(s.rows, s.in, rng, 0.5f);
      const std::vector<float> bias = random_x(1, s.out, rng);
      const LinearWeight w = simulate_weight(d, bias.data());
      const std::vector<float> xs = simulate_x(d, x, s.rows);
      std::vector<float> y(static_cast<size_t>(s.rows * s.out)), ys(y.size());
      q->run(x.data(), s.rows, bias.data(), y.data(), *pools()[1]);
      linear_ref(xs.data(), s.rows, w, ys.data());
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t o = 0; o < s.out; ++o) {
          double mag = std::fabs(bias[o]);
          for (int64_t k = 0; k < s.in; ++k) mag += std::fabs(double(xs[r * s.in + k]) * w.f32[o * s.in + k]);
          const double ref = ys[r * s.out + o], err = std::fabs(y[r * s.out + o] - ref);
          const double bound = 2.0 * (s.in + 6) * kU * mag + 2.0 * kU * std::fabs(ref);
          EXPECT_LE(err, bound) << combo_name(c) << " r " << r << " o " << o;
          if (mag > 0) worst = std::max(worst, err / mag);
        }
    }
  std::printf("[ measured ] worst |native - simulate| / (sum|x'w'| + |b|) = %.3g (u = %.3g)\n", worst, kU);
}

TEST(Bf16Dot, DequantizeBytesAndKernelName) {
  std::mt19937 rng(17);
  for (const Combo& c : combos()) {
    const QuantLinearData d = make_data(c, 37, 45, rng, /*hard=*/true);
    const auto q = make_quant_linear(d);
    EXPECT_TRUE(same_bits(q->dequantize(), simulate_weight(d, nullptr).f32)) << combo_name(c);
    // 3 panels x 23 pairs x 16 outputs x 2 weights (fp8: 1 byte, bf16: 2), 48 scales.
    const size_t per_weight = c.w == QWeightFormat::kBf16 ? 2 : 1;
    EXPECT_EQ(make_quant_linear(make_data(c, 37, 45, rng))->bytes(), 3 * 23 * 16 * 2 * per_weight + 3 * 16 * 4);
    EXPECT_EQ(q->out(), 37);
    EXPECT_EQ(q->in(), 45);
    const std::string name = q->kernel_name();
    EXPECT_EQ(name, cpu_has_avx512_bf16()          ? "avx512-bf16"
                    : isa_supported(Isa::kAvx2)    ? "avx2-fma"
                                                   : "scalar");
  }
}

TEST(Bf16Dot, CappedIsaSubprocesses) {
  test::expect_passes_under_isa_caps("Bf16Dot.*:-Bf16Dot.CappedIsaSubprocesses");
}

// GFLOP/s of run() vs fp32 linear() on the brief's shapes (not a pass/fail
// test): ./qloom_engine_tests --gtest_also_run_disabled_tests --gtest_filter='*Bf16Dot*Speed*'
TEST(Bf16Dot, DISABLED_Speed) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  const Shape shapes[] = {{1, 576, 1536}, {1, 1536, 576}, {1, 576, 576}, {1, 5632, 2048},
                          {512, 576, 1536}, {512, 1536, 576}, {512, 576, 576}, {512, 5632, 2048}};
  auto time_of = [](auto&& f) {
    double best = 1e9;
    for (int i = 0; i < 15; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  std::printf("%-18s %10s %10s %10s %10s\n", "rows,in x out", "f32", "bf16", "fp8 stat", "fp8 dyn");
  for (const Shape& s : shapes) {
    const std::vector<float> x = random_x(s.rows, s.in, rng);
    std::vector<float> y(static_cast<size_t>(s.rows * s.out));
    LinearWeight w;
    w.out = s.out, w.in = s.in, w.f32 = random_x(s.out, s.in, rng);
    const double flop = 2.0 * s.rows * s.in * s.out;
    const double f32 = flop / time_of([&] { linear(x.data(), s.rows, w, y.data(), pool); }) / 1e9;
    double g[3];
    const Combo cs[3] = {combos()[4], combos()[1], combos()[3]};
    for (int i = 0; i < 3; ++i) {
      const auto q = make_quant_linear(make_data(cs[i], s.out, s.in, rng));
      g[i] = flop / time_of([&] { q->run(x.data(), s.rows, nullptr, y.data(), pool); }) / 1e9;
    }
    std::printf("%4lld,%5lldx%-5lld %10.1f %10.1f %10.1f %10.1f\n", static_cast<long long>(s.rows),
                static_cast<long long>(s.in), static_cast<long long>(s.out), f32, g[0], g[1], g[2]);
  }
}

}  // namespace
}  // namespace qloom::engine
