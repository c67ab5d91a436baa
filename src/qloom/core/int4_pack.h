// Packing of 4-bit integer codes the way AMD Quark's hf_format export stores
// int4 / uint4 weights: eight codes per int32 word.
//
// For each group of 8 consecutive codes src[8w .. 8w+7] of a row, output word
// w is built so that its nibble j (bits [4j, 4j+4)) holds source element
// src[8w + order[j]]:
//
//   PackOrder::kSequential  order = [0, 1, 2, 3, 4, 5, 6, 7]
//   PackOrder::kReorder     order = [0, 2, 4, 6, 1, 3, 5, 7]
//
// So with kReorder the low nibbles carry the even elements 0, 2, 4, 6 and the
// high nibbles the odd elements 1, 3, 5, 7; e.g. codes 0,1,...,7 pack to
// 0x75316420 (kSequential: 0x76543210). Unpacking inverts this: element
// order[j] = nibble j. Signed codes (-8..7) are stored as two's-complement
// nibbles (-1 -> 0xF) and sign-extended on unpack.
//
// Verified against AMD Quark's source, quark/torch/utils/pack.py, class
// Pack_4_bits (amd-quark 0.10 wheel): pack() uses order_map = [0,2,4,6,1,3,5,7]
// when reorder is true (else 0..7) and ORs column c*8 + order_map[i] (masked
// to 4 bits for int4) into the int32 word shifted left by 4*i; unpack()
// extracts nibble i at shift 4*i and, with reorder, permutes with
// [0,4,1,5,2,6,3,7], the inverse permutation. The transpose to [in, out] for
// per-group schemes happens before packing and is not done here: these
// functions pack along the contiguous (last) dimension of what they are given.
//
// pack_nibbles_u8 is the plain two-per-byte layout Quark uses for mxfp4
// weights (Pack_fp4 / Pack_mxfp4: element 2k in the low nibble of byte k,
// element 2k+1 in the high nibble).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qloom {

enum class PackOrder : uint8_t {
  kSequential,  // nibble j = element j
  kReorder,     // nibble j = element [0,2,4,6,1,3,5,7][j]; Quark's default
};

// The permutation used by `order`: nibble j of a word holds element result[j].
const int* pack_order_map(PackOrder order);

// `codes` is a row-major [rows, cols] matrix; cols must be a multiple of 8
// (Error kUsage otherwise). `out` receives [rows, cols / 8] words. Codes
// outside [-8, 7] (signed) / [0, 15] (unsigned) throw Error kUsage.
void pack_int4(const int8_t* codes, size_t rows, size_t cols, int32_t* out, PackOrder order);
void pack_uint4(const uint8_t* codes, size_t rows, size_t cols, int32_t* out, PackOrder order);

// Inverse of the above: `packed` is [rows, cols / 8] words, `out` receives
// [rows, cols] codes. cols must be a multiple of 8 (Error kUsage otherwise).
void unpack_int4(const int32_t* packed, size_t rows, size_t cols, int8_t* out, PackOrder order);
void unpack_uint4(const int32_t* packed, size_t rows, size_t cols, uint8_t* out, PackOrder order);

// Two 4-bit codes per byte, element 2k in the low nibble of byte k, 2k+1 in
// the high nibble. Writes ceil(n / 2) bytes; with odd n the last high nibble
// is 0. Codes above 15 throw Error kUsage.
void pack_nibbles_u8(const uint8_t* codes, size_t n, uint8_t* out);
// Reads ceil(n / 2) bytes and writes n codes (0..15).
void unpack_nibbles_u8(const uint8_t* packed, size_t n, uint8_t* out);

}  // namespace qloom
