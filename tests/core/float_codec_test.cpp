// Tests of the scalar reference codec (float_codec.h): exhaustive code round
// trips, every rounding midpoint, specials, spot values, and a brute-force
// nearest-value oracle on random inputs.
#include "qloom/core/float_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace qloom {
namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
constexpr float kInf = std::numeric_limits<float>::infinity();

struct FormatCase {
  const char* name;
  MinifloatFormat fmt;
  Overflow overflow;
};

std::string case_name(const testing::TestParamInfo<FormatCase>& info) { return info.param.name; }

const FormatCase kCases[] = {
    {"f16", kF16Format, Overflow::kToInf},
    {"bf16", kBF16Format, Overflow::kToInf},
    {"fp8_e4m3", kFp8E4M3Format, Overflow::kSaturate},
    {"fp8_e5m2", kFp8E5M2Format, Overflow::kToInf},
    {"fp8_e5m2_sat", kFp8E5M2Format, Overflow::kSaturate},
    {"fp6_e2m3", kFp6E2M3Format, Overflow::kSaturate},
    {"fp6_e3m2", kFp6E3M2Format, Overflow::kSaturate},
    {"fp4_e2m1", kFp4E2M1Format, Overflow::kSaturate},
};

class MinifloatTest : public testing::TestWithParam<FormatCase> {
 protected:
  const MinifloatFormat& f() const { return GetParam().fmt; }
  int total_bits() const { return 1 + f().exp_bits + f().man_bits; }
  uint32_t num_codes() const { return 1u << total_bits(); }
  uint32_t sign_bit() const { return 1u << (total_bits() - 1); }
  uint32_t max_code() const { return minifloat_max_code(f()); }
  uint32_t inf_code() const { return ((1u << f().exp_bits) - 1) << f().man_bits; }
  bool to_inf() const {
    return f().specials == FloatSpecials::kIeee && GetParam().overflow == Overflow::kToInf;
  }
  uint32_t enc(float x) const { return encode_minifloat(f(), x, GetParam().overflow); }
  float dec(uint32_t c) const { return decode_minifloat(f(), c); }

  // Independent decoder in double arithmetic, for finite codes only.
  double formula(uint32_t c) const {
    const int m = f().man_bits;
    const uint32_t exp = (c >> m) & ((1u << f().exp_bits) - 1);
    const uint32_t man = c & ((1u << m) - 1);
    const double mag = exp == 0 ? std::ldexp(static_cast<double>(man), 1 - f().bias - m)
                                : std::ldexp(static_cast<double>(man + (1u << m)),
                                             static_cast<int>(exp) - f().bias - m);
    return (c & sign_bit()) ? -mag : mag;
  }
  bool code_is_nan(uint32_t c) const {
    const uint32_t mag = c & (sign_bit() - 1);
    switch (f().specials) {
      case FloatSpecials::kIeee: return mag > inf_code();
      case FloatSpecials::kFiniteNanOnly: return mag == sign_bit() - 1;
      case FloatSpecials::kNone: return false;
    }
    return false;
  }
  bool code_is_inf(uint32_t c) const {
    return f().specials == FloatSpecials::kIeee && (c & (sign_bit() - 1)) == inf_code();
  }
  // The code an encoded NaN takes for a decoded NaN code (documented policy).
  uint32_t nan_reencode(uint32_t c) const {
    if (f().specials == FloatSpecials::kIeee) return c | (1u << (f().man_bits - 1));
    return c;  // FN: 0x7F / 0xFF are the only NaNs and re-encode to themselves
  }
};

TEST_P(MinifloatTest, EveryCodeDecodesAndReencodes) {
  for (uint32_t c = 0; c < num_codes(); ++c) {
    const float v = dec(c);
    if (code_is_nan(c)) {
      ASSERT_TRUE(std::isnan(v)) << std::hex << c;
      EXPECT_EQ(std::signbit(v), (c & sign_bit()) != 0) << std::hex << c;
      ASSERT_EQ(enc(v), nan_reencode(c)) << std::hex << c;
    } else if (code_is_inf(c)) {
      ASSERT_TRUE(std::isinf(v)) << std::hex << c;
      const uint32_t want = to_inf() ? c : (c & sign_bit()) | max_code();
      ASSERT_EQ(enc(v), want) << std::hex << c;
    } else {
      ASSERT_EQ(static_cast<double>(v), formula(c)) << std::hex << c;
      ASSERT_EQ(std::signbit(v), (c & sign_bit()) != 0) << std::hex << c;
      ASSERT_EQ(enc(v), c) << std::hex << c;
    }
  }
}

TEST_P(MinifloatTest, DecodedNansAreQuiet) {
  for (uint32_t c = 0; c < num_codes(); ++c) {
    if (!code_is_nan(c)) continue;
    EXPECT_NE(bits_of(dec(c)) & 0x00400000u, 0u) << std::hex << c;
  }
}

// Every midpoint between adjacent positive finite values rounds to the even
// code; one float step either side rounds to the nearer value. Mirrored for
// negative values.
TEST_P(MinifloatTest, MidpointsRoundToEven) {
  for (uint32_t c = 0; c < max_code(); ++c) {
    const double lo = dec(c), hi = dec(c + 1);
    const double mid = (lo + hi) / 2;
    const float midf = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(midf), mid) << "midpoint not exact in float, code " << c;
    const uint32_t even = (c & 1) ? c + 1 : c;
    ASSERT_EQ(enc(midf), even) << std::hex << c;
    ASSERT_EQ(enc(std::nextafter(midf, kInf)), c + 1) << std::hex << c;
    ASSERT_EQ(enc(std::nextafter(midf, 0.0f)), c) << std::hex << c;
    ASSERT_EQ(enc(-midf), sign_bit() | even) << std::hex << c;
    ASSERT_EQ(enc(-std::nextafter(midf, kInf)), sign_bit() | (c + 1)) << std::hex << c;
    ASSERT_EQ(enc(-std::nextafter(midf, 0.0f)), sign_bit() | c) << std::hex << c;
  }
}

TEST_P(MinifloatTest, OverflowPolicy) {
  const double top = dec(max_code());
  const double ulp = top - static_cast<double>(dec(max_code() - 1));
  const double over_mid = top + ulp / 2;  // midpoint to the next (missing) value
  const uint32_t overflow_code = to_inf() ? inf_code() : max_code();
  if (over_mid <= FLT_MAX) {
    const float m = static_cast<float>(over_mid);
    ASSERT_EQ(static_cast<double>(m), over_mid);
    // max has an odd mantissa (all ones, or 110 for e4m3fn where 111 is NaN),
    // so for IEEE formats the tie goes up to inf; saturating formats clamp.
    const bool max_is_odd = (max_code() & 1) != 0;
    EXPECT_EQ(enc(m), max_is_odd ? overflow_code : max_code());
    EXPECT_EQ(enc(std::nextafter(m, 0.0f)), max_code());
    EXPECT_EQ(enc(std::nextafter(m, kInf)), overflow_code);
    EXPECT_EQ(enc(-std::nextafter(m, kInf)), sign_bit() | overflow_code);
  }
  EXPECT_EQ(enc(static_cast<float>(top)), max_code());
  EXPECT_EQ(enc(FLT_MAX), overflow_code);
  EXPECT_EQ(enc(-FLT_MAX), sign_bit() | overflow_code);
  EXPECT_EQ(enc(kInf), to_inf() ? inf_code() : max_code());
  EXPECT_EQ(enc(-kInf), sign_bit() | (to_inf() ? inf_code() : max_code()));
}

TEST_P(MinifloatTest, ZerosAndSubnormals) {
  EXPECT_EQ(enc(0.0f), 0u);
  EXPECT_EQ(enc(-0.0f), sign_bit());
  EXPECT_EQ(bits_of(dec(0)), 0u);
  EXPECT_EQ(bits_of(dec(sign_bit())), 0x80000000u);
  const float tiny = dec(1);  // smallest subnormal
  EXPECT_EQ(static_cast<double>(tiny), std::ldexp(1.0, 1 - f().bias - f().man_bits));
  EXPECT_EQ(enc(tiny), 1u);
  EXPECT_EQ(enc(-tiny), sign_bit() | 1u);
  EXPECT_EQ(enc(tiny / 2), 0u);                    // tie -> even (zero)
  EXPECT_EQ(enc(-tiny / 2), sign_bit());           // keeps the sign
  EXPECT_EQ(enc(std::nextafter(tiny / 2, kInf)), 1u);
  EXPECT_EQ(enc(tiny * 1.5f), 2u);                 // tie between 1 and 2 -> 2
  EXPECT_EQ(enc(from_bits(1)), 0u);                // smallest float denormal
  EXPECT_EQ(enc(-from_bits(1)), sign_bit());
  EXPECT_EQ(enc(FLT_MIN), f().bias == 127 ? 1u << f().man_bits : 0u);
  // Largest subnormal and smallest normal are adjacent codes.
  const uint32_t min_normal = 1u << f().man_bits;
  EXPECT_EQ(static_cast<double>(dec(min_normal)), std::ldexp(1.0, 1 - f().bias));
  EXPECT_EQ(enc(dec(min_normal - 1)), min_normal - 1);
}

TEST_P(MinifloatTest, NanPolicy) {
  const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                           0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u, 0x7F802000u};
  for (uint32_t b : nans) {
    const uint32_t c = enc(from_bits(b));
    const bool neg = (b >> 31) != 0;
    switch (f().specials) {
      case FloatSpecials::kIeee: {
        const int m = f().man_bits;
        const uint32_t want = (neg ? sign_bit() : 0) | inf_code() | (1u << (m - 1)) |
                              ((b & 0x7FFFFFu) >> (23 - m));
        EXPECT_EQ(c, want) << std::hex << b;
        EXPECT_TRUE(code_is_nan(c));
        break;
      }
      case FloatSpecials::kFiniteNanOnly:
        EXPECT_EQ(c, neg ? 0xFFu : 0x7Fu) << std::hex << b;
        break;
      case FloatSpecials::kNone:
        EXPECT_EQ(c, 0u) << std::hex << b;  // documented: NaN -> +0
        break;
    }
  }
}

// Brute-force oracle: the nearest of all representable values (plus the
// virtual value one ulp above max, which stands for overflow), ties to even.
TEST_P(MinifloatTest, MatchesNearestValueOracle) {
  std::vector<double> vals;
  for (uint32_t c = 0; c <= max_code(); ++c) vals.push_back(dec(c));
  const double ulp_top = vals[max_code()] - vals[max_code() - 1];
  vals.push_back(vals[max_code()] + ulp_top);  // index max_code + 1 = overflow
  const uint32_t overflow_code = to_inf() ? inf_code() : max_code();

  auto oracle = [&](float x) -> uint32_t {
    const uint32_t sign = std::signbit(x) ? sign_bit() : 0;
    const double a = std::fabs(static_cast<double>(x));
    size_t hi = std::lower_bound(vals.begin(), vals.end(), a) - vals.begin();
    uint32_t code;
    if (hi == vals.size()) {
      code = static_cast<uint32_t>(vals.size() - 1);
    } else if (vals[hi] == a || hi == 0) {
      code = static_cast<uint32_t>(hi);
    } else {
      const double dlo = a - vals[hi - 1], dhi = vals[hi] - a;
      if (dlo < dhi) code = static_cast<uint32_t>(hi - 1);
      else if (dhi < dlo) code = static_cast<uint32_t>(hi);
      else code = static_cast<uint32_t>((hi - 1) % 2 == 0 ? hi - 1 : hi);
    }
    if (code > max_code()) code = overflow_code;
    return sign | code;
  };

  std::mt19937 rng(1234);
  const double top = vals[max_code()];
  std::uniform_real_distribution<double> in_range(-top * 1.1, top * 1.1);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 100000; ++i) {
    float x;
    if (i % 2 == 0) {
      x = static_cast<float>(in_range(rng));
      if (i % 4 == 0) x = static_cast<float>(x * std::ldexp(1.0, -static_cast<int>(rng() % 40)));
    } else {
      x = from_bits(any_bits(rng));
      if (!std::isfinite(x)) continue;
    }
    ASSERT_EQ(enc(x), oracle(x)) << "x=" << x << " bits=" << std::hex << bits_of(x);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MinifloatTest, testing::ValuesIn(kCases), case_name);

// ---- spot values -------------------------------------------------------------------

TEST(FloatCodec, E4M3KnownValues) {
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x08), 0x1p-6f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x78), 256.0f);  // exponent 1111 is a normal binade
  EXPECT_EQ(fp8_e4m3_to_float(0x7D), 416.0f);
  EXPECT_EQ(bits_of(fp8_e4m3_to_float(0x7F)), 0x7FC00000u);
  EXPECT_EQ(bits_of(fp8_e4m3_to_float(0xFF)), 0xFFC00000u);
  EXPECT_EQ(bits_of(fp8_e4m3_to_float(0x80)), 0x80000000u);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7E);      // tie -> even (448)
  EXPECT_EQ(float_to_fp8_e4m3(465.0f), 0x7E);      // saturates
  EXPECT_EQ(float_to_fp8_e4m3(1e6f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-kInf), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(float_to_fp8_e4m3(-std::nanf("")), 0xFF);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-10f), 0x00);    // half of 2^-9: tie -> 0
  EXPECT_EQ(float_to_fp8_e4m3(0x1.8p-9f), 0x02);   // 1.5 * 2^-9: tie -> 2
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);     // 1 + 1/16: tie -> 1.0 (even)
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3A);     // 1 + 3/16: tie -> 1.25 (even)
}

TEST(FloatCodec, E5M2KnownValues) {
  EXPECT_EQ(fp8_e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x3C), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x01), 0x1p-16f);
  EXPECT_EQ(fp8_e5m2_to_float(0x04), 0x1p-14f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7C), kInf);
  EXPECT_EQ(fp8_e5m2_to_float(0xFC), -kInf);
  EXPECT_EQ(bits_of(fp8_e5m2_to_float(0x7E)), 0x7FC00000u);
  EXPECT_EQ(bits_of(fp8_e5m2_to_float(0x7D)), 0x7FE00000u);  // quieted, payload kept
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7C);       // tie above max -> inf
  EXPECT_EQ(float_to_fp8_e5m2(61439.0f), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2_sat(61440.0f), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2_sat(kInf), 0x7B);
  EXPECT_EQ(float_to_fp8_e5m2_sat(-kInf), 0xFB);
  EXPECT_EQ(float_to_fp8_e5m2_sat(std::nanf("")), 0x7E);
  EXPECT_EQ(float_to_fp8_e5m2(kInf), 0x7C);
  EXPECT_EQ(float_to_fp8_e5m2(std::nanf("")), 0x7E);
  EXPECT_EQ(float_to_fp8_e5m2(-std::nanf("")), 0xFE);
  EXPECT_EQ(float_to_fp8_e5m2(-0.0f), 0x80);
}

TEST(FloatCodec, Fp4Table) {
  const float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(fp4_e2m1_to_float(c), table[c]) << int(c);
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(c | 8)), -table[c]) << int(c);
    EXPECT_EQ(float_to_fp4_e2m1(table[c]), c);
    EXPECT_EQ(float_to_fp4_e2m1(-table[c]), c | 8);
  }
  EXPECT_EQ(fp4_e2m1_to_float(0xF7), 6.0f);  // upper bits ignored
  EXPECT_EQ(float_to_fp4_e2m1(5.0f), 0x6);   // tie 4|6 -> 4 (even code 6)
  EXPECT_EQ(float_to_fp4_e2m1(2.5f), 0x4);   // tie 2|3 -> 2 (code 4)
  EXPECT_EQ(float_to_fp4_e2m1(3.5f), 0x6);   // tie 3|4 -> 4 (code 6)
  EXPECT_EQ(float_to_fp4_e2m1(0.25f), 0x0);  // tie 0|0.5 -> 0
  EXPECT_EQ(float_to_fp4_e2m1(0.75f), 0x2);  // tie 0.5|1 -> 1 (code 2)
  EXPECT_EQ(float_to_fp4_e2m1(7.0f), 0x7);
  EXPECT_EQ(float_to_fp4_e2m1(1e30f), 0x7);
  EXPECT_EQ(float_to_fp4_e2m1(-kInf), 0xF);
  EXPECT_EQ(float_to_fp4_e2m1(std::nanf("")), 0x0);
  EXPECT_EQ(float_to_fp4_e2m1(-std::nanf("")), 0x0);
  EXPECT_EQ(float_to_fp4_e2m1(-0.0f), 0x8);
}

TEST(FloatCodec, Fp6KnownValues) {
  EXPECT_EQ(fp6_e2m3_to_float(0x1F), 7.5f);
  EXPECT_EQ(fp6_e2m3_to_float(0x3F), -7.5f);
  EXPECT_EQ(fp6_e2m3_to_float(0x01), 0.125f);
  EXPECT_EQ(fp6_e2m3_to_float(0x08), 1.0f);
  EXPECT_EQ(fp6_e3m2_to_float(0x1F), 28.0f);
  EXPECT_EQ(fp6_e3m2_to_float(0x01), 0.0625f);
  EXPECT_EQ(fp6_e3m2_to_float(0x0C), 1.0f);
  EXPECT_EQ(float_to_fp6_e2m3(100.0f), 0x1F);
  EXPECT_EQ(float_to_fp6_e3m2(-100.0f), 0x3F);
  EXPECT_EQ(float_to_fp6_e2m3(std::nanf("")), 0x00);
  EXPECT_EQ(float_to_fp6_e3m2(-0.0f), 0x20);
}

TEST(FloatCodec, F16AndBf16KnownValues) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // tie above max -> inf
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);
  EXPECT_EQ(f16_to_float(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(bits_of(f16_to_float(0x7C01)), 0x7FC02000u);  // matches VCVTPH2PS
  EXPECT_EQ(float_to_f16(from_bits(0x7F802000u)), 0x7E01);  // matches VCVTPS2PH
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(float_to_bf16(from_bits(0x3F818000u)), 0x3F82);  // tie -> even
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(float_to_bf16(FLT_MAX), 0x7F80);
  EXPECT_EQ(float_to_bf16(from_bits(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(float_to_bf16(from_bits(0x00008000u)), 0x0000);  // denormal tie -> 0
  EXPECT_EQ(float_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(bits_of(bf16_to_float(0x0001)), 0x00010000u);
  EXPECT_EQ(bits_of(bf16_to_float(0x7F81)), 0x7FC10000u);  // quieted
  EXPECT_EQ(bits_of(bf16_to_float(0xFFC1)), 0xFFC10000u);
}

// ---- e8m0 ---------------------------------------------------------------------------

TEST(FloatCodec, E8M0AllCodes) {
  for (int c = 0; c < 255; ++c) {
    const float v = e8m0_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(static_cast<double>(v), std::ldexp(1.0, c - 127)) << c;
    EXPECT_EQ(float_to_e8m0(v), c) << c;
    EXPECT_EQ(e8m0_to_exponent(static_cast<uint8_t>(c)), c - 127);
    EXPECT_EQ(e8m0_from_exponent(c - 127), c);
  }
  EXPECT_EQ(bits_of(e8m0_to_float(0xFF)), 0x7FC00000u);
  EXPECT_EQ(float_to_e8m0(e8m0_to_float(0xFF)), 0xFF);
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
}

TEST(FloatCodec, E8M0Rounding) {
  EXPECT_EQ(float_to_e8m0(1.5f), 128);   // tie between 127 and 128 -> even 128
  EXPECT_EQ(float_to_e8m0(3.0f), 128);   // tie between 128 and 129 -> 128
  EXPECT_EQ(float_to_e8m0(6.0f), 130);   // tie between 129 and 130 -> 130
  EXPECT_EQ(float_to_e8m0(0.75f), 126);  // tie between 126 and 127 -> 126
  EXPECT_EQ(float_to_e8m0(std::nextafter(3.0f, 0.0f)), 128);
  EXPECT_EQ(float_to_e8m0(std::nextafter(3.0f, 10.0f)), 129);
  EXPECT_EQ(float_to_e8m0(std::nextafter(1.5f, 0.0f)), 127);
  EXPECT_EQ(float_to_e8m0(std::nextafter(1.5f, 10.0f)), 128);
  EXPECT_EQ(float_to_e8m0(1.9f), 128);
  EXPECT_EQ(float_to_e8m0(1.1f), 127);
  // Every midpoint 1.5 * 2^k in the float range goes to the even code.
  for (int k = -126; k <= 126; ++k) {
    const float mid = std::ldexp(1.5f, k);
    const int lo = k + 127;
    EXPECT_EQ(float_to_e8m0(mid), lo % 2 == 0 ? lo : lo + 1) << k;
    EXPECT_EQ(float_to_e8m0(std::nextafter(mid, 0.0f)), lo) << k;
    EXPECT_EQ(float_to_e8m0(std::nextafter(mid, kInf)), lo + 1) << k;
  }
  // Saturation.
  EXPECT_EQ(float_to_e8m0(FLT_MAX), 254);
  EXPECT_EQ(float_to_e8m0(0x1p127f), 254);
  EXPECT_EQ(float_to_e8m0(0x1.8p127f), 254);  // would round to 2^128
  EXPECT_EQ(float_to_e8m0(0x1p-127f), 0);
  EXPECT_EQ(float_to_e8m0(0x1.8p-127f), 0);   // tie 0|1 -> even 0
  EXPECT_EQ(float_to_e8m0(0x1.9p-127f), 1);
  EXPECT_EQ(float_to_e8m0(0x1p-128f), 0);     // below the range
  EXPECT_EQ(float_to_e8m0(from_bits(1)), 0);  // smallest float denormal
  EXPECT_EQ(float_to_e8m0(0x1p-126f), 1);
  // Invalid inputs -> NaN code.
  EXPECT_EQ(float_to_e8m0(0.0f), 0xFF);
  EXPECT_EQ(float_to_e8m0(-0.0f), 0xFF);
  EXPECT_EQ(float_to_e8m0(-1.0f), 0xFF);
  EXPECT_EQ(float_to_e8m0(kInf), 0xFF);
  EXPECT_EQ(float_to_e8m0(-kInf), 0xFF);
  EXPECT_EQ(float_to_e8m0(std::nanf("")), 0xFF);
  EXPECT_EQ(e8m0_from_exponent(-1000), 0);
  EXPECT_EQ(e8m0_from_exponent(1000), 254);
}

// ---- DType lookups ---------------------------------------------------------------------

TEST(FloatCodec, FormatLookup) {
  EXPECT_EQ(minifloat_format(DType::kF8_E4M3), &kFp8E4M3Format);
  EXPECT_EQ(minifloat_format(DType::kF4_E2M1), &kFp4E2M1Format);
  EXPECT_EQ(minifloat_format(DType::kF32), nullptr);
  EXPECT_EQ(minifloat_format(DType::kE8M0), nullptr);
  EXPECT_EQ(minifloat_format(DType::kI8), nullptr);
  EXPECT_EQ(dtype_max_finite(DType::kF8_E4M3), 448.0);
  EXPECT_EQ(dtype_max_finite(DType::kF8_E5M2), 57344.0);
  EXPECT_EQ(dtype_max_finite(DType::kF6_E2M3), 7.5);
  EXPECT_EQ(dtype_max_finite(DType::kF6_E3M2), 28.0);
  EXPECT_EQ(dtype_max_finite(DType::kF4_E2M1), 6.0);
  EXPECT_EQ(dtype_max_finite(DType::kF16), 65504.0);
  EXPECT_EQ(dtype_max_finite(DType::kBF16), static_cast<double>(from_bits(0x7F7F0000u)));
  EXPECT_EQ(dtype_max_finite(DType::kF32), static_cast<double>(FLT_MAX));
  EXPECT_EQ(dtype_max_finite(DType::kE8M0), 0x1p127);
  EXPECT_EQ(dtype_max_finite(DType::kI32), 0.0);
}

// The codec is usable at compile time.
static_assert(float_to_fp8_e4m3(-448.0f) == 0xFE);
static_assert(fp8_e5m2_to_float(0x7B) == 57344.0f);
static_assert(float_to_e8m0(0.5f) == 126);

}  // namespace
}  // namespace qloom
