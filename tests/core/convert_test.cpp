// Tests of the bulk conversions (convert.h): every SIMD path bit-exact against
// the scalar reference on exhaustive, random and adversarial inputs, odd
// lengths and unaligned buffers; plus the generic to_f32 / from_f32 for every
// dtype, including the sub-byte packings.
#include "qloom/core/convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

namespace qloom {
namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---- ISA selection -------------------------------------------------------------------

TEST(ConvertIsa, BestIsSupported) {
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  EXPECT_STREQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::kAvx512), "avx512");
  if (isa_supported(Isa::kAvx512)) {
    EXPECT_TRUE(isa_supported(Isa::kAvx2));
  }
  std::printf("best ISA: %s\n", isa_name(best_isa()));
}

TEST(ConvertIsa, UnsupportedIsaThrows) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) continue;
    uint16_t in[1] = {0};
    float out[1];
    try {
      bf16_to_f32(isa, in, out, 1);
      ADD_FAILURE() << "expected Error for " << isa_name(isa);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    }
  }
  if (isa_supported(Isa::kAvx512)) GTEST_SKIP() << "CPU supports every ISA; nothing to reject";
}

// ---- the six dispatched conversions, as uniform callables -------------------------

enum class Op { kBf16ToF32, kF16ToF32, kE4M3ToF32, kF32ToBf16, kF32ToF16, kF32ToE4M3 };

const char* op_name(Op op) {
  switch (op) {
    case Op::kBf16ToF32: return "bf16_to_f32";
    case Op::kF16ToF32: return "f16_to_f32";
    case Op::kE4M3ToF32: return "fp8_e4m3_to_f32";
    case Op::kF32ToBf16: return "f32_to_bf16";
    case Op::kF32ToF16: return "f32_to_f16";
    case Op::kF32ToE4M3: return "f32_to_fp8_e4m3";
  }
  return "?";
}

bool op_decodes(Op op) { return op == Op::kBf16ToF32 || op == Op::kF16ToF32 || op == Op::kE4M3ToF32; }
size_t packed_size(Op op) {
  return (op == Op::kE4M3ToF32 || op == Op::kF32ToE4M3) ? 1 : 2;
}

// Runs `op` on raw byte buffers. `in` / `out` are byte pointers so the tests
// can pass deliberately misaligned packed buffers (the float side is aligned).
void run_op(Op op, Isa isa, const void* in, void* out, size_t n) {
  switch (op) {
    case Op::kBf16ToF32:
      return bf16_to_f32(isa, static_cast<const uint16_t*>(in), static_cast<float*>(out), n);
    case Op::kF16ToF32:
      return f16_to_f32(isa, static_cast<const uint16_t*>(in), static_cast<float*>(out), n);
    case Op::kE4M3ToF32:
      return fp8_e4m3_to_f32(isa, static_cast<const uint8_t*>(in), static_cast<float*>(out), n);
    case Op::kF32ToBf16:
      return f32_to_bf16(isa, static_cast<const float*>(in), static_cast<uint16_t*>(out), n);
    case Op::kF32ToF16:
      return f32_to_f16(isa, static_cast<const float*>(in), static_cast<uint16_t*>(out), n);
    case Op::kF32ToE4M3:
      return f32_to_fp8_e4m3(isa, static_cast<const float*>(in), static_cast<uint8_t*>(out), n);
  }
}

// Reference of one element, straight from float_codec.h (independent of the
// scalar bulk loop).
uint32_t reference(Op op, uint32_t input_bits) {
  switch (op) {
    case Op::kBf16ToF32: return bits_of(bf16_to_float(static_cast<uint16_t>(input_bits)));
    case Op::kF16ToF32: return bits_of(f16_to_float(static_cast<uint16_t>(input_bits)));
    case Op::kE4M3ToF32: return bits_of(fp8_e4m3_to_float(static_cast<uint8_t>(input_bits)));
    case Op::kF32ToBf16: return float_to_bf16(from_bits(input_bits));
    case Op::kF32ToF16: return float_to_f16(from_bits(input_bits));
    case Op::kF32ToE4M3: return float_to_fp8_e4m3(from_bits(input_bits));
  }
  return 0;
}

struct OpIsa {
  Op op;
  Isa isa;
};

std::string op_isa_name(const testing::TestParamInfo<OpIsa>& info) {
  return std::string(op_name(info.param.op)) + "_" + isa_name(info.param.isa);
}

class ConvertExact : public testing::TestWithParam<OpIsa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam().isa))
      GTEST_SKIP() << "CPU lacks " << isa_name(GetParam().isa) << "; path not tested here";
  }
  Op op() const { return GetParam().op; }
  Isa isa() const { return GetParam().isa; }

  void exhaustive_narrow_patterns();
  void random_bit_patterns();
  void odd_lengths_and_misalignment();

  // Converts `inputs` (raw bit patterns, low bits used for narrow inputs)
  // with the ISA under test, starting at byte offset `misalign` of the packed
  // buffer, and checks every output against the reference and that nothing
  // past n was written.
  void check(const std::vector<uint32_t>& inputs, size_t misalign = 0) {
    SCOPED_TRACE(testing::Message() << "misalign " << misalign);
    const size_t n = inputs.size();
    const size_t psz = packed_size(op());
    const bool dec = op_decodes(op());
    constexpr unsigned char kGuard = 0xA5;
    constexpr size_t kPad = 64;

    std::vector<unsigned char> packed(misalign + n * psz + kPad, kGuard);
    std::vector<float> wide(n + kPad / 4);
    std::memset(wide.data(), kGuard, wide.size() * sizeof(float));
    unsigned char* p = packed.data() + misalign;
    if (dec) {
      for (size_t i = 0; i < n; ++i) std::memcpy(p + i * psz, &inputs[i], psz);  // little endian
      run_op(op(), isa(), p, wide.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(bits_of(wide[i]), reference(op(), inputs[i]))
            << op_name(op()) << " input " << std::hex << inputs[i] << " at " << std::dec << i
            << " of " << n;
      for (size_t i = n; i < wide.size(); ++i)
        ASSERT_EQ(bits_of(wide[i]), 0xA5A5A5A5u) << "wrote past the end, n=" << n;
    } else {
      for (size_t i = 0; i < n; ++i) wide[i] = from_bits(inputs[i]);
      run_op(op(), isa(), wide.data(), p, n);
      for (size_t i = 0; i < n; ++i) {
        uint32_t got = 0;
        std::memcpy(&got, p + i * psz, psz);
        ASSERT_EQ(got, reference(op(), inputs[i]))
            << op_name(op()) << " input " << std::hex << inputs[i] << " at " << std::dec << i
            << " of " << n;
      }
      for (size_t i = misalign + n * psz; i < packed.size(); ++i)
        ASSERT_EQ(packed[i], kGuard) << "wrote past the end, n=" << n;
      for (size_t i = 0; i < misalign; ++i) ASSERT_EQ(packed[i], kGuard) << "wrote before start";
    }
  }
};

// Every input pattern of the narrow side (decoders), or a 2^16 sweep of
// float patterns covering every exponent (encoders: top 16 bits exhaustive,
// low 16 bits a fixed mix including the bf16 rounding midpoint 0x8000).
void ConvertExact::exhaustive_narrow_patterns() {
  std::vector<uint32_t> in;
  if (op() == Op::kE4M3ToF32) {
    for (uint32_t c = 0; c < 256; ++c) in.push_back(c);
  } else if (op_decodes(op())) {
    for (uint32_t c = 0; c < 65536; ++c) in.push_back(c);
  } else {
    const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1000, 0x2000};
    for (uint32_t hi = 0; hi < 65536; ++hi) in.push_back((hi << 16) | lows[hi % 8]);
  }
  check(in);
}

void ConvertExact::random_bit_patterns() {
  std::mt19937 rng(42 + static_cast<unsigned>(op()));
  std::vector<uint32_t> in(op_decodes(op()) ? 1 << 16 : 1 << 20);
  const uint32_t mask = op() == Op::kE4M3ToF32 ? 0xFF : op_decodes(op()) ? 0xFFFF : 0xFFFFFFFF;
  for (auto& v : in) v = rng() & mask;
  check(in);
}

std::vector<uint32_t> adversarial_floats() {
  std::vector<uint32_t> v = {
      0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  // zeros, infs
      0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,  // NaNs
      0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000,  // NaN payloads
      0x7F802000, 0x7F801FFF, 0x7FC0FFFF, 0x7F80FFFF,
      0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000,  // FLT_MAX, FLT_MIN
      0x00000001, 0x80000001, 0x007FFFFF, 0x00400000,  // denormals
      0x00008000, 0x00018000, 0x00007FFF, 0x00010000,
      0x7F7F8000, 0x7F7F7FFF, 0x7F7FC000, 0x7F7E8000,  // bf16 overflow edge
      0x477FF000, 0x477FEFFF, 0x477FE000, 0x47800000,  // f16 overflow edge
      0x33000000, 0x33000001, 0x32FFFFFF, 0x33800000,  // f16 subnormal edge
      0x43E80000, 0x43E7FFFF, 0x43E80001, 0x43E00000,  // 464 (e4m3 tie above max)
      0x3A800000, 0x3A7FFFFF, 0x3A800001, 0x3B000000,  // e4m3 2^-10 / 2^-9
      0x3C800000, 0x3C7FFFFF, 0x3C780000, 0x3C7C0000,  // e4m3 2^-6 (min normal)
  };
  // Every bf16, f16 and e4m3 midpoint, and one float step either side.
  auto add_mid = [&v](double lo, double hi) {
    const double mid = (lo + hi) / 2;
    if (!(mid <= FLT_MAX)) return;
    const float m = static_cast<float>(mid);
    for (float x : {m, std::nextafter(m, kInf), std::nextafter(m, 0.0f)}) {
      v.push_back(bits_of(x));
      v.push_back(bits_of(-x));
    }
  };
  for (uint32_t c = 0; c < 0x7F80; ++c) add_mid(bf16_to_float(c), bf16_to_float(c + 1));
  for (uint32_t c = 0; c < 0x7C00; ++c) add_mid(f16_to_float(c), f16_to_float(c + 1));
  for (uint8_t c = 0; c < 0x7E; ++c) add_mid(fp8_e4m3_to_float(c), fp8_e4m3_to_float(c + 1));
  add_mid(448.0, 480.0);  // the tie just above e4m3's max (464)
  return v;
}

// Lengths around every vector width and unaligned packed buffers; the guard
// bytes catch writes past n.
void ConvertExact::odd_lengths_and_misalignment() {
  std::mt19937 rng(99);
  const auto adv = adversarial_floats();
  for (size_t n : {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 127, 129}) {
    for (size_t misalign : {0, 1, 3}) {
      std::vector<uint32_t> in(n);
      for (size_t i = 0; i < n; ++i) {
        if (op() == Op::kE4M3ToF32) in[i] = rng() & 0xFF;
        else if (op_decodes(op())) in[i] = rng() & 0xFFFF;
        else in[i] = adv[rng() % adv.size()];
      }
      check(in, misalign);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

class ConvertDecodeExact : public ConvertExact {};
class ConvertEncodeExact : public ConvertExact {};

TEST_P(ConvertDecodeExact, EveryInputCode) { exhaustive_narrow_patterns(); }
TEST_P(ConvertDecodeExact, RandomCodes) { random_bit_patterns(); }
TEST_P(ConvertDecodeExact, OddLengthsAndMisalignment) { odd_lengths_and_misalignment(); }

TEST_P(ConvertEncodeExact, SweepOfFloatPatterns) { exhaustive_narrow_patterns(); }
TEST_P(ConvertEncodeExact, RandomBitPatterns) { random_bit_patterns(); }
TEST_P(ConvertEncodeExact, OddLengthsAndMisalignment) { odd_lengths_and_misalignment(); }
TEST_P(ConvertEncodeExact, AdversarialFloats) { check(adversarial_floats()); }

// Floats near the e4m3 / f16 range: random values with exponents spread
// over the target's whole range (random bit patterns rarely land there).
TEST_P(ConvertEncodeExact, RandomInRangeFloats) {
  std::mt19937 rng(7);
  std::vector<uint32_t> in(1 << 18);
  for (auto& v : in) {
    const uint32_t exp = 90 + rng() % 60;  // 2^-37 .. 2^22
    v = (rng() & 0x807FFFFFu) | (exp << 23);
  }
  check(in);
}

std::vector<OpIsa> op_isas(std::initializer_list<Op> ops) {
  std::vector<OpIsa> v;
  for (Op op : ops)
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) v.push_back({op, isa});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllPaths, ConvertDecodeExact,
                         testing::ValuesIn(op_isas({Op::kBf16ToF32, Op::kF16ToF32, Op::kE4M3ToF32})),
                         op_isa_name);
INSTANTIATE_TEST_SUITE_P(AllPaths, ConvertEncodeExact,
                         testing::ValuesIn(op_isas({Op::kF32ToBf16, Op::kF32ToF16, Op::kF32ToE4M3})),
                         op_isa_name);

// The dispatched entry points (no Isa argument) agree with the scalar path.
TEST(ConvertIsa, DefaultDispatchMatchesScalar) {
  std::vector<uint16_t> h(1000);
  std::mt19937 rng(5);
  for (auto& x : h) x = static_cast<uint16_t>(rng());
  std::vector<float> a(1000), b(1000);
  bf16_to_f32(h.data(), a.data(), h.size());
  bf16_to_f32(Isa::kScalar, h.data(), b.data(), h.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  std::vector<uint16_t> h2(1000), h3(1000);
  f32_to_bf16(a.data(), h2.data(), a.size());
  f32_to_bf16(Isa::kScalar, a.data(), h3.data(), a.size());
  EXPECT_EQ(h2, h3);
  f16_to_f32(h.data(), a.data(), h.size());
  f16_to_f32(Isa::kScalar, h.data(), b.data(), h.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
  f32_to_f16(a.data(), h2.data(), a.size());
  f32_to_f16(Isa::kScalar, a.data(), h3.data(), a.size());
  EXPECT_EQ(h2, h3);
  std::vector<uint8_t> c(1000), d(1000);
  f32_to_fp8_e4m3(a.data(), c.data(), a.size());
  f32_to_fp8_e4m3(Isa::kScalar, a.data(), d.data(), a.size());
  EXPECT_EQ(c, d);
  fp8_e4m3_to_f32(c.data(), a.data(), c.size());
  fp8_e4m3_to_f32(Isa::kScalar, c.data(), b.data(), c.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// ---- generic to_f32 / from_f32 ----------------------------------------------------------

std::vector<float> decode(DType t, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  to_f32(t, bytes.data(), out.data(), n);
  return out;
}
std::vector<uint8_t> encode(DType t, const std::vector<float>& in, size_t bytes) {
  std::vector<uint8_t> out(bytes, 0xEE);
  from_f32(t, in.data(), out.data(), in.size());
  return out;
}

TEST(GenericConvert, FloatFormatsMatchReference) {
  std::mt19937 rng(3);
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -2.5f, 448.0f, 1e-3f, 3e38f, kInf, -kInf,
                           std::nanf(""), 0x1p-130f, 65520.0f, 7.25f, -28.0f};
  for (int i = 0; i < 2000; ++i) xs.push_back(std::ldexp(static_cast<float>(rng()) / 4294967296.0f - 0.5f, static_cast<int>(rng() % 40) - 20));
  const size_t n = xs.size();

  auto u16 = [](const std::vector<uint8_t>& b, size_t i) {
    return static_cast<uint16_t>(b[2 * i] | (b[2 * i + 1] << 8));
  };
  {
    auto b = encode(DType::kBF16, xs, 2 * n);
    auto back = decode(DType::kBF16, b, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(u16(b, i), float_to_bf16(xs[i]));
      ASSERT_EQ(bits_of(back[i]), bits_of(bf16_to_float(u16(b, i))));
    }
  }
  {
    auto b = encode(DType::kF16, xs, 2 * n);
    auto back = decode(DType::kF16, b, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(u16(b, i), float_to_f16(xs[i]));
      ASSERT_EQ(bits_of(back[i]), bits_of(f16_to_float(u16(b, i))));
    }
  }
  struct ByteFormat {
    DType t;
    uint8_t (*enc)(float);
    float (*dec)(uint8_t);
  };
  const ByteFormat fmts[] = {
      {DType::kF8_E4M3, [](float x) { return float_to_fp8_e4m3(x); },
       [](uint8_t c) { return fp8_e4m3_to_float(c); }},
      {DType::kF8_E5M2, [](float x) { return float_to_fp8_e5m2(x); },
       [](uint8_t c) { return fp8_e5m2_to_float(c); }},
      {DType::kE8M0, [](float x) { return float_to_e8m0(x); },
       [](uint8_t c) { return e8m0_to_float(c); }},
  };
  for (const auto& f : fmts) {
    auto b = encode(f.t, xs, n);
    auto back = decode(f.t, b, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(b[i], f.enc(xs[i])) << dtype_name(f.t) << " " << xs[i];
      ASSERT_EQ(bits_of(back[i]), bits_of(f.dec(b[i]))) << dtype_name(f.t);
    }
  }
  {
    std::vector<uint8_t> b(8 * n);
    from_f32(DType::kF64, xs.data(), b.data(), n);
    std::vector<float> back(n);
    to_f32(DType::kF64, b.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, &b[8 * i], 8);
      if (std::isnan(xs[i])) {
        ASSERT_TRUE(std::isnan(d));
        ASSERT_TRUE(std::isnan(back[i]));
      } else {
        ASSERT_EQ(d, static_cast<double>(xs[i]));
        ASSERT_EQ(bits_of(back[i]), bits_of(xs[i]));
      }
    }
    auto b32 = encode(DType::kF32, xs, 4 * n);
    auto back32 = decode(DType::kF32, b32, n);
    EXPECT_EQ(0, std::memcmp(back32.data(), xs.data(), 4 * n));
  }
}

TEST(GenericConvert, F64ToF32RoundsAndOverflows) {
  const double in[] = {1.0 + 0x1p-24, 1.0 + 0x1p-24 + 0x1p-40, 1e300, -1e300, 0x1p-160};
  std::vector<float> out(5);
  to_f32(DType::kF64, in, out.data(), 5);
  EXPECT_EQ(out[0], 1.0f);  // tie -> even
  EXPECT_EQ(out[1], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(out[2], kInf);
  EXPECT_EQ(out[3], -kInf);
  EXPECT_EQ(bits_of(out[4]), 0u);
}

TEST(GenericConvert, Fp4NibblePacking) {
  // Elements 0..4 = 0.5, 1, -6, 3, 2: codes 1, 2, F, 5, 4.
  const std::vector<float> xs = {0.5f, 1.0f, -6.0f, 3.0f, 2.0f};
  auto b = encode(DType::kF4_E2M1, xs, 3);
  EXPECT_EQ(b, (std::vector<uint8_t>{0x21, 0x5F, 0x04}));  // odd n: high nibble 0
  auto back = decode(DType::kF4_E2M1, {0x21, 0x5F, 0xF4}, 5);  // last high nibble ignored
  EXPECT_EQ(back, xs);
  // All 256 byte values decode to the pair of nibbles.
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  auto vals = decode(DType::kF4_E2M1, all, 512);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(bits_of(vals[2 * i]), bits_of(fp4_e2m1_to_float(static_cast<uint8_t>(i & 15))));
    EXPECT_EQ(bits_of(vals[2 * i + 1]), bits_of(fp4_e2m1_to_float(static_cast<uint8_t>(i >> 4))));
  }
  auto again = encode(DType::kF4_E2M1, vals, 256);
  EXPECT_EQ(again, all);
}

TEST(GenericConvert, Fp6BitstreamPacking) {
  // e2m3 codes: 1.0 = 0x08, -7.5 = 0x3F, 0.125 = 0x01, 2.0 = 0x10.
  // Stream: 0x08 | 0x3F << 6 | 0x01 << 12 | 0x10 << 18 = 0x401FC8.
  const std::vector<float> xs = {1.0f, -7.5f, 0.125f, 2.0f};
  auto b = encode(DType::kF6_E2M3, xs, 3);
  EXPECT_EQ(b, (std::vector<uint8_t>{0xC8, 0x1F, 0x40}));
  EXPECT_EQ(decode(DType::kF6_E2M3, b, 4), xs);

  // Partial groups: n = 1, 2, 3, 5 take ceil(6n/8) bytes with zero padding.
  auto b1 = encode(DType::kF6_E2M3, {-7.5f}, 1);
  EXPECT_EQ(b1, (std::vector<uint8_t>{0x3F}));
  auto b2 = encode(DType::kF6_E2M3, {1.0f, -7.5f}, 2);
  EXPECT_EQ(b2, (std::vector<uint8_t>{0xC8, 0x0F}));
  auto b3 = encode(DType::kF6_E2M3, {1.0f, -7.5f, 0.125f}, 3);
  EXPECT_EQ(b3, (std::vector<uint8_t>{0xC8, 0x1F, 0x00}));
  auto b5 = encode(DType::kF6_E2M3, {1.0f, -7.5f, 0.125f, 2.0f, -7.5f}, 4);
  EXPECT_EQ(b5, (std::vector<uint8_t>{0xC8, 0x1F, 0x40, 0x3F}));
  EXPECT_EQ(decode(DType::kF6_E2M3, b5, 5), (std::vector<float>{1.0f, -7.5f, 0.125f, 2.0f, -7.5f}));

  // Every code of both fp6 formats survives encode/decode at every position
  // of a group (n = 67 covers partial tails too).
  for (DType t : {DType::kF6_E2M3, DType::kF6_E3M2}) {
    const MinifloatFormat* f = minifloat_format(t);
    for (size_t n : {64, 65, 66, 67}) {
      std::vector<float> vals(n);
      for (size_t i = 0; i < n; ++i) vals[i] = decode_minifloat(*f, static_cast<uint32_t>((i * 7 + 3) % 64));
      auto packed = encode(t, vals, (6 * n + 7) / 8);
      auto back = decode(t, packed, n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(back[i]), bits_of(vals[i])) << i;
    }
  }
}

TEST(GenericConvert, IntegersToF32) {
  {
    const int8_t v[] = {-128, -1, 0, 127};
    std::vector<float> out(4);
    to_f32(DType::kI8, v, out.data(), 4);
    EXPECT_EQ(out, (std::vector<float>{-128, -1, 0, 127}));
  }
  {
    const uint16_t v[] = {0, 65535};
    std::vector<float> out(2);
    to_f32(DType::kU16, v, out.data(), 2);
    EXPECT_EQ(out, (std::vector<float>{0, 65535}));
  }
  {
    const int32_t v[] = {INT32_MIN, 16777217, -5};
    std::vector<float> out(3);
    to_f32(DType::kI32, v, out.data(), 3);
    EXPECT_EQ(out, (std::vector<float>{-2147483648.0f, 16777216.0f, -5.0f}));  // 2^24+1 ties to even
  }
  {
    const int64_t v[] = {INT64_MIN, INT64_MAX, 3};
    std::vector<float> out(3);
    to_f32(DType::kI64, v, out.data(), 3);
    EXPECT_EQ(out, (std::vector<float>{-0x1p63f, 0x1p63f, 3.0f}));
  }
  {
    const uint64_t v[] = {UINT64_MAX, 0};
    std::vector<float> out(2);
    to_f32(DType::kU64, v, out.data(), 2);
    EXPECT_EQ(out, (std::vector<float>{0x1p64f, 0.0f}));
  }
  {
    const uint32_t v[] = {UINT32_MAX};
    float out;
    to_f32(DType::kU32, v, &out, 1);
    EXPECT_EQ(out, 0x1p32f);
  }
  {
    const uint8_t v[] = {0, 1, 2, 255};
    std::vector<float> out(4);
    to_f32(DType::kBool, v, out.data(), 4);
    EXPECT_EQ(out, (std::vector<float>{0, 1, 1, 1}));
    to_f32(DType::kU8, v, out.data(), 4);
    EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 255}));
  }
  {
    // i4 / u4: low nibble first; 0x8F -> elements 0xF, 0x8.
    const uint8_t v[] = {0x8F, 0x70, 0x01};
    std::vector<float> out(5);
    to_f32(DType::kI4, v, out.data(), 5);
    EXPECT_EQ(out, (std::vector<float>{-1, -8, 0, 7, 1}));
    to_f32(DType::kU4, v, out.data(), 5);
    EXPECT_EQ(out, (std::vector<float>{15, 8, 0, 7, 1}));
  }
}

TEST(GenericConvert, UnalignedIntegerInput) {
  alignas(8) unsigned char buf[1 + 3 * 8] = {};
  const int64_t v[] = {-7, 1 << 20, 42};
  std::memcpy(buf + 1, v, sizeof v);
  std::vector<float> out(3);
  to_f32(DType::kI64, buf + 1, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{-7.0f, 1048576.0f, 42.0f}));
  std::vector<uint16_t> h = {0x3F80, 0xC000, 0x7F81};
  std::memcpy(buf + 1, h.data(), 6);
  to_f32(DType::kBF16, buf + 1, out.data(), 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(bits_of(out[2]), 0x7FC10000u);
}

TEST(GenericConvert, FloatToIntegersRoundHalfEvenAndSaturate) {
  const std::vector<float> xs = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4999998f, 2.5000002f,
                                 1e10f, -1e10f, kInf, -kInf, std::nanf(""), 127.5f, -128.5f, 8388609.0f};
  {
    std::vector<int8_t> out(xs.size());
    from_f32(DType::kI8, xs.data(), out.data(), xs.size());
    EXPECT_EQ(out, (std::vector<int8_t>{0, 2, 2, 0, -2, -2, 2, 3, 127, -128, 127, -128, 0, 127, -128, 127}));
  }
  {
    std::vector<uint8_t> out(xs.size());
    from_f32(DType::kU8, xs.data(), out.data(), xs.size());
    EXPECT_EQ(out, (std::vector<uint8_t>{0, 2, 2, 0, 0, 0, 2, 3, 255, 0, 255, 0, 0, 128, 0, 255}));
  }
  {
    std::vector<int32_t> out(xs.size());
    from_f32(DType::kI32, xs.data(), out.data(), xs.size());
    EXPECT_EQ(out, (std::vector<int32_t>{0, 2, 2, 0, -2, -2, 2, 3, INT32_MAX, INT32_MIN, INT32_MAX,
                                         INT32_MIN, 0, 128, -128, 8388609}));
  }
  {
    std::vector<int64_t> out(xs.size());
    from_f32(DType::kI64, xs.data(), out.data(), xs.size());
    EXPECT_EQ(out[8], 10000000000LL);
    EXPECT_EQ(out[10], INT64_MAX);
    EXPECT_EQ(out[11], INT64_MIN);
    EXPECT_EQ(out[12], 0);
    const float big[] = {0x1p63f, -0x1p63f, 0x1p62f};
    from_f32(DType::kI64, big, out.data(), 3);
    EXPECT_EQ(out[0], INT64_MAX);
    EXPECT_EQ(out[1], INT64_MIN);
    EXPECT_EQ(out[2], int64_t{1} << 62);
  }
  {
    std::vector<uint64_t> out(3);
    const float big[] = {0x1p64f, 0x1p63f, -1.0f};
    from_f32(DType::kU64, big, out.data(), 3);
    EXPECT_EQ(out[0], UINT64_MAX);
    EXPECT_EQ(out[1], uint64_t{1} << 63);
    EXPECT_EQ(out[2], 0u);
  }
  {
    std::vector<uint16_t> out(2);
    const float v[] = {65535.5f, 65534.5f};
    from_f32(DType::kU16, v, out.data(), 2);
    EXPECT_EQ(out, (std::vector<uint16_t>{65535, 65534}));
  }
  {
    const std::vector<float> v = {0.0f, -0.0f, 0.1f, std::nanf(""), -3.0f};
    std::vector<uint8_t> out(v.size());
    from_f32(DType::kBool, v.data(), out.data(), v.size());
    EXPECT_EQ(out, (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  }
  {
    // i4: -8.5 -> -8, 7.5 -> 7 (saturated after rounding to 8), -1 -> 0xF, 2.5 -> 2, NaN -> 0.
    const std::vector<float> v = {-8.5f, 7.5f, -1.0f, 2.5f, std::nanf("")};
    auto b = encode(DType::kI4, v, 3);
    EXPECT_EQ(b, (std::vector<uint8_t>{0x78, 0x2F, 0x00}));
    auto back = decode(DType::kI4, b, 5);
    EXPECT_EQ(back, (std::vector<float>{-8, 7, -1, 2, 0}));
    auto u = encode(DType::kU4, {-1.0f, 15.5f, 3.5f}, 2);
    EXPECT_EQ(u, (std::vector<uint8_t>{0xF0, 0x04}));
  }
}

TEST(GenericConvert, ZeroLengthIsANoOp) {
  for (int t = 0; t < kNumDTypes; ++t) {
    to_f32(static_cast<DType>(t), nullptr, nullptr, 0);
    from_f32(static_cast<DType>(t), nullptr, nullptr, 0);
  }
}

}  // namespace
}  // namespace qloom
