// Scalar reference conversions between f32 and every narrow floating-point
// format qloom handles. This header is the single definition of each format's
// bit layout; the bulk and SIMD paths in convert.h are tested bit-for-bit
// against it. docs/dtypes.md repeats the policy below in prose.
//
// Formats (code layout sign | exponent | mantissa, sign in the top used bit):
//
//   name       exp man bias  specials                      max finite
//   f16         5  10   15   IEEE: inf, NaN                65504
//   bf16        8   7  127   IEEE: inf, NaN                ~3.39e38
//   fp8_e4m3    4   3    7   "FN": no inf; NaN = S.1111.111  448
//   fp8_e5m2    5   2   15   IEEE: inf, NaN                57344
//   fp6_e2m3    2   3    1   none (OCP MX)                 7.5
//   fp6_e3m2    3   2    3   none (OCP MX)                 28
//   fp4_e2m1    2   1    1   none (OCP MX)                 6
//   e8m0        8   0  127   no sign, no zero; 0xFF = NaN  2^127
//
// FP6 codes live in the low 6 bits of a uint8_t (sign = bit 5), FP4 codes in
// the low 4 bits (sign = bit 3). Exponent field 0 encodes subnormals
// (mantissa * 2^(1 - bias - man_bits)) in every format except e8m0; all
// subnormals are converted exactly in both directions.
//
// Decoding (code -> f32) is exact: every value of every format here is a
// float. It never depends on the FPU mode (pure integer bit manipulation).
//
// Encoding (f32 -> code) rounds the exact float value to the nearest
// representable value, ties to the even code (the one whose lowest bit is 0),
// in one step (no double rounding through an intermediate format). Values too
// small for the smallest subnormal round to zero and keep their sign.
//
// Special values and overflow, per format:
//   f16, bf16      IEEE: results beyond the rounding range become +-inf, inf
//                  stays inf.
//   fp8_e5m2       float_to_fp8_e5m2: IEEE as above (max 57344; 61440, the
//                  midpoint above it, already rounds to inf).
//                  float_to_fp8_e5m2_sat: finite overflow and +-inf become
//                  +-57344.
//   fp8_e4m3       saturating: every value beyond 448 (including the rounding
//                  range up to 464) and +-inf becomes +-448 (0x7E / 0xFE).
//   fp6, fp4       saturating (OCP MX): beyond max and +-inf -> +-max.
//   e8m0           see float_to_e8m0 below.
// NaN handling:
//   f16, bf16, e5m2 (IEEE formats): NaN -> quiet NaN, sign kept, payload =
//                  the top mantissa bits of the float payload, quiet bit set
//                  (this is what x86 F16C VCVTPS2PH does). Decoding a NaN
//                  sets the quiet bit and keeps sign and payload (what
//                  VCVTPH2PS does), so conversions never produce a signaling
//                  NaN. Round trip code -> f32 -> code is therefore the
//                  identity for quiet NaN codes and sets the quiet bit of a
//                  signaling one (f16 0x7C01 -> 0x7E01, e5m2 0x7D -> 0x7F).
//   fp8_e4m3       NaN -> 0x7F, or 0xFF when the NaN's sign bit is set.
//                  0x7F / 0xFF decode to the canonical quiet f32 NaN
//                  0x7FC00000 / 0xFFC00000.
//   fp6, fp4       no NaN exists: NaN -> code 0 (positive zero). Callers that
//                  must not lose NaNs have to check for them before encoding.
//   e8m0           0xFF decodes to 0x7FC00000; NaN encodes to 0xFF.
// Signed zero: -0.0 -> the negative-zero code (0x8000, 0x80, 0x20, 0x08);
// negative values that round to zero also give negative zero.
#pragma once

#include <bit>
#include <cstdint>

#include "qloom/core/dtype.h"

namespace qloom {

// How a format uses its all-ones exponent field.
enum class FloatSpecials : uint8_t {
  kIeee,           // all-ones exponent: mantissa 0 = inf, else NaN
  kFiniteNanOnly,  // "FN": only all-ones exponent AND mantissa is NaN, no inf
  kNone,           // every code is a finite number (OCP MX element formats)
};

// What float -> code does with values beyond the largest finite value.
// kToInf only has an effect on kIeee formats; the others always saturate.
enum class Overflow : uint8_t { kToInf, kSaturate };

struct MinifloatFormat {
  int exp_bits;  // 1..8
  int man_bits;  // 1..10
  int bias;
  FloatSpecials specials;
};

inline constexpr MinifloatFormat kF16Format{5, 10, 15, FloatSpecials::kIeee};
inline constexpr MinifloatFormat kBF16Format{8, 7, 127, FloatSpecials::kIeee};
inline constexpr MinifloatFormat kFp8E4M3Format{4, 3, 7, FloatSpecials::kFiniteNanOnly};
inline constexpr MinifloatFormat kFp8E5M2Format{5, 2, 15, FloatSpecials::kIeee};
inline constexpr MinifloatFormat kFp6E2M3Format{2, 3, 1, FloatSpecials::kNone};
inline constexpr MinifloatFormat kFp6E3M2Format{3, 2, 3, FloatSpecials::kNone};
inline constexpr MinifloatFormat kFp4E2M1Format{2, 1, 1, FloatSpecials::kNone};

// Code of the largest finite positive value (sign bit clear).
constexpr uint32_t minifloat_max_code(const MinifloatFormat& f) {
  const uint32_t all = (1u << (f.exp_bits + f.man_bits)) - 1;  // every non-sign bit set
  switch (f.specials) {
    case FloatSpecials::kIeee:
      return all - (1u << f.man_bits);  // exponent all-ones minus one, mantissa all-ones
    case FloatSpecials::kFiniteNanOnly:
      return all - 1;
    case FloatSpecials::kNone:
      break;
  }
  return all;
}

// Decodes the low (1 + exp_bits + man_bits) bits of `code`; higher bits are
// ignored. Exact; see the NaN rules in the file comment.
constexpr float decode_minifloat(const MinifloatFormat& f, uint32_t code) {
  const int m = f.man_bits;
  const uint32_t man_mask = (1u << m) - 1;
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  const uint32_t sign = ((code >> (f.exp_bits + m)) & 1u) << 31;
  const uint32_t exp = (code >> m) & exp_all;
  const uint32_t man = code & man_mask;
  if (f.specials == FloatSpecials::kIeee && exp == exp_all) {
    if (man == 0) return std::bit_cast<float>(sign | 0x7F800000u);
    return std::bit_cast<float>(sign | 0x7FC00000u | (man << (23 - m)));
  }
  if (f.specials == FloatSpecials::kFiniteNanOnly && exp == exp_all && man == man_mask)
    return std::bit_cast<float>(sign | 0x7FC00000u);
  if (exp != 0) {
    const uint32_t fexp = exp - static_cast<uint32_t>(f.bias) + 127u;
    return std::bit_cast<float>(sign | (fexp << 23) | (man << (23 - m)));
  }
  if (man == 0) return std::bit_cast<float>(sign);
  // Subnormal: man * 2^(1 - bias - m). Normalise to the leading set bit p.
  const int p = std::bit_width(man) - 1;
  const int fexp = p + 1 - f.bias - m + 127;
  if (fexp >= 1) {
    const uint32_t frac = (man ^ (1u << p)) << (23 - p);
    return std::bit_cast<float>(sign | (static_cast<uint32_t>(fexp) << 23) | frac);
  }
  // Below the float normal range (only formats with bias ~127, e.g. bf16):
  // a float denormal is k * 2^-149.
  return std::bit_cast<float>(sign | (man << (1 - f.bias - m + 149)));
}

// Encodes `x` with round to nearest, ties to even; see the file comment for
// overflow, inf and NaN. Returns the code in the low (1 + exp_bits + man_bits)
// bits.
constexpr uint32_t encode_minifloat(const MinifloatFormat& f, float x,
                                    Overflow overflow = Overflow::kToInf) {
  const int m = f.man_bits;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  const uint32_t sign = (bits >> 31) << (f.exp_bits + m);
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  const uint32_t man_mask = (1u << m) - 1;
  const uint32_t max_code = minifloat_max_code(f);
  const bool to_inf = f.specials == FloatSpecials::kIeee && overflow == Overflow::kToInf;

  if (abs > 0x7F800000u) {  // NaN
    switch (f.specials) {
      case FloatSpecials::kIeee:
        return sign | (exp_all << m) | (1u << (m - 1)) | ((abs & 0x7FFFFFu) >> (23 - m));
      case FloatSpecials::kFiniteNanOnly:
        return sign | (exp_all << m) | man_mask;
      case FloatSpecials::kNone:
        break;
    }
    return 0;
  }
  if (abs == 0x7F800000u) return sign | (to_inf ? exp_all << m : max_code);

  // |x| = M * 2^(E - 23) with M < 2^24.
  const uint32_t fexp = abs >> 23;
  const int e = fexp != 0 ? static_cast<int>(fexp) - 127 : -126;
  const uint64_t mant = fexp != 0 ? (abs & 0x7FFFFFu) | 0x800000u : abs;
  const int emin = 1 - f.bias;
  const int et = e > emin ? e : emin;  // exponent of the target's quantum binade
  int shift = et - m - e + 23;          // quantum = 2^(et - m); always >= 13 here
  if (shift > 40) shift = 40;           // M < 2^24: anything past 25 rounds to 0
  uint64_t r = mant >> shift;
  const uint64_t rem = mant & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  // Round up when the remainder is above half, or exactly half and r is odd
  // (ties to even); written without branches.
  r += (rem + (r & 1u) > half) ? 1u : 0u;
  // Adding r (which includes the implicit bit for normals) to the scaled
  // exponent field gives the code, and carries into the exponent on round-up.
  uint64_t code = (static_cast<uint64_t>(et - emin) << m) + r;
  if (code > max_code) code = to_inf ? exp_all << m : max_code;
  return sign | static_cast<uint32_t>(code);
}

// Largest finite value of the format, as a float.
constexpr float minifloat_max(const MinifloatFormat& f) {
  return decode_minifloat(f, minifloat_max_code(f));
}

// ---- named wrappers --------------------------------------------------------

constexpr float f16_to_float(uint16_t h) { return decode_minifloat(kF16Format, h); }
constexpr uint16_t float_to_f16(float x) {
  return static_cast<uint16_t>(encode_minifloat(kF16Format, x));
}

constexpr float bf16_to_float(uint16_t h) { return decode_minifloat(kBF16Format, h); }
constexpr uint16_t float_to_bf16(float x) {
  return static_cast<uint16_t>(encode_minifloat(kBF16Format, x));
}

constexpr float fp8_e4m3_to_float(uint8_t c) { return decode_minifloat(kFp8E4M3Format, c); }
constexpr uint8_t float_to_fp8_e4m3(float x) {
  return static_cast<uint8_t>(encode_minifloat(kFp8E4M3Format, x, Overflow::kSaturate));
}

constexpr float fp8_e5m2_to_float(uint8_t c) { return decode_minifloat(kFp8E5M2Format, c); }
// IEEE-like: overflow -> +-inf.
constexpr uint8_t float_to_fp8_e5m2(float x) {
  return static_cast<uint8_t>(encode_minifloat(kFp8E5M2Format, x, Overflow::kToInf));
}
// Saturating: finite overflow and +-inf -> +-57344; NaN stays NaN.
constexpr uint8_t float_to_fp8_e5m2_sat(float x) {
  return static_cast<uint8_t>(encode_minifloat(kFp8E5M2Format, x, Overflow::kSaturate));
}

constexpr float fp6_e2m3_to_float(uint8_t c) { return decode_minifloat(kFp6E2M3Format, c & 0x3Fu); }
constexpr uint8_t float_to_fp6_e2m3(float x) {
  return static_cast<uint8_t>(encode_minifloat(kFp6E2M3Format, x, Overflow::kSaturate));
}

constexpr float fp6_e3m2_to_float(uint8_t c) { return decode_minifloat(kFp6E3M2Format, c & 0x3Fu); }
constexpr uint8_t float_to_fp6_e3m2(float x) {
  return static_cast<uint8_t>(encode_minifloat(kFp6E3M2Format, x, Overflow::kSaturate));
}

constexpr float fp4_e2m1_to_float(uint8_t c) { return decode_minifloat(kFp4E2M1Format, c & 0x0Fu); }
constexpr uint8_t float_to_fp4_e2m1(float x) {
  return static_cast<uint8_t>(encode_minifloat(kFp4E2M1Format, x, Overflow::kSaturate));
}

// ---- e8m0 (OCP MX shared scale) ---------------------------------------------
// Value 2^(code - 127) for codes 0..254 (code 0 = 2^-127, a float denormal);
// 0xFF is NaN. No sign, no zero, no infinity.

inline constexpr uint8_t kE8M0Nan = 0xFF;
inline constexpr uint8_t kE8M0MaxCode = 254;  // 2^127

constexpr float e8m0_to_float(uint8_t c) {
  if (c == kE8M0Nan) return std::bit_cast<float>(0x7FC00000u);
  if (c == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127
  return std::bit_cast<float>(static_cast<uint32_t>(c) << 23);
}

// float -> e8m0. NaN, +-0, negative values and +-inf give 0xFF (NaN): a
// scale must be a positive finite number, and an infinite one means the block
// already holds inf, which we surface instead of clamping. Positive finite x
// rounds to the nearest power of two measured linearly: values above
// 1.5 * 2^k go up to 2^(k+1), values below go down to 2^k, and the exact
// midpoint 1.5 * 2^k goes to whichever of the two codes is even. Results
// above 2^127 saturate to code 254; results below 2^-127 (including every
// float denormal below it) saturate to code 0.
constexpr uint8_t float_to_e8m0(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (bits == 0 || bits >= 0x7F800000u) return kE8M0Nan;  // +0, +inf, NaN, negatives
  uint32_t fexp = bits >> 23;
  uint32_t mant = bits & 0x7FFFFFu;
  int e;
  if (fexp != 0) {
    e = static_cast<int>(fexp) - 127;
  } else {  // float denormal: normalise so the leading bit is bit 23
    const int p = std::bit_width(mant) - 1;
    e = p - 149;
    mant = (mant << (23 - p)) & 0x7FFFFFu;
  }
  int code = e + 127;
  constexpr uint32_t kHalf = 0x400000u;  // mantissa of 1.5
  if (mant > kHalf || (mant == kHalf && (code & 1))) ++code;
  if (code < 0) code = 0;
  if (code > kE8M0MaxCode) code = kE8M0MaxCode;
  return static_cast<uint8_t>(code);
}

// 2^e as e8m0, saturating e to [-127, 127].
constexpr uint8_t e8m0_from_exponent(int e) {
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return static_cast<uint8_t>(e + 127);
}
// Exponent of a non-NaN code: code - 127.
constexpr int e8m0_to_exponent(uint8_t c) { return static_cast<int>(c) - 127; }

// ---- lookups by DType --------------------------------------------------------

// The minifloat layout of a DType (f16, bf16, fp8, fp6, fp4), or nullptr for
// f32, f64, e8m0 and the integer types.
const MinifloatFormat* minifloat_format(DType t);

// Largest finite value of a floating-point DType (f64: DBL_MAX, f32: FLT_MAX,
// e8m0: 2^127), or 0 for integer and bool types.
double dtype_max_finite(DType t);

}  // namespace qloom
