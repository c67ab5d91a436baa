// FP8 E5M3: AMD Quark's unsigned 8-bit float (5 exponent bits, bias 15, 3
// mantissa bits, no sign bit), used for the scales of the AMD FP4 schemes
// (amdfp4: per-group scales; amdfp4_global16/32: per-group scales relative
// to a per-tensor global scale). Stored as uint8 (Quark's torch_packed_dtype
// of Dtype.fp8_e5m3 is torch.uint8; safetensors "U8").
//
// Values (quark/torch/kernel/float8_e5m3/lookup.py, the decode table):
//   exponent 0:        mantissa * 2^-17 (subnormals, 0 for code 0)
//   exponent 1..31:    2^(e - 15) * (1 + mantissa / 8)
//   code 0xFF (e 31, m 7): NaN; largest finite 0xFE = 114688.
// Encoding is Quark's reference_float32_qdq_to_float8_e5m3 (clamp to
// [0, 114688], then round to nearest, ties to even, subnormals exact, in one
// step), with one deliberate difference: NaN encodes to 0xFF here, where
// Quark's bit manipulation turns a NaN into 0xFC (98304) in fake quantization
// and refuses it (ValueError) in real quantization. Negative values and -0
// clamp to 0; +inf and anything above 114688 give 0xFE.
// Decoding never depends on the FPU mode; encoding is pure integer work too.
#pragma once

#include <bit>
#include <cstdint>

namespace qloom {

inline constexpr uint8_t kE5M3Nan = 0xFF;
inline constexpr uint8_t kE5M3MaxCode = 0xFE;
inline constexpr float kE5M3Max = 114688.0f;

constexpr float e5m3_to_float(uint8_t c) {
  if (c == kE5M3Nan) return std::bit_cast<float>(0x7FC00000u);
  const uint32_t e = c >> 3, m = c & 7u;
  if (e == 0) return static_cast<float>(m) * 0x1p-17f;
  // 2^(e-15) * (1 + m/8): f32 bits with exponent e - 15 + 127 and the three
  // mantissa bits on top.
  return std::bit_cast<float>(((e + 112u) << 23) | (m << 20));
}

constexpr uint8_t float_to_e5m3(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return kE5M3Nan;
  if ((bits >> 31) != 0) return 0;                 // negative (and -0): clamp to 0
  if (bits >= std::bit_cast<uint32_t>(kE5M3Max)) return kE5M3MaxCode;  // incl. +inf
  const int exp = static_cast<int>(bits >> 23);    // biased f32 exponent
  const uint32_t man = bits & 0x007FFFFFu;
  const int e = exp - 112;                         // biased e5m3 exponent
  if (e <= 0) {
    // Subnormal result: value / 2^-17 rounded to an integer 0..8 (8 carries
    // into the smallest normal, code 0x08). f32 zeros / subnormals give 0.
    if (exp == 0) return 0;
    const uint32_t sig = (1u << 23) | man;         // value = sig * 2^(exp - 150)
    const int shift = 21 - e;                      // >= 21
    if (shift > 25) return 0;                      // below half the smallest subnormal
    const uint32_t q = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
    const uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<uint8_t>(r);                // r == 8 is code 0x08 (2^-14)
  }
  // Normal: round the 23-bit mantissa to 3 bits, ties to even; a carry
  // increments the exponent (never past 31: x < 114688 here).
  uint32_t q = man >> 20;
  const uint32_t rem = man & 0x000FFFFFu, half = 0x00080000u;
  if (rem > half || (rem == half && (q & 1u))) ++q;
  const uint32_t code = (static_cast<uint32_t>(e) << 3) + q;  // a carry (q == 8) moves into the exponent
  return static_cast<uint8_t>(code);
}

// Round trip: the nearest e5m3 value of x (Quark's float32_qdq_to_float8_e5m3
// for every non-NaN input).
constexpr float e5m3_round(float x) { return e5m3_to_float(float_to_e5m3(x)); }

}  // namespace qloom
