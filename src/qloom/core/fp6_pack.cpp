#include "qloom/core/fp6_pack.h"

#include <string>

#include "qloom/core/error.h"

namespace qloom {
namespace {

void check_count(const char* fn, size_t n) {
  if (n % 4 != 0)
    throw Error(ErrorKind::kUsage, "", fn,
                "6-bit codes pack four to three bytes; got " + std::to_string(n) + " codes (not a multiple of 4)",
                "MX fp6 tensors have a multiple of 32 elements per row");
}

}  // namespace

void pack_fp6(const uint8_t* codes, size_t n, uint8_t* out) {
  check_count("pack_fp6", n);
  for (size_t i = 0; i < n; ++i)
    if (codes[i] > 0x3F)
      throw Error(ErrorKind::kUsage, "", "pack_fp6",
                  "code #" + std::to_string(i) + " = " + std::to_string(codes[i]) + " does not fit 6 bits",
                  "fp6 codes are 0..63");
  for (size_t i = 0, o = 0; i < n; i += 4, o += 3) {
    const uint32_t w = static_cast<uint32_t>(codes[i]) | static_cast<uint32_t>(codes[i + 1]) << 6 |
                       static_cast<uint32_t>(codes[i + 2]) << 12 | static_cast<uint32_t>(codes[i + 3]) << 18;
    out[o] = static_cast<uint8_t>(w & 0xFF);
    out[o + 1] = static_cast<uint8_t>((w >> 8) & 0xFF);
    out[o + 2] = static_cast<uint8_t>(w >> 16);
  }
}

void unpack_fp6(const uint8_t* packed, size_t n, uint8_t* out) {
  check_count("unpack_fp6", n);
  for (size_t i = 0, o = 0; i < n; i += 4, o += 3) {
    const uint32_t w = static_cast<uint32_t>(packed[o]) | static_cast<uint32_t>(packed[o + 1]) << 8 |
                       static_cast<uint32_t>(packed[o + 2]) << 16;
    for (size_t k = 0; k < 4; ++k) out[i + k] = static_cast<uint8_t>((w >> (6 * k)) & 0x3F);
  }
}

}  // namespace qloom
