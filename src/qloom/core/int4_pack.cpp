#include "qloom/core/int4_pack.h"

#include <string>

#include "qloom/core/error.h"

namespace qloom {
namespace {

constexpr int kSequentialMap[8] = {0, 1, 2, 3, 4, 5, 6, 7};
constexpr int kReorderMap[8] = {0, 2, 4, 6, 1, 3, 5, 7};

void check_cols(const char* fn, size_t cols) {
  if (cols % 8 != 0)
    throw Error(ErrorKind::kUsage, "", fn,
                "row length " + std::to_string(cols) + " is not a multiple of 8",
                "int4/uint4 packing needs whole groups of 8 codes per row");
}

[[noreturn]] void bad_code(const char* fn, size_t index, int code, const char* range) {
  throw Error(ErrorKind::kUsage, "", fn,
              "code " + std::to_string(code) + " at element " + std::to_string(index) +
                  " is outside " + range);
}

// `nibble(i)` returns the 4-bit pattern of flat element i.
template <class NibbleOf>
void pack_rows(size_t rows, size_t cols, int32_t* out, PackOrder order, NibbleOf nibble) {
  const int* map = pack_order_map(order);
  const size_t words = cols / 8;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t w = 0; w < words; ++w) {
      const size_t base = r * cols + 8 * w;
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) word |= nibble(base + static_cast<size_t>(map[j])) << (4 * j);
      out[r * words + w] = static_cast<int32_t>(word);  // two's complement (C++20)
    }
  }
}

// `put(i, nib)` stores nibble pattern `nib` as flat element i.
template <class Put>
void unpack_rows(const int32_t* packed, size_t rows, size_t cols, PackOrder order, Put put) {
  const int* map = pack_order_map(order);
  const size_t words = cols / 8;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t w = 0; w < words; ++w) {
      const uint32_t word = static_cast<uint32_t>(packed[r * words + w]);
      const size_t base = r * cols + 8 * w;
      for (int j = 0; j < 8; ++j)
        put(base + static_cast<size_t>(map[j]), (word >> (4 * j)) & 0x0Fu);
    }
  }
}

}  // namespace

const int* pack_order_map(PackOrder order) {
  return order == PackOrder::kReorder ? kReorderMap : kSequentialMap;
}

void pack_int4(const int8_t* codes, size_t rows, size_t cols, int32_t* out, PackOrder order) {
  check_cols("pack_int4", cols);
  for (size_t i = 0; i < rows * cols; ++i)
    if (codes[i] < -8 || codes[i] > 7) bad_code("pack_int4", i, codes[i], "[-8, 7]");
  pack_rows(rows, cols, out, order,
            [codes](size_t i) { return static_cast<uint32_t>(codes[i]) & 0x0Fu; });
}

void pack_uint4(const uint8_t* codes, size_t rows, size_t cols, int32_t* out, PackOrder order) {
  check_cols("pack_uint4", cols);
  for (size_t i = 0; i < rows * cols; ++i)
    if (codes[i] > 15) bad_code("pack_uint4", i, codes[i], "[0, 15]");
  pack_rows(rows, cols, out, order, [codes](size_t i) { return uint32_t{codes[i]}; });
}

void unpack_int4(const int32_t* packed, size_t rows, size_t cols, int8_t* out, PackOrder order) {
  check_cols("unpack_int4", cols);
  unpack_rows(packed, rows, cols, order, [out](size_t i, uint32_t nib) {
    out[i] = static_cast<int8_t>(static_cast<int>(nib) - ((nib & 8u) ? 16 : 0));
  });
}

void unpack_uint4(const int32_t* packed, size_t rows, size_t cols, uint8_t* out, PackOrder order) {
  check_cols("unpack_uint4", cols);
  unpack_rows(packed, rows, cols, order,
              [out](size_t i, uint32_t nib) { out[i] = static_cast<uint8_t>(nib); });
}

void pack_nibbles_u8(const uint8_t* codes, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i)
    if (codes[i] > 15) bad_code("pack_nibbles_u8", i, codes[i], "[0, 15]");
  for (size_t i = 0; i + 1 < n; i += 2)
    out[i / 2] = static_cast<uint8_t>(codes[i] | (codes[i + 1] << 4));
  if (n & 1) out[n / 2] = codes[n - 1];
}

void unpack_nibbles_u8(const uint8_t* packed, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<uint8_t>((i & 1) ? packed[i / 2] >> 4 : packed[i / 2] & 0x0F);
}

}  // namespace qloom
