// Tests for the GGUF header parser and GgufFile: files of every metadata type
// written with tests/io/gguf_test_writer.h, one crafted file per validation
// rule (its error kind and item checked), truncation at every byte, and the
// real SmolLM2 GGUF when it is on this machine.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "io/gguf_test_writer.h"
#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::Error;
using qloom::ErrorKind;
using namespace qloom::io;
using qloom::test::catch_error;
using qloom::test::GgufBuilder;
using qloom::test::GgufBytes;
using VT = GgufValueType;

const std::string kLabel = "crafted.gguf";

std::span<const std::byte> span_of(const std::vector<uint8_t>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}
GgufHeader parse(const std::vector<uint8_t>& v) { return parse_gguf_header(span_of(v), kLabel); }
Error parse_error(const std::vector<uint8_t>& v) {
  return catch_error([&] { parse(v); });
}
void expect_invalid(const std::vector<uint8_t>& v, const std::string& item,
                    const std::string& fragment) {
  const Error e = parse_error(v);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
  EXPECT_EQ(e.file(), kLabel);
  EXPECT_EQ(e.item(), item) << e.what();
  EXPECT_NE(e.message().find(fragment), std::string::npos) << e.what();
  EXPECT_FALSE(e.remedy().empty()) << e.what();
}

// A file holding one value of every metadata type, nested arrays included.
GgufBuilder every_type_builder() {
  GgufBuilder b;
  b.kv_raw("t.u8", VT::kU8, GgufBytes().u8(250));
  b.kv_raw("t.i8", VT::kI8, GgufBytes().u8(0x80));
  b.kv_raw("t.u16", VT::kU16, GgufBytes().u16(65535));
  b.kv_raw("t.i16", VT::kI16, GgufBytes().u16(0x8000));
  b.kv_raw("t.u32", VT::kU32, GgufBytes().u32(4000000000u));
  b.kv_raw("t.i32", VT::kI32, GgufBytes().u32(0xFFFFFFFEu));
  b.kv_raw("t.f32", VT::kF32, GgufBytes().f32(0.1f));
  b.kv_raw("t.bool", VT::kBool, GgufBytes().u8(1));
  b.kv_string("t.string", "caf\xC3\xA9 \"x\"\n");
  b.kv_raw("t.u64", VT::kU64, GgufBytes().u64(std::numeric_limits<uint64_t>::max()));
  b.kv_raw("t.i64", VT::kI64, GgufBytes().u64(0x8000000000000000ull));
  b.kv_raw("t.f64", VT::kF64, GgufBytes().f64(-1e300));
  b.kv_strings("t.strings", {"a", "", "bc"});
  b.kv_array32("t.i32s", VT::kI32, {1, 0xFFFFFFFFu, 7});
  b.kv_array32("t.f32s", VT::kF32, {0x3F800000u, 0xC0000000u});
  b.kv_raw("t.empty", VT::kArray, GgufBytes().u32(static_cast<uint32_t>(VT::kU64)).u64(0));
  // [[1, 2], [true]]: an array of two arrays of different element types.
  b.kv_raw("t.nested", VT::kArray,
           GgufBytes()
               .u32(static_cast<uint32_t>(VT::kArray)).u64(2)
               .u32(static_cast<uint32_t>(VT::kU16)).u64(2).u16(1).u16(2)
               .u32(static_cast<uint32_t>(VT::kBool)).u64(1).u8(1));
  b.kv_raw("t.bools", VT::kArray,
           GgufBytes().u32(static_cast<uint32_t>(VT::kBool)).u64(2).u8(0).u8(1));
  b.kv_raw("t.u8s", VT::kArray, GgufBytes().u32(0).u64(3).u8(1).u8(2).u8(3));
  b.kv_raw("t.i64s", VT::kArray,
           GgufBytes().u32(static_cast<uint32_t>(VT::kI64)).u64(1).u64(0xFFFFFFFFFFFFFFFFull));
  b.kv_raw("t.f64s", VT::kArray,
           GgufBytes().u32(static_cast<uint32_t>(VT::kF64)).u64(1).f64(2.5));
  b.kv_raw("t.neg", VT::kI32, GgufBytes().u32(static_cast<uint32_t>(-5)));
  b.kv_raw("t.u32_as_float", VT::kU32, GgufBytes().u32(3));
  b.tensor("a", {32, 2}, GgmlType::kQ8_0);
  b.tensor("b", {3}, GgmlType::kF32);
  b.tensor("c", {256, 1, 1, 2}, GgmlType::kQ4_K);
  return b;
}

TEST(GgufParse, EveryMetadataType) {
  const auto h = parse(every_type_builder().build());
  EXPECT_EQ(h.version, 3u);
  ASSERT_EQ(h.kv.size(), 23u);
  auto at = [&](size_t i) -> const GgufValue& { return h.kv[i].second; };
  EXPECT_EQ(h.kv[0].first, "t.u8");
  EXPECT_EQ(at(0).type, VT::kU8);
  EXPECT_EQ(at(0).u, 250u);
  EXPECT_EQ(at(1).i, -128);
  EXPECT_EQ(at(2).u, 65535u);
  EXPECT_EQ(at(3).i, -32768);
  EXPECT_EQ(at(4).u, 4000000000u);
  EXPECT_EQ(at(5).i, -2);
  EXPECT_EQ(at(6).f, static_cast<double>(0.1f));
  EXPECT_EQ(at(7).type, VT::kBool);
  EXPECT_EQ(at(7).u, 1u);
  EXPECT_EQ(at(8).s, "caf\xC3\xA9 \"x\"\n");
  EXPECT_EQ(at(9).u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(at(10).i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(at(11).f, -1e300);
  ASSERT_EQ(at(12).array.size(), 3u);
  EXPECT_EQ(at(12).elem_type, VT::kString);
  EXPECT_EQ(at(12).array[2].s, "bc");
  EXPECT_EQ(at(13).array[1].i, -1);
  EXPECT_EQ(at(14).array[1].f, -2.0);
  EXPECT_EQ(at(15).elem_type, VT::kU64);
  EXPECT_TRUE(at(15).array.empty());
  const GgufValue& nested = at(16);
  EXPECT_EQ(nested.elem_type, VT::kArray);
  ASSERT_EQ(nested.array.size(), 2u);
  EXPECT_EQ(nested.array[0].elem_type, VT::kU16);
  EXPECT_EQ(nested.array[0].array[1].u, 2u);
  EXPECT_EQ(nested.array[1].elem_type, VT::kBool);
  EXPECT_EQ(nested.array[1].array[0].u, 1u);
  for (size_t i = 0; i < h.kv.size(); ++i)
    EXPECT_EQ(h.kv[i].second.is_integer(),
              (i <= 5 || i == 9 || i == 10 || i >= 21)) << h.kv[i].first;

  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].type, GgmlType::kQ8_0);
  EXPECT_EQ(h.tensors[0].nbytes, 2u * 34);
  EXPECT_EQ(h.tensors[0].shape(), (std::vector<uint64_t>{2, 32}));
  EXPECT_EQ(h.tensors[1].offset, 96u);  // 68 bytes, padded to 32
  EXPECT_EQ(h.tensors[2].numel(), 512u);
  EXPECT_EQ(h.tensors[2].nbytes, 2u * 144);
  EXPECT_EQ(h.tensors[2].shape(), (std::vector<uint64_t>{2, 1, 1, 256}));
  EXPECT_EQ(h.data_offset % 32, 0u);
}

TEST(GgufParse, VersionTwoAndCustomAlignment) {
  GgufBuilder b;
  b.version = 2;
  b.alignment = 64;
  b.kv_u32("general.alignment", 64);
  b.tensor("x", {4}, GgmlType::kF32);
  b.tensor("y", {4}, GgmlType::kF16);
  const auto h = parse(b.build());
  EXPECT_EQ(h.version, 2u);
  EXPECT_EQ(h.alignment, 64u);
  EXPECT_EQ(h.data_offset % 64, 0u);
  EXPECT_EQ(h.tensors[1].offset, 64u);
}

TEST(GgufParse, EmptyAndZeroSizedTensors) {
  GgufBuilder none;
  const auto raw = none.build();
  const auto h = parse(raw);
  EXPECT_TRUE(h.tensors.empty());
  // Without padding or data at all (a metadata-only file) it still parses.
  std::vector<uint8_t> bare(raw.begin(), raw.begin() + 24);
  EXPECT_TRUE(parse(bare).tensors.empty());

  GgufBuilder b;
  b.tensor("z", {0, 7}, GgmlType::kQ4_0);
  b.tensor("s", {}, GgmlType::kF32);  // no dimensions: one element
  const auto hz = parse(b.build());
  EXPECT_EQ(hz.tensors[0].numel(), 0u);
  EXPECT_EQ(hz.tensors[0].nbytes, 0u);
  EXPECT_EQ(hz.tensors[1].numel(), 1u);
  EXPECT_EQ(hz.tensors[1].nbytes, 4u);
}

// --- one error per rule -------------------------------------------------------

TEST(GgufParse, RejectsBadPreamble) {
  GgufBuilder b;
  b.magic = "GGML";
  expect_invalid(b.build(), "magic", "not a GGUF file");
  expect_invalid({'G', 'G'}, "magic", "truncated");
  expect_invalid({}, "magic", "truncated");

  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    GgufBuilder bv;
    bv.version = v;
    const Error e = parse_error(bv.build());
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << v;
    EXPECT_EQ(e.item(), "version");
    if (v == 0x03000000u) {
      EXPECT_NE(e.message().find("big-endian"), std::string::npos);
    }
  }

  GgufBuilder t;
  t.tensor_count_override = 1ll << 40;
  expect_invalid(t.build(), "tensor_count", "cannot fit");
  GgufBuilder k;
  k.kv_count_override = 1ll << 40;
  expect_invalid(k.build(), "metadata_kv_count", "cannot fit");
  GgufBuilder k2;  // a count that fits the bytes but claims more KVs than there are
  k2.kv_u32("a", 1);
  k2.kv_count_override = 2;
  k2.tensor("w", {64}, GgmlType::kF32);
  const Error e = parse_error(k2.build());
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
}

TEST(GgufParse, RejectsBadMetadata) {
  auto one = [](std::string_view key, VT type, const GgufBytes& payload) {
    GgufBuilder b;
    b.kv_raw(key, type, payload);
    return b.build();
  };
  expect_invalid(one("k", static_cast<VT>(13), GgufBytes().u32(0)), "k", "not a GGUF value type");
  expect_invalid(one("k", VT::kArray, GgufBytes().u32(99).u64(0)), "k", "array element type");
  expect_invalid(one("k", VT::kArray, GgufBytes().u32(4).u64(1000).u32(1)), "k",
                 "the file is truncated");
  expect_invalid(one("k", VT::kArray, GgufBytes().u32(0).u64(kMaxGgufArrayElements + 1)), "k",
                 "limit");
  expect_invalid(one("k", VT::kBool, GgufBytes().u8(2)), "k", "expected 0 or 1");
  expect_invalid(one("k", VT::kString, GgufBytes().u64(kMaxGgufStringBytes + 1)), "k", "limit");
  expect_invalid(one("k", VT::kString, GgufBytes().u64(100).u32(0)), "k", "truncated");
  expect_invalid(one("", VT::kU8, GgufBytes().u8(0)), "metadata key #0", "empty");
  expect_invalid(one("a\xFF", VT::kU8, GgufBytes().u8(0)), "metadata key #0", "UTF-8");

  // Arrays nested deeper than kMaxGgufArrayDepth.
  GgufBytes deep;
  for (uint32_t i = 0; i < kMaxGgufArrayDepth; ++i) deep.u32(static_cast<uint32_t>(VT::kArray)).u64(1);
  deep.u32(0).u64(0);
  expect_invalid(one("deep", VT::kArray, deep), "deep", "nest");
  GgufBytes ok;  // exactly at the limit
  for (uint32_t i = 1; i < kMaxGgufArrayDepth; ++i) ok.u32(static_cast<uint32_t>(VT::kArray)).u64(1);
  ok.u32(0).u64(0);
  EXPECT_NO_THROW(parse(one("deep", VT::kArray, ok)));

  GgufBuilder dup;
  dup.kv_u32("general.x", 1).kv_u32("general.x", 2);
  expect_invalid(dup.build(), "general.x", "twice");
}

TEST(GgufParse, RejectsBadAlignment) {
  for (uint32_t a : {0u, 48u, 3u}) {
    GgufBuilder b;
    b.kv_u32("general.alignment", a);
    expect_invalid(b.build(), "general.alignment", "power of two");
  }
  GgufBuilder b;
  b.kv_raw("general.alignment", VT::kU64, GgufBytes().u64(32));
  expect_invalid(b.build(), "general.alignment", "uint32");
}

TEST(GgufParse, RejectsBadTensorInfos) {
  {
    GgufBuilder b;
    b.tensor_raw("w", {1, 1, 1, 1, 1}, 0, std::vector<uint8_t>(4));
    expect_invalid(b.build(), "w", "5 dimensions");
  }
  for (uint32_t t : {4u, 5u, 31u, 36u, 42u, 0xFFFFFFFFu}) {
    GgufBuilder b;
    b.tensor_raw("w", {32}, t, std::vector<uint8_t>(64));
    expect_invalid(b.build(), "w", "not a type ggml defines");
  }
  {
    GgufBuilder b;
    b.tensor_raw("w", {48, 2}, static_cast<uint32_t>(GgmlType::kQ4_0), std::vector<uint8_t>(54));
    expect_invalid(b.build(), "w", "not a multiple of Q4_0's block size 32");
  }
  {
    GgufBuilder b;
    b.tensor_raw("w", {1ull << 32, 1ull << 32}, 0, {});
    expect_invalid(b.build(), "w", "2^63 elements or more");
  }
  {
    GgufBuilder b;
    b.tensor_raw("w", {1ull << 63, 0}, 0, {});
    expect_invalid(b.build(), "w", "a dimension of 2^63");
  }
  {
    GgufBuilder b;  // numel fits int64 but the bytes do not fit 2^64
    b.tensor_raw("w", {1ull << 62}, 0, {});
    expect_invalid(b.build(), "w", "needs 2^64 bytes");
  }
  {
    GgufBuilder b;
    b.tensor("w", {8}, GgmlType::kF32, 4);
    expect_invalid(b.build(), "w", "not a multiple of the alignment");
  }
  {
    GgufBuilder b;
    b.tensor("w", {8}, GgmlType::kF32, 1ll << 40);
    expect_invalid(b.build(), "w", "past the end of the data section");
  }
  {
    GgufBuilder b;
    b.tensor("big", {64}, GgmlType::kF32, 0);
    b.tensor("small", {8}, GgmlType::kF32, 224);
    b.tensor("inside", {8}, GgmlType::kF32, 32);
    expect_invalid(b.build(), "inside", "overlaps tensor big");
  }
  {
    GgufBuilder b;
    b.tensor("w", {8}, GgmlType::kF32).tensor("w", {8}, GgmlType::kF32);
    expect_invalid(b.build(), "w", "twice");
  }
  {
    GgufBuilder b;
    b.tensor("", {8}, GgmlType::kF32);
    expect_invalid(b.build(), "tensor info #0", "empty");
  }
  {
    GgufBuilder b;
    b.tensor("ok", {8}, GgmlType::kF32).tensor("bad\xC0", {8}, GgmlType::kF32);
    expect_invalid(b.build(), "tensor info #1", "UTF-8");
  }
  {
    GgufBuilder b;  // the tensor count fits, but the tensor infos run out
    b.tensor_count_override = 2;
    b.tensor("w", {8}, GgmlType::kF32);
    const Error e = parse_error(b.build());
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  {
    GgufBuilder b;  // empty tensors may share offsets and sit anywhere in the section
    b.tensor("w", {8}, GgmlType::kF32, 0).tensor("e", {0}, GgmlType::kF32, 0);
    EXPECT_NO_THROW(parse(b.build()));
  }
}

// Every strict prefix of a valid file is an error with a name, never a crash.
TEST(GgufParse, TruncationAtEveryByte) {
  const auto full = every_type_builder().build();
  ASSERT_NO_THROW(parse(full));
  // The last tensor's data ends before the final padding.
  const auto h = parse(full);
  const uint64_t data_end = h.data_offset + h.tensors.back().offset + h.tensors.back().nbytes;
  for (size_t n = 0; n < data_end; ++n) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    const Error e = parse_error(cut);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << "prefix " << n;
    EXPECT_FALSE(e.item().empty()) << "prefix " << n << ": " << e.what();
    EXPECT_EQ(e.file(), kLabel);
  }
}

// --- GgufFile ------------------------------------------------------------------

class GgufFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.write("m.gguf", every_type_builder().build());
    file_ = std::make_unique<GgufFile>(GgufFile::open(path_));
  }
  qloom::test::TempDir dir_{"gguf"};
  fs::path path_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufFileTest, TypedGetters) {
  const GgufFile& f = *file_;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_uint("t.u8"), 250u);
  EXPECT_EQ(f.get_uint("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("t.i8"), -128);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000);
  EXPECT_EQ(f.get_float("t.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.get_float("t.u32_as_float"), 3.0);
  EXPECT_EQ(f.get_float("t.neg"), -5.0);
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_EQ(f.get_string("t.string"), "caf\xC3\xA9 \"x\"\n");
  EXPECT_EQ(f.get_string_array("t.strings"), (std::vector<std::string>{"a", "", "bc"}));
  EXPECT_EQ(f.get_int_array("t.i32s"), (std::vector<int64_t>{1, -1, 7}));
  EXPECT_EQ(f.get_float_array("t.f32s"), (std::vector<double>{1.0, -2.0}));
  EXPECT_EQ(f.get_float_array("t.i32s"), (std::vector<double>{1.0, -1.0, 7.0}));
  EXPECT_TRUE(f.get_int_array("t.empty").empty());
  EXPECT_TRUE(f.has("t.nested"));
  EXPECT_FALSE(f.has("t.missing"));
  EXPECT_EQ(f.find("t.missing"), nullptr);
  EXPECT_EQ(f.get_string_opt("t.missing"), std::nullopt);
  EXPECT_EQ(f.get_uint_opt("t.missing"), std::nullopt);
  EXPECT_EQ(f.get_float_opt("t.missing"), std::nullopt);
  EXPECT_EQ(f.get_uint_opt("t.u16"), 65535u);
  EXPECT_EQ(f.get_float_opt("t.f64"), -1e300);
  EXPECT_EQ(f.get_string_opt("t.string"), "caf\xC3\xA9 \"x\"\n");
}

TEST_F(GgufFileTest, GetterErrorsNameTheKey) {
  const GgufFile& f = *file_;
  struct Case {
    std::function<void()> call;
    ErrorKind kind;
    std::string key;
  };
  const std::vector<Case> cases = {
      {[&] { f.get_uint("t.missing"); }, ErrorKind::kNotFound, "t.missing"},
      {[&] { f.get_string("t.missing"); }, ErrorKind::kNotFound, "t.missing"},
      {[&] { f.get_uint("t.neg"); }, ErrorKind::kInvalidInput, "t.neg"},
      {[&] { f.get_uint("t.string"); }, ErrorKind::kInvalidInput, "t.string"},
      {[&] { f.get_uint("t.bool"); }, ErrorKind::kInvalidInput, "t.bool"},
      {[&] { f.get_int("t.u64"); }, ErrorKind::kInvalidInput, "t.u64"},
      {[&] { f.get_float("t.string"); }, ErrorKind::kInvalidInput, "t.string"},
      {[&] { f.get_bool("t.u8"); }, ErrorKind::kInvalidInput, "t.u8"},
      {[&] { f.get_string("t.u32"); }, ErrorKind::kInvalidInput, "t.u32"},
      {[&] { f.get_string_array("t.i32s"); }, ErrorKind::kInvalidInput, "t.i32s"},
      {[&] { f.get_string_array("t.string"); }, ErrorKind::kInvalidInput, "t.string"},
      {[&] { f.get_int_array("t.f32s"); }, ErrorKind::kInvalidInput, "t.f32s"},
      {[&] { f.get_float_array("t.strings"); }, ErrorKind::kInvalidInput, "t.strings"},
      {[&] { f.get_float_array("t.nested"); }, ErrorKind::kInvalidInput, "t.nested"},
      {[&] { f.get_string_opt("t.u8"); }, ErrorKind::kInvalidInput, "t.u8"},
      {[&] { f.get_uint_opt("t.neg"); }, ErrorKind::kInvalidInput, "t.neg"},
      {[&] { f.get_float_opt("t.bool"); }, ErrorKind::kInvalidInput, "t.bool"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Error e = catch_error(cases[i].call);
    EXPECT_EQ(e.kind(), cases[i].kind) << i << ": " << e.what();
    EXPECT_EQ(e.item(), cases[i].key) << i;
    EXPECT_EQ(e.file(), path_.string()) << i;
  }
  EXPECT_EQ(f.get_int_array("t.i64s"), (std::vector<int64_t>{-1}));
}

// A string value that is not UTF-8 is an error naming the key when read as a
// string (it used to come back as raw bytes: `inspect` printed it, exit 0).
TEST(GgufFileStrings, InvalidUtf8IsAnErrorNamingTheKey) {
  qloom::test::TempDir dir("gguf-utf8");
  GgufBuilder b;
  b.kv_string("general.architecture", "lla\xffma");
  b.kv_string("general.name", "caf\xC3");  // cut mid-character
  b.kv_string("general.ok", "caf\xC3\xA9");
  const GgufFile f = GgufFile::open(dir.write("m.gguf", b.build()));
  for (const char* key : {"general.architecture", "general.name"}) {
    const Error e = catch_error([&] { f.get_string_opt(key); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_EQ(e.item(), key);
    EXPECT_NE(e.message().find("not valid UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.get_string("general.ok"), "caf\xC3\xA9");
}

TEST_F(GgufFileTest, TensorBytesAreTheDataSection) {
  const GgufFile& f = *file_;
  const GgufTensorInfo* b = f.find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  const auto bytes = f.tensor_bytes(*b);
  ASSERT_EQ(bytes.size(), 12u);
  // The builder fills tensor i's data with (j * 13 + i) & 0xFF.
  for (size_t j = 0; j < bytes.size(); ++j)
    EXPECT_EQ(static_cast<uint8_t>(bytes[j]), static_cast<uint8_t>(j * 13 + 1)) << j;
  EXPECT_EQ(bytes.data(), f.mapped().bytes().data() + f.header().data_offset + b->offset);
  const GgufTensorInfo foreign = *b;
  EXPECT_EQ(catch_error([&] { f.tensor_bytes(foreign); }).kind(), ErrorKind::kInternal);

  GgufFile moved = std::move(*file_);
  EXPECT_EQ(moved.tensors().size(), 3u);
  EXPECT_EQ(moved.path(), path_);
}

TEST(GgufFileOpen, ErrorsNameThePath) {
  qloom::test::TempDir dir("gguf");
  const Error missing = catch_error([&] { GgufFile::open(dir / "none.gguf"); });
  EXPECT_EQ(missing.kind(), ErrorKind::kNotFound);
  GgufBuilder b;
  b.version = 1;
  const fs::path p = dir.write("v1.gguf", b.build());
  const Error v1 = catch_error([&] { GgufFile::open(p); });
  EXPECT_EQ(v1.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(v1.file(), p.string());
}

TEST(GgmlTypes, TableIsConsistent) {
  for (uint32_t t = 0; t < 64; ++t) {
    const GgmlTypeInfo* info = ggml_type_info(t);
    if (info == nullptr) continue;
    EXPECT_EQ(static_cast<uint32_t>(info->type), t);
    EXPECT_GT(info->block_elems, 0u);
    EXPECT_GT(info->block_bytes, 0u);
    EXPECT_EQ(&ggml_type_info(info->type), info);
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u})
    EXPECT_EQ(ggml_type_info(removed), nullptr) << removed;
  EXPECT_EQ(ggml_type_info(GgmlType::kQ6_K).name, "Q6_K");
  EXPECT_EQ(gguf_value_type_name(VT::kF64), "float64");
}

}  // namespace

namespace {

// An empty tensor in a file that ends before its data section: no bytes, no
// out-of-range view.
TEST(GgufFileOpen, EmptyTensorPastTheEnd) {
  GgufBuilder b;
  b.tensor("e", {0, 32}, GgmlType::kQ4_0);
  std::vector<uint8_t> raw = b.build();
  raw.resize(24 + 8 + 1 + 4 + 16 + 4 + 8);  // up to the end of the tensor info
  qloom::test::TempDir dir("gguf");
  const GgufFile f = GgufFile::open(dir.write("e.gguf", raw));
  EXPECT_GT(f.header().data_offset, raw.size());
  EXPECT_EQ(f.header().data_size, 0u);
  EXPECT_TRUE(f.tensor_bytes(f.tensors()[0]).empty());
}

}  // namespace
