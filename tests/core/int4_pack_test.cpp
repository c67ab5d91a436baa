// Tests of Quark-compatible int4/uint4 packing (int4_pack.h). Known answers
// are derived by hand from Quark's Pack_4_bits: nibble j of each int32 word
// holds source element order[j].
#include "qloom/core/int4_pack.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "qloom/core/error.h"

namespace qloom {
namespace {

TEST(Int4Pack, OrderMaps) {
  const int* seq = pack_order_map(PackOrder::kSequential);
  const int* re = pack_order_map(PackOrder::kReorder);
  const int want_seq[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int want_re[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(seq[j], want_seq[j]);
    EXPECT_EQ(re[j], want_re[j]);
  }
}

TEST(Int4Pack, UnsignedKnownAnswers) {
  const uint8_t codes[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int32_t w = 0;
  pack_uint4(codes, 1, 8, &w, PackOrder::kSequential);
  EXPECT_EQ(static_cast<uint32_t>(w), 0x76543210u);
  // kReorder: nibbles (low to high) = elements 0, 2, 4, 6, 1, 3, 5, 7.
  pack_uint4(codes, 1, 8, &w, PackOrder::kReorder);
  EXPECT_EQ(static_cast<uint32_t>(w), 0x75316420u);

  const uint8_t codes2[8] = {15, 0, 0, 0, 0, 0, 0, 9};
  pack_uint4(codes2, 1, 8, &w, PackOrder::kReorder);
  EXPECT_EQ(static_cast<uint32_t>(w), 0x9000000Fu);
  const uint8_t codes3[8] = {0, 10, 0, 0, 0, 0, 11, 0};
  pack_uint4(codes3, 1, 8, &w, PackOrder::kReorder);
  // element 1 -> nibble 4, element 6 -> nibble 3.
  EXPECT_EQ(static_cast<uint32_t>(w), 0x000AB000u);
}

TEST(Int4Pack, SignedKnownAnswers) {
  const int8_t codes[8] = {-1, -2, -3, -4, -5, -6, -7, -8};  // F E D C B A 9 8
  int32_t w = 0;
  pack_int4(codes, 1, 8, &w, PackOrder::kSequential);
  EXPECT_EQ(static_cast<uint32_t>(w), 0x89ABCDEFu);
  pack_int4(codes, 1, 8, &w, PackOrder::kReorder);
  // nibbles: e0=F, e2=D, e4=B, e6=9, e1=E, e3=C, e5=A, e7=8
  EXPECT_EQ(static_cast<uint32_t>(w), 0x8ACE9BDFu);
  EXPECT_LT(w, 0);  // the top nibble's sign reaches the int32 sign bit

  const int8_t mixed[8] = {7, -8, 0, 1, -1, 3, 2, -3};
  pack_int4(mixed, 1, 8, &w, PackOrder::kReorder);
  // nibbles: e0=7, e2=0, e4=F, e6=2, e1=8, e3=1, e5=3, e7=D
  EXPECT_EQ(static_cast<uint32_t>(w), 0xD3182F07u);
  int8_t back[8];
  unpack_int4(&w, 1, 8, back, PackOrder::kReorder);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], mixed[i]) << i;
}

TEST(Int4Pack, RowsAndWordsLayout) {
  // 2 rows x 16 cols -> 2 x 2 words, row-major.
  std::vector<uint8_t> codes(32);
  for (int i = 0; i < 32; ++i) codes[i] = static_cast<uint8_t>(i % 16);
  std::vector<int32_t> out(4);
  pack_uint4(codes.data(), 2, 16, out.data(), PackOrder::kSequential);
  EXPECT_EQ(static_cast<uint32_t>(out[0]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(out[1]), 0xFEDCBA98u);
  EXPECT_EQ(static_cast<uint32_t>(out[2]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(out[3]), 0xFEDCBA98u);
  pack_uint4(codes.data(), 2, 16, out.data(), PackOrder::kReorder);
  EXPECT_EQ(static_cast<uint32_t>(out[1]), 0xFDB9ECA8u);
}

TEST(Int4Pack, RoundTripsRandom) {
  std::mt19937 rng(11);
  for (PackOrder order : {PackOrder::kSequential, PackOrder::kReorder}) {
    const size_t rows = 5, cols = 64;
    std::vector<int8_t> s(rows * cols), s_back(rows * cols);
    std::vector<uint8_t> u(rows * cols), u_back(rows * cols);
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = static_cast<int8_t>(static_cast<int>(rng() % 16) - 8);
      u[i] = static_cast<uint8_t>(rng() % 16);
    }
    std::vector<int32_t> ps(rows * cols / 8), pu(rows * cols / 8);
    pack_int4(s.data(), rows, cols, ps.data(), order);
    unpack_int4(ps.data(), rows, cols, s_back.data(), order);
    EXPECT_EQ(s, s_back);
    pack_uint4(u.data(), rows, cols, pu.data(), order);
    unpack_uint4(pu.data(), rows, cols, u_back.data(), order);
    EXPECT_EQ(u, u_back);
    // Signed and unsigned packings of the same nibble patterns agree.
    std::vector<uint8_t> nib(s.size());
    for (size_t i = 0; i < s.size(); ++i) nib[i] = static_cast<uint8_t>(s[i] & 0x0F);
    std::vector<int32_t> pn(ps.size());
    pack_uint4(nib.data(), rows, cols, pn.data(), order);
    EXPECT_EQ(ps, pn);
  }
}

TEST(Int4Pack, BadLengthsAndCodesThrow) {
  std::vector<int8_t> s(12, 0);
  std::vector<uint8_t> u(12, 0);
  std::vector<int32_t> w(2);
  auto expect_usage = [](auto fn) {
    try {
      fn();
      ADD_FAILURE() << "expected qloom::Error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    }
  };
  expect_usage([&] { pack_int4(s.data(), 1, 12, w.data(), PackOrder::kReorder); });
  expect_usage([&] { pack_uint4(u.data(), 1, 12, w.data(), PackOrder::kReorder); });
  expect_usage([&] { unpack_int4(w.data(), 1, 12, s.data(), PackOrder::kReorder); });
  expect_usage([&] { unpack_uint4(w.data(), 1, 4, u.data(), PackOrder::kSequential); });
  s[3] = 8;
  expect_usage([&] { pack_int4(s.data(), 1, 8, w.data(), PackOrder::kReorder); });
  s[3] = -9;
  expect_usage([&] { pack_int4(s.data(), 1, 8, w.data(), PackOrder::kReorder); });
  u[5] = 16;
  expect_usage([&] { pack_uint4(u.data(), 1, 8, w.data(), PackOrder::kReorder); });
  expect_usage([&] { pack_nibbles_u8(u.data(), 8, reinterpret_cast<uint8_t*>(w.data())); });
  // Zero rows / zero columns are fine.
  pack_int4(s.data(), 0, 8, w.data(), PackOrder::kReorder);
  pack_int4(s.data(), 3, 0, w.data(), PackOrder::kReorder);
}

TEST(Int4Pack, NibblesU8) {
  const uint8_t codes[5] = {0x1, 0x2, 0xF, 0x0, 0x9};
  uint8_t packed[3] = {0xEE, 0xEE, 0xEE};
  pack_nibbles_u8(codes, 5, packed);
  EXPECT_EQ(packed[0], 0x21);  // element 0 low, element 1 high
  EXPECT_EQ(packed[1], 0x0F);
  EXPECT_EQ(packed[2], 0x09);  // odd n: high nibble zero
  uint8_t back[5];
  unpack_nibbles_u8(packed, 5, back);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], codes[i]);
  std::vector<uint8_t> all(256), un(512), again(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  unpack_nibbles_u8(all.data(), 512, un.data());
  pack_nibbles_u8(un.data(), 512, again.data());
  EXPECT_EQ(all, again);
}

}  // namespace
}  // namespace qloom
