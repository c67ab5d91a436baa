// Packing of 6-bit codes (OCP MX fp6_e2m3 / fp6_e3m2) the way AMD Quark's
// hf_format export stores fp6 weights: four codes in three bytes.
//
// Four consecutive codes v0..v3 (6 bits each, sign in bit 5) form the 24-bit
// little-endian word v0 | v1 << 6 | v2 << 12 | v3 << 18, stored low byte
// first:
//   byte 0 = v0 | (v1 & 0x03) << 6
//   byte 1 = v1 >> 2 | (v2 & 0x0F) << 4
//   byte 2 = v2 >> 4 | v3 << 2
// e.g. codes 0x01, 0x02, 0x03, 0x04 pack to 0x81 0x30 0x10.
//
// Verified against AMD Quark's source, quark/torch/utils/pack.py, class
// Pack_fp6 (amd-quark 0.13): pack() reshapes the codes to (-1, 8, 4), builds
// combined = v3 << 18 | v2 << 12 | v1 << 6 | v0 and concatenates
// [combined & 0xFF, (combined >> 8) & 0xFF, combined >> 16] (the layout the
// MI355 mfma_scale_f32_16x16x128_f8f6f4 instruction reads); the last
// dimension becomes in / 4 * 3. The packing runs over the flattened tensor,
// so for an [out, in] weight with in % 4 == 0 every row packs on its own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qloom {

// `n` codes (n % 4 == 0, else Error kUsage) into n / 4 * 3 bytes. Codes above
// 0x3F throw Error kUsage naming the element.
void pack_fp6(const uint8_t* codes, size_t n, uint8_t* out);
// Inverse: reads n / 4 * 3 bytes and writes n codes (0..0x3F).
void unpack_fp6(const uint8_t* packed, size_t n, uint8_t* out);

}  // namespace qloom
