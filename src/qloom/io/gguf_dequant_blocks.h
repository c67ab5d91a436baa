// Internal to io/gguf_dequant*.cpp: the per-format row decoders. Each decodes
// `nblocks` consecutive blocks of its format from `src` into `dst`
// (nblocks * block_elems floats), with the arithmetic of the `gguf` Python
// package's dequantize (the same as ggml's dequantize_row_*): every product
// and sum in float32, in the order written, never fused (the files build with
// -ffp-contract=off).
//
// fp16 fields decode exactly, keeping a NaN's payload and its quiet bit as
// numpy's float16 -> float32 cast does (a signaling NaN stays signaling until
// an arithmetic operation quiets it).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace qloom::io::gguf_detail {

inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    const float mag = std::ldexp(static_cast<float>(man), -24);
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline float f16_at(const uint8_t* p) {
  return f16_bits_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

void dequant_f32(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_f16(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_bf16(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q4_0(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q4_1(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q5_0(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q5_1(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q8_0(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q2_k(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q3_k(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q4_k(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q5_k(const uint8_t* src, float* dst, uint64_t nblocks);
void dequant_q6_k(const uint8_t* src, float* dst, uint64_t nblocks);

}  // namespace qloom::io::gguf_detail
