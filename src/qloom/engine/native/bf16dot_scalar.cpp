// The canonical arithmetic of the bf16 dot-product family in plain C++
// (bf16dot_kernels.h): the reference run_ref() uses and the kernel of
// QLOOM_MAX_ISA=scalar. Slow on purpose: every step is written out.
#include <array>
#include <bit>
#include <cmath>

#include "qloom/core/float_codec.h"
#include "qloom/engine/native/bf16dot_kernels.h"

namespace qloom::engine::native::bf16dot {
namespace {

constexpr float kMinNormal = 0x1p-126f;

float widen(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// DAZ: a denormal input reads as a zero of its sign.
float daz(float v) { return std::fabs(v) < kMinNormal ? std::copysign(0.0f, v) : v; }

}  // namespace

// std::fma rounds once to the float grid, denormals included. x86 decides
// whether a result is tiny (and so flushed) AFTER rounding to 24 bits with
// an unbounded exponent: only when the float result is exactly +-2^-126 can
// the two disagree (the exact value sits up to 2^-150 below it), and then the
// same fma scaled by 2^64 (exact: that case needs |a·b|, |acc| < 2^-100, so
// nothing overflows) shows whether the unbounded rounding stays below 2^-126.
float dp_fma(float a, float b, float acc) {
  a = daz(a), b = daz(b), acc = daz(acc);
  const float r = std::fma(a, b, acc);
  const float m = std::fabs(r);
  if (m < kMinNormal) return std::copysign(0.0f, r);
  if (m == kMinNormal && std::fabs(std::fma(a * 0x1p64f, b, acc * 0x1p64f)) < 0x1p-62f)
    return std::copysign(0.0f, r);
  return r;
}

const uint16_t* fp8_bf16() {
  static const std::array<uint16_t, 256> lut = [] {
    std::array<uint16_t, 256> t{};
    for (int c = 0; c < 256; ++c)
      t[static_cast<size_t>(c)] =
          static_cast<uint16_t>(std::bit_cast<uint32_t>(fp8_e4m3_to_float(static_cast<uint8_t>(c))) >> 16);
    return t;
  }();
  return lut.data();
}

uint32_t w_pair(const Args& a, int64_t o, int64_t p) {
  const int64_t i = ((o / kPanel) * a.pairs + p) * kPanel + o % kPanel;
  if (!a.w8) return a.w[i];
  const uint16_t* lut = fp8_bf16();
  return lut[a.w8[2 * i]] | (static_cast<uint32_t>(lut[a.w8[2 * i + 1]]) << 16);
}

float dot_ref(const Args& a, int64_t row, int64_t o) {
  const uint16_t* x = a.xq + row * 2 * a.pairs;
  float acc = 0.0f;
  for (int64_t p = 0; p < a.pairs; ++p) {
    const uint32_t xp = x[2 * p] | (static_cast<uint32_t>(x[2 * p + 1]) << 16), wp = w_pair(a, o, p);
    acc = dp_fma(widen(static_cast<uint16_t>(xp >> 16)), widen(static_cast<uint16_t>(wp >> 16)), acc);
    acc = dp_fma(widen(static_cast<uint16_t>(xp)), widen(static_cast<uint16_t>(wp)), acc);
  }
  return acc;
}

float epilogue_ref(float acc, float sx, float sw, const float* bias, int64_t o) {
  const float s = sx * sw;
  const float y = bias ? std::fma(acc, s, bias[o]) : acc * s;
  return std::isnan(y) ? std::bit_cast<float>(0x7FC00000u) : y;
}

void run_scalar(const Args& a, int64_t q0, int64_t q1) {
  IeeeEnv env;
  const int64_t o1 = q1 * kPanel < a.out ? q1 * kPanel : a.out;
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t o = q0 * kPanel; o < o1; ++o)
      a.y[r * a.out + o] = epilogue_ref(dot_ref(a, r, o), a.sx[r], a.sw[o], a.bias, o);
}

}  // namespace qloom::engine::native::bf16dot
