// Quark's fp6 packing (Pack_fp6): four 6-bit codes in three bytes, the
// 24-bit little-endian word v0 | v1 << 6 | v2 << 12 | v3 << 18.
#include "qloom/core/fp6_pack.h"

#include <gtest/gtest.h>

#include <vector>

#include "qloom/core/error.h"
#include "support/expect_error.h"

namespace qloom {
namespace {

TEST(Fp6Pack, KnownAnswers) {
  // combined = 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x103081 -> 81 30 10.
  const uint8_t codes[4] = {1, 2, 3, 4};
  uint8_t out[3];
  pack_fp6(codes, 4, out);
  EXPECT_EQ(out[0], 0x81);
  EXPECT_EQ(out[1], 0x30);
  EXPECT_EQ(out[2], 0x10);
  // All ones in one position at a time: where each code's bits land.
  const uint8_t v3[4] = {0, 0, 0, 0x3F};
  pack_fp6(v3, 4, out);
  EXPECT_EQ(out[0], 0x00);
  EXPECT_EQ(out[1], 0x00);
  EXPECT_EQ(out[2], 0xFC);
  const uint8_t v1[4] = {0, 0x3F, 0, 0};
  pack_fp6(v1, 4, out);
  EXPECT_EQ(out[0], 0xC0);
  EXPECT_EQ(out[1], 0x0F);
  EXPECT_EQ(out[2], 0x00);
}

TEST(Fp6Pack, RoundTripsEveryCode) {
  std::vector<uint8_t> codes(256);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 37 + 11) & 0x3F);
  std::vector<uint8_t> packed(codes.size() / 4 * 3), back(codes.size());
  pack_fp6(codes.data(), codes.size(), packed.data());
  unpack_fp6(packed.data(), codes.size(), back.data());
  EXPECT_EQ(back, codes);
}

TEST(Fp6Pack, RefusesBadCountsAndCodes) {
  uint8_t codes[8] = {0, 1, 2, 3, 0x40, 0, 0, 0}, out[6];
  EXPECT_EQ(test::catch_error([&] { pack_fp6(codes, 4 + 2, out); }).kind(), ErrorKind::kUsage);
  const Error e = test::catch_error([&] { pack_fp6(codes, 8, out); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(e.message().find("code #4"), std::string::npos) << e.message();
  EXPECT_EQ(test::catch_error([&] { unpack_fp6(out, 3, codes); }).kind(), ErrorKind::kUsage);
}

}  // namespace
}  // namespace qloom
