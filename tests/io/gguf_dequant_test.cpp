// GGUF dequantization against the `gguf` Python package's dequantize: the
// goldens in tests/data/gguf (scripts/goldens/gguf_dequant_goldens.py) hold
// random and adversarial blocks of every type and gguf's output, compared here
// bit for bit (NaN == NaN by bits). Plus hand-computed blocks, the type-size
// table against gguf's, and the error paths.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/io/gguf.h"
#include "qloom/io/gguf_dequant.h"
#include "qloom/io/gguf_dequant_blocks.h"
#include "support/expect_error.h"

namespace {

namespace fs = std::filesystem;
using qloom::ErrorKind;
using namespace qloom::io;
using qloom::test::catch_error;

const fs::path kData = fs::path(QLOOM_TEST_DATA_DIR) / "gguf";

std::vector<float> dequant(GgmlType t, const std::vector<uint8_t>& bytes) {
  const auto& info = ggml_type_info(t);
  std::vector<float> out(bytes.size() / info.block_bytes * info.block_elems);
  gguf_dequantize(t, {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, out);
  return out;
}

void put_f16(std::vector<uint8_t>& b, size_t off, uint16_t h) {
  b[off] = static_cast<uint8_t>(h);
  b[off + 1] = static_cast<uint8_t>(h >> 8);
}

TEST(GgufDequant, MatchesGgufPackageBitForBit) {
  const GgufFile in = GgufFile::open(kData / "dequant_inputs.gguf");
  const GgufFile out = GgufFile::open(kData / "dequant_outputs.gguf");
  const std::vector<std::string> types = {"F32",  "F16",  "BF16", "Q8_0", "Q4_0",
                                          "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                                          "Q4_K", "Q5_K", "Q6_K"};
  size_t nan_outputs = 0;
  for (const auto& name : types) {
    const GgufTensorInfo* ti = in.find_tensor(name);
    const GgufTensorInfo* to = out.find_tensor(name);
    ASSERT_NE(ti, nullptr) << name;
    ASSERT_NE(to, nullptr) << name;
    EXPECT_EQ(ggml_type_info(ti->type).name, name);
    ASSERT_EQ(to->type, GgmlType::kF32);
    ASSERT_EQ(ti->shape(), to->shape()) << name;
    const std::vector<float> got = gguf_dequantize_tensor(in, *ti);
    const auto want = out.tensor_bytes(*to);
    ASSERT_EQ(got.size() * 4, want.size()) << name;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t w = 0;
      std::memcpy(&w, want.data() + 4 * i, 4);
      const uint32_t g = std::bit_cast<uint32_t>(got[i]);
      if (std::isnan(got[i])) ++nan_outputs;
      if (g != w && bad++ < 5)
        ADD_FAILURE() << name << " element " << i << " (block " << i / ggml_type_info(ti->type).block_elems
                      << "): qloom 0x" << std::hex << g << " gguf 0x" << w;
    }
    EXPECT_EQ(bad, 0u) << name;
  }
  EXPECT_GT(nan_outputs, 100u);  // the adversarial blocks are in the goldens
}

// Every type gguf knows has the same block size in qloom's table, and qloom
// knows no type gguf does not.
TEST(GgufDequant, TypeTableMatchesGguf) {
  const GgufFile in = GgufFile::open(kData / "dequant_inputs.gguf");
  const std::vector<int64_t> sizes = in.get_int_array("golden.type_sizes");
  ASSERT_EQ(sizes.size() % 3, 0u);
  size_t known = 0;
  for (size_t i = 0; i < sizes.size(); i += 3) {
    const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(sizes[i]));
    ASSERT_NE(info, nullptr) << "type " << sizes[i];
    EXPECT_EQ(info->block_elems, static_cast<uint32_t>(sizes[i + 1])) << info->name;
    EXPECT_EQ(info->block_bytes, static_cast<uint32_t>(sizes[i + 2])) << info->name;
    ++known;
  }
  size_t ours = 0;
  for (uint32_t t = 0; t < 256; ++t) ours += ggml_type_info(t) != nullptr;
  EXPECT_EQ(known, ours);
}

// Worked by hand from the block layouts, independent of the goldens.
TEST(GgufDequant, HandComputedBlocks) {
  {  // Q4_0: d = 0.5; qs[0] = 0x1F: element 0 = 0.5 * (15 - 8), element 16 = 0.5 * (1 - 8)
    std::vector<uint8_t> b(18, 0x88);
    put_f16(b, 0, 0x3800);
    b[2] = 0x1F;
    const auto y = dequant(GgmlType::kQ4_0, b);
    EXPECT_EQ(y[0], 3.5f);
    EXPECT_EQ(y[16], -3.5f);
    EXPECT_EQ(y[1], 0.0f);
  }
  {  // Q4_1: d = 2, m = -1; element 17 = high nibble of qs[1] = 3 -> 5
    std::vector<uint8_t> b(20, 0);
    put_f16(b, 0, 0x4000);
    put_f16(b, 2, 0xBC00);
    b[5] = 0x30;
    const auto y = dequant(GgmlType::kQ4_1, b);
    EXPECT_EQ(y[17], 5.0f);
    EXPECT_EQ(y[0], -1.0f);
  }
  {  // Q5_0: d = 1; element 31 has low nibble 15 (high of qs[15]) and qh bit 31 -> 31 - 16
    std::vector<uint8_t> b(22, 0);
    put_f16(b, 0, 0x3C00);
    b[5] = 0x80;
    b[6 + 15] = 0xF0;
    const auto y = dequant(GgmlType::kQ5_0, b);
    EXPECT_EQ(y[31], 15.0f);
    EXPECT_EQ(y[0], -16.0f);
  }
  {  // Q8_0: d = 0.25, q = -128
    std::vector<uint8_t> b(34, 0);
    put_f16(b, 0, 0x3400);
    b[2 + 5] = 0x80;
    EXPECT_EQ(dequant(GgmlType::kQ8_0, b)[5], -32.0f);
  }
  {  // Q6_K: d = 1, scale[15] = -2; element 255: h = 1, r = 127:
     // ql[64 + 63] >> 4, qh[128 + 32 + 31] >> 6
    std::vector<uint8_t> b(210, 0);
    put_f16(b, 208, 0x3C00);
    b[192 + 15] = 0xFE;
    b[127] = 0xA0;          // low 4 bits of q: 10
    b[128 + 63] = 0x80;     // high 2 bits: 2 -> q = 42 - 32 = 10
    EXPECT_EQ(dequant(GgmlType::kQ6_K, b)[255], -20.0f);
  }
  {  // Q4_K: sub-block 5 scale = low nibble of byte 8+1 | (byte 1 >> 6) << 4
    std::vector<uint8_t> b(144, 0);
    put_f16(b, 0, 0x3C00);  // d = 1
    put_f16(b, 2, 0x3C00);  // dmin = 1
    b[4 + 1] = 0x40;        // top bits of scale 5: 1 -> 16
    b[4 + 9] = 0x23;        // scale 5 low 3 -> 19; min 5 low 2 -> 2
    // element 160 = sub-block 5, high nibble of qs[64 + 0]
    b[16 + 64] = 0x70;
    EXPECT_EQ(dequant(GgmlType::kQ4_K, b)[160], 19.0f * 7 - 2);
  }
}

// fp16 fields decode exactly (the core codec agrees on every non-NaN code),
// and a NaN keeps its payload and quiet bit as numpy's cast does.
TEST(GgufDequant, Fp16FieldsDecodeExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = gguf_detail::f16_bits_to_f32(static_cast<uint16_t>(h));
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0) {
      const uint32_t bits = std::bit_cast<uint32_t>(got);
      EXPECT_EQ(bits, ((h & 0x8000u) << 16) | 0x7F800000u | ((h & 0x3FFu) << 13)) << h;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got),
                std::bit_cast<uint32_t>(qloom::f16_to_float(static_cast<uint16_t>(h))))
          << h;
    }
  }
}

TEST(GgufDequant, Errors) {
  std::vector<std::byte> src(40);
  std::vector<float> dst(32);
  const auto unsupported = catch_error([&] { gguf_dequantize(GgmlType::kQ8_1, src, dst); });
  EXPECT_EQ(unsupported.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(unsupported.message().find("Q8_1"), std::string::npos);
  EXPECT_EQ(unsupported.item(), "Q8_1");

  std::vector<std::byte> q4(18);
  std::vector<float> odd(31);
  EXPECT_EQ(catch_error([&] { gguf_dequantize(GgmlType::kQ4_0, q4, odd); }).kind(),
            ErrorKind::kUsage);
  std::vector<std::byte> short_src(17);
  EXPECT_EQ(catch_error([&] { gguf_dequantize(GgmlType::kQ4_0, short_src, dst); }).kind(),
            ErrorKind::kUsage);
  std::vector<std::byte> empty;
  std::vector<float> none;
  EXPECT_NO_THROW(gguf_dequantize(GgmlType::kQ6_K, empty, none));
}

}  // namespace
