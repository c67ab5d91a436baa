// io::GgufWriter against qloom's own GGUF reader: every metadata value type
// (arrays, nested arrays) and every tensor type the exporter writes round
// trip; the layout (alignment, offsets, padding) is what the parser checks;
// the file appears only on commit. Plus io::gguf_quantize (Q8_0, Q4_K, Q6_K)
// through the existing dequantizer: every element's code is the nearest
// level of its stored (sub-)block scales, and the error is below plain
// min/max rounding's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "qloom/io/gguf_dequant.h"
#include "qloom/io/gguf_dequant_blocks.h"
#include "qloom/io/gguf_quant.h"
#include "qloom/io/gguf_writer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::ErrorKind;
using qloom::test::catch_error;
using qloom::test::TempDir;
using namespace qloom::io;

std::span<const std::byte> as_bytes(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> dequant(GgmlType t, const std::vector<std::byte>& bytes, size_t n) {
  std::vector<float> out(n);
  gguf_dequantize(t, as_bytes(bytes), out);
  return out;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  TempDir tmp("gguf-writer");
  GgufWriter w;
  w.add("t.u8", gguf_scalar(GgufValueType::kU8, 250, 0, 0));
  w.add("t.i8", gguf_scalar(GgufValueType::kI8, 0, -128, 0));
  w.add("t.u16", gguf_scalar(GgufValueType::kU16, 65535, 0, 0));
  w.add("t.i16", gguf_scalar(GgufValueType::kI16, 0, -32768, 0));
  w.add_u32("t.u32", 4000000000u);
  w.add("t.i32", gguf_i32(-2));
  w.add_f32("t.f32", 0.1f);
  w.add("t.u64", gguf_u64(~0ULL));
  w.add("t.i64", gguf_scalar(GgufValueType::kI64, 0, INT64_MIN, 0));
  w.add("t.f64", gguf_scalar(GgufValueType::kF64, 0, 0, -1e300));
  w.add_bool("t.bool", true);
  w.add_string("t.string", "caf\xc3\xa9 \"x\"\n");
  w.add("t.strings", gguf_string_array({"a", "", "\xc3\xbc"}));
  w.add("t.i32s", gguf_i32_array({1, -1, 7}));
  w.add("t.f32s", gguf_f32_array({1.5f, -2.0f}));
  w.add("t.empty", gguf_array(GgufValueType::kI32, {}));
  w.add("t.nested", gguf_array(GgufValueType::kArray, {gguf_i32_array({1, 2}), gguf_i32_array({3})}));
  w.begin(tmp / "m.gguf");
  w.commit();

  const GgufFile f = GgufFile::open(tmp / "m.gguf");
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.header().kv.size(), 17u);
  EXPECT_EQ(f.header().kv[0].first, "t.u8");
  EXPECT_EQ(f.find("t.u8")->type, GgufValueType::kU8);
  EXPECT_EQ(f.get_uint("t.u8"), 250u);
  EXPECT_EQ(f.get_int("t.i8"), -128);
  EXPECT_EQ(f.find("t.i8")->type, GgufValueType::kI8);
  EXPECT_EQ(f.get_uint("t.u16"), 65535u);
  EXPECT_EQ(f.get_int("t.i16"), -32768);
  EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f.find("t.u32")->type, GgufValueType::kU32);
  EXPECT_EQ(f.get_int("t.i32"), -2);
  EXPECT_EQ(f.get_float("t.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.find("t.f32")->type, GgufValueType::kF32);
  EXPECT_EQ(f.get_uint("t.u64"), ~0ULL);
  EXPECT_EQ(f.get_int("t.i64"), INT64_MIN);
  EXPECT_EQ(f.get_float("t.f64"), -1e300);
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_EQ(f.get_string("t.string"), "caf\xc3\xa9 \"x\"\n");
  EXPECT_EQ(f.get_string_array("t.strings"), (std::vector<std::string>{"a", "", "\xc3\xbc"}));
  EXPECT_EQ(f.get_int_array("t.i32s"), (std::vector<int64_t>{1, -1, 7}));
  EXPECT_EQ(f.find("t.i32s")->elem_type, GgufValueType::kI32);
  EXPECT_EQ(f.get_float_array("t.f32s"), (std::vector<double>{1.5, -2.0}));
  EXPECT_TRUE(f.find("t.empty")->array.empty());
  const GgufValue* nested = f.find("t.nested");
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->elem_type, GgufValueType::kArray);
  EXPECT_EQ(nested->array[0].array.size(), 2u);
  EXPECT_EQ(nested->array[1].array[0].i, 3);
}

TEST(GgufWriter, EveryTensorTypeRoundTripsAligned) {
  TempDir tmp("gguf-writer");
  struct Case {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
  };
  const std::vector<Case> cases = {{"f32", GgmlType::kF32, {3}},          {"f16", GgmlType::kF16, {5, 3}},
                                   {"bf16", GgmlType::kBF16, {7, 1}},     {"q8_0", GgmlType::kQ8_0, {64, 3}},
                                   {"q4_k", GgmlType::kQ4_K, {256, 2}},   {"q6_k", GgmlType::kQ6_K, {512}},
                                   {"q4_0", GgmlType::kQ4_0, {32, 2, 1}}, {"q4_1", GgmlType::kQ4_1, {32}}};
  GgufWriter w;
  w.add_u32("general.alignment", 64);
  std::vector<std::vector<std::byte>> data;
  uint32_t seed = 1;
  for (const auto& c : cases) {
    w.add_tensor(c.name, c.type, c.ne);
    uint64_t n = 1;
    for (auto d : c.ne) n *= d;
    const auto x = random_values(n, seed++);
    if (c.type == GgmlType::kQ4_0 || c.type == GgmlType::kQ4_1) {
      std::vector<std::byte> raw(gguf_tensor_nbytes(c.type, c.ne, c.name));
      for (size_t i = 0; i < raw.size(); ++i) raw[i] = std::byte(static_cast<uint8_t>(i * 37 + 11));
      for (size_t b = 0; b < raw.size(); b += ggml_type_info(c.type).block_bytes) raw[b + 1] = std::byte{0x3c};
      data.push_back(raw);
    } else {
      data.push_back(gguf_quantize(c.type, x));
    }
  }
  w.begin(tmp / "t.gguf");
  EXPECT_EQ(w.bytes_written() % 64, 0u);
  for (const auto& d : data) w.write_tensor(as_bytes(d));
  w.commit();

  const GgufFile f = GgufFile::open(tmp / "t.gguf");
  EXPECT_EQ(f.header().alignment, 64u);
  EXPECT_EQ(f.header().data_offset % 64, 0u);
  ASSERT_EQ(f.tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.ne, cases[i].ne);
    EXPECT_EQ(t.offset % 64, 0u);
    const auto bytes = f.tensor_bytes(t);
    ASSERT_EQ(bytes.size(), data[i].size());
    EXPECT_EQ(std::memcmp(bytes.data(), data[i].data(), bytes.size()), 0) << t.name;
    EXPECT_EQ(gguf_dequantize_tensor(f, t), dequant(t.type, data[i], t.numel())) << t.name;
  }
}

TEST(GgufWriter, NoFileUntilCommitAndNoneOnAbandon) {
  TempDir tmp("gguf-writer");
  const fs::path out = tmp / "sub" / "a.gguf";
  {
    GgufWriter w;
    w.add_tensor("x", GgmlType::kF32, {4});
    w.begin(out);
    EXPECT_FALSE(fs::exists(out));
    const std::vector<std::byte> bad(15);
    EXPECT_EQ(catch_error([&] { w.write_tensor(as_bytes(bad)); }).kind(), ErrorKind::kUsage);
    EXPECT_EQ(catch_error([&] { w.commit(); }).item(), "x");
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(out.parent_path())) << "staging left behind";
  // An existing file is kept unless overwriting is asked for.
  tmp.write("sub/a.gguf", std::string("old"));
  GgufWriter w2;
  EXPECT_EQ(catch_error([&] { w2.begin(out); }).kind(), ErrorKind::kUsage);
  GgufWriter w3;
  w3.begin(out, true);
  w3.commit();
  EXPECT_EQ(GgufFile::open(out).tensors().size(), 0u);
}

TEST(GgufWriter, RefusesBadDeclarations) {
  GgufWriter w;
  w.add_u32("a", 1);
  EXPECT_EQ(catch_error([&] { w.add_u32("a", 2); }).item(), "a");
  EXPECT_EQ(catch_error([&] { w.add_u32("", 2); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] { w.add_u32("general.alignment", 48); }).item(), "general.alignment");
  EXPECT_EQ(catch_error([&] { w.add_tensor("q", GgmlType::kQ4_0, {48}); }).item(), "q");
  EXPECT_EQ(catch_error([&] { w.add_tensor("r", GgmlType::kF32, {1, 1, 1, 1, 1}); }).item(), "r");
  w.add_tensor("s", GgmlType::kF32, {1});
  EXPECT_EQ(catch_error([&] { w.add_tensor("s", GgmlType::kF32, {1}); }).item(), "s");
  EXPECT_EQ(catch_error([&] { w.add_tensor("bad\xff", GgmlType::kF32, {1}); }).kind(), ErrorKind::kUsage);
}

// ---- gguf_quantize ----------------------------------------------------------

float f16_at(const std::vector<std::byte>& b, size_t off) {
  return gguf_detail::f16_at(reinterpret_cast<const uint8_t*>(b.data()) + off);
}

// Plain min/max asymmetric 4-bit rounding per 32 values (what Q4_1 does):
// the baseline Q4_K's fitted scales must beat.
double minmax4_sq_error(const std::vector<float>& x) {
  double err = 0;
  for (size_t b = 0; b < x.size(); b += 32) {
    float lo = x[b], hi = x[b];
    for (size_t i = b; i < b + 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    const float s = (hi - lo) / 15;
    for (size_t i = b; i < b + 32; ++i) {
      const float q = std::nearbyint((x[i] - lo) / s);
      err += std::pow(q * s + lo - x[i], 2);
    }
  }
  return err;
}

double sq_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += std::pow(double(a[i]) - b[i], 2);
  return e;
}

TEST(GgufQuantize, Q4KCodesAreNearestLevelsAndBeatMinMax) {
  const auto x = random_values(256 * 8, 7, 0.05f);
  const auto q = gguf_quantize(GgmlType::kQ4_K, x);
  ASSERT_EQ(q.size(), 8u * 144);
  const auto y = dequant(GgmlType::kQ4_K, q, x.size());
  // Each value is the nearest of its sub-block's 16 levels: decode blocks
  // whose codes are all k to get level k of every sub-block.
  for (size_t b = 0; b < 8; ++b) {
    std::vector<std::vector<float>> levels(16);
    for (int k = 0; k < 16; ++k) {
      std::vector<std::byte> blk(q.begin() + 144 * b, q.begin() + 144 * (b + 1));
      for (int i = 16; i < 144; ++i) blk[i] = std::byte(static_cast<uint8_t>(k | (k << 4)));
      levels[k] = dequant(GgmlType::kQ4_K, blk, 256);
    }
    for (int e = 0; e < 256; ++e) {
      const float xv = x[256 * b + e], yv = y[256 * b + e];
      for (int k = 0; k < 16; ++k)
        ASSERT_LE(std::fabs(yv - xv), std::fabs(levels[k][e] - xv) * (1 + 1e-6f) + 1e-12f) << b << " " << e;
    }
  }
  EXPECT_LT(sq_error(x, y), minmax4_sq_error(x));
  EXPECT_GT(sq_error(x, y), 0.0);
}

TEST(GgufQuantize, Q6KCloseAndCodesNearest) {
  const auto x = random_values(256 * 4, 9, 0.02f);
  const auto q = gguf_quantize(GgmlType::kQ6_K, x);
  ASSERT_EQ(q.size(), 4u * 210);
  const auto y = dequant(GgmlType::kQ6_K, q, x.size());
  for (size_t b = 0; b < 4; ++b) {
    const float d = f16_at(q, 210 * b + 208);
    for (int e = 0; e < 256; ++e) {
      const int sc = static_cast<int8_t>(std::to_integer<uint8_t>(q[210 * b + 192 + e / 16]));
      const float step = std::fabs(d * static_cast<float>(sc));
      const float xv = x[256 * b + e], yv = y[256 * b + e];
      // Inside the code range the error is at most half a step.
      if (std::fabs(xv) < 31 * step) {
        ASSERT_LE(std::fabs(yv - xv), step * 0.5f * (1 + 1e-5f)) << e;
      }
    }
  }
  // 6-bit symmetric: relative RMS error well under 4-bit min/max's.
  EXPECT_LT(sq_error(x, y) * 8, minmax4_sq_error(x));
}

TEST(GgufQuantize, Q80AndPlainTypes) {
  auto x = random_values(64, 3);
  x[5] = 0;
  const auto q = gguf_quantize(GgmlType::kQ8_0, x);
  const auto y = dequant(GgmlType::kQ8_0, q, 64);
  for (size_t b = 0; b < 2; ++b) {
    const float d = f16_at(q, 34 * b);
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) EXPECT_LE(std::fabs(y[i] - x[i]), d * 0.5f * 1.0001f);
  }
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_EQ(dequant(GgmlType::kF32, gguf_quantize(GgmlType::kF32, x), 64), x);
  const std::vector<float> exact = {1.0f, -2.5f, 0.15625f, 65504.0f};
  EXPECT_EQ(dequant(GgmlType::kF16, gguf_quantize(GgmlType::kF16, exact), 4), exact);
  const std::vector<float> two = {1.0f, -3.0f};
  EXPECT_EQ(dequant(GgmlType::kBF16, gguf_quantize(GgmlType::kBF16, two), 2),
            (std::vector<float>{1.0f, -3.0f}));
  // All-zero blocks encode as zeros.
  const std::vector<float> zeros(256, 0.0f);
  EXPECT_EQ(dequant(GgmlType::kQ4_K, gguf_quantize(GgmlType::kQ4_K, zeros), 256), zeros);
  EXPECT_EQ(dequant(GgmlType::kQ6_K, gguf_quantize(GgmlType::kQ6_K, zeros), 256), zeros);
  EXPECT_EQ(catch_error([&] { gguf_quantize(GgmlType::kQ4_K, x); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] { gguf_quantize(GgmlType::kQ2_K, zeros); }).kind(), ErrorKind::kUnsupported);
}

TEST(GgufQuantize, Deterministic) {
  const auto x = random_values(256 * 3, 11);
  EXPECT_EQ(gguf_quantize(GgmlType::kQ4_K, x), gguf_quantize(GgmlType::kQ4_K, x));
  EXPECT_EQ(gguf_quantize(GgmlType::kQ6_K, x), gguf_quantize(GgmlType::kQ6_K, x));
}

}  // namespace
