// GGUF dequantization of the 256-element "K-quant" super-blocks. Element e of
// a super-block belongs to sub-block e / 16 (Q2_K, Q3_K, Q6_K) or e / 32
// (Q4_K, Q5_K). Layouts (offsets in bytes):
//   Q2_K  scales[16] @0, qs[64] @16, d @80, dmin @82
//         q = (qs[32*(e/128) + e%32] >> 2*((e%128)/32)) & 3
//         y = (d * (sc & 15)) * q - (dmin * (sc >> 4))
//   Q3_K  hmask[32] @0, qs[64] @32, scales[12] @96, d @108
//         q = (2 bits as Q2_K) - 4 * !((hmask[e%32] >> e/32) & 1)
//         y = (d * (6-bit scale - 32)) * q
//   Q4_K  d @0, dmin @2, scales[12] @4, qs[128] @16
//         q = (qs[32*(e/64) + e%32] >> 4*((e%64)/32)) & 15
//         y = (d * sc) * q - (dmin * m), 6-bit sc and m per sub-block
//   Q5_K  d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
//         q = (4 bits as Q4_K) | ((qh[e%32] >> e/32) & 1) << 4, y as Q4_K
//   Q6_K  ql[128] @0, qh[64] @128, scales int8[16] @192, d @208
//         q = (((ql[64*(e/128) + r%64] >> 4*(r/64)) & 15) |
//              ((qh[32*(e/128) + r%32] >> 2*(r/32)) & 3) << 4) - 32, r = e%128
//         y = (d * sc) * q
#include <cstdint>

#include "qloom/io/gguf_dequant_blocks.h"

namespace qloom::io::gguf_detail {
namespace {

constexpr int kQK = 256;

// The 2-bit code of element e in a 64-byte qs array (Q2_K, Q3_K).
inline int crumb(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// The 4-bit code of element e in a 128-byte qs array (Q4_K, Q5_K).
inline uint32_t k_nibble(const uint8_t* qs, int e) {
  return (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0Fu;
}

// The 6-bit scale and min of sub-block j (0..7) from Q4_K / Q5_K's 12 bytes:
// bytes 0-3 hold the scales of 0-3 (low 6 bits) and the top 2 bits of the
// scales of 4-7; bytes 4-7 the same for the mins; bytes 8-11 the low 4 bits of
// scale (low nibble) and min (high nibble) of 4-7.
inline void k_scale_min(const uint8_t* s, int j, uint32_t& sc, uint32_t& m) {
  if (j < 4) {
    sc = s[j] & 0x3Fu;
    m = s[j + 4] & 0x3Fu;
  } else {
    sc = (s[j + 4] & 0x0Fu) | ((s[j - 4] >> 2) & 0x30u);
    m = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30u);
  }
}

// The 6-bit scale of sub-block i (0..15) from Q3_K's 12 bytes, minus 32.
inline int q3_scale(const uint8_t* s, int i) {
  const uint32_t low = i < 8 ? (s[i] & 0x0Fu) : (s[i - 8] >> 4);
  const uint32_t high = (s[8 + i % 4] >> (2 * (i / 4))) & 3u;
  return static_cast<int>(low | (high << 4)) - 32;
}

}  // namespace

void dequant_q2_k(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 84, dst += kQK) {
    const float d = f16_at(src + 80);
    const float dmin = f16_at(src + 82);
    for (int sb = 0; sb < 16; ++sb) {
      const float dl = d * static_cast<float>(src[sb] & 0x0F);
      const float ml = dmin * static_cast<float>(src[sb] >> 4);
      for (int e = 16 * sb; e < 16 * sb + 16; ++e) {
        const float dq = dl * static_cast<float>(crumb(src + 16, e));
        dst[e] = dq - ml;
      }
    }
  }
}

void dequant_q3_k(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 110, dst += kQK) {
    const float d = f16_at(src + 108);
    for (int sb = 0; sb < 16; ++sb) {
      const float dl = d * static_cast<float>(q3_scale(src + 96, sb));
      for (int e = 16 * sb; e < 16 * sb + 16; ++e) {
        const int high = (src[e % 32] >> (e / 32)) & 1;
        const int q = crumb(src + 32, e) - (high ? 0 : 4);
        dst[e] = dl * static_cast<float>(q);
      }
    }
  }
}

namespace {

// Q4_K / Q5_K: 8 sub-blocks of 32, each value d·sc·code - dmin·m, with the
// 6-bit (sc, m) pairs packed at byte 4; code(block, e) reads element e's code.
template <class Code>
void dequant_scale_min_k(const uint8_t* src, float* dst, uint64_t nblocks, uint64_t block_bytes, Code code) {
  for (uint64_t b = 0; b < nblocks; ++b, src += block_bytes, dst += kQK) {
    const float d = f16_at(src);
    const float dmin = f16_at(src + 2);
    for (int sb = 0; sb < 8; ++sb) {
      uint32_t sc = 0, m = 0;
      k_scale_min(src + 4, sb, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (int e = 32 * sb; e < 32 * sb + 32; ++e) {
        const float dq = dl * static_cast<float>(code(src, e));
        dst[e] = dq - ml;
      }
    }
  }
}

}  // namespace

void dequant_q4_k(const uint8_t* src, float* dst, uint64_t nblocks) {
  dequant_scale_min_k(src, dst, nblocks, 144, [](const uint8_t* blk, int e) { return k_nibble(blk + 16, e); });
}

void dequant_q5_k(const uint8_t* src, float* dst, uint64_t nblocks) {
  dequant_scale_min_k(src, dst, nblocks, 176, [](const uint8_t* blk, int e) {
    const uint32_t high = (blk[16 + e % 32] >> (e / 32)) & 1u;
    return k_nibble(blk + 48, e) | (high << 4);
  });
}

void dequant_q6_k(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 210, dst += kQK) {
    const float d = f16_at(src + 208);
    for (int sb = 0; sb < 16; ++sb) {
      const float dl = d * static_cast<float>(static_cast<int8_t>(src[192 + sb]));
      for (int e = 16 * sb; e < 16 * sb + 16; ++e) {
        const int h = e / 128, r = e % 128;
        const int lo = (src[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
        const int hi = (src[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
        dst[e] = dl * static_cast<float>((lo | (hi << 4)) - 32);
      }
    }
  }
}

}  // namespace qloom::io::gguf_detail
