// Tests for the safetensors header parser and SafetensorsFile: the bundled demo
// model, and one hand-crafted file per validation rule.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/mapped_file.h"
#include "qloom/io/safetensors_reader.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::DType;
using qloom::Error;
using qloom::ErrorKind;
using namespace qloom::io;
using qloom::test::catch_error;

const fs::path kDemo = fs::path(QLOOM_DEMO_MODEL_DIR) / "model.safetensors";
const std::string kLabel = "crafted.safetensors";

// 8-byte little-endian length, the header text, then `data_len` data bytes.
std::vector<uint8_t> st_bytes(std::string_view header, size_t data_len,
                              std::optional<uint64_t> len_field = std::nullopt) {
  const uint64_t n = len_field.value_or(header.size());
  std::vector<uint8_t> out(8 + header.size() + data_len);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  for (size_t i = 0; i < header.size(); ++i) out[8 + i] = static_cast<uint8_t>(header[i]);
  for (size_t i = 0; i < data_len; ++i)
    out[8 + header.size() + i] = static_cast<uint8_t>(i * 7 + 1);
  return out;
}

SafetensorsHeader parse(const std::vector<uint8_t>& bytes) {
  return parse_safetensors_header(std::as_bytes(std::span(bytes)), kLabel);
}

// Asserts kind, that the error names the file and `item`, that the message
// holds `needle`, and that there is a remedy.
void expect_bad(const std::vector<uint8_t>& bytes, ErrorKind kind, const std::string& item,
                const std::string& needle) {
  const Error e = catch_error([&] { parse(bytes); });
  EXPECT_EQ(e.kind(), kind) << e.what();
  EXPECT_EQ(e.file(), kLabel) << e.what();
  EXPECT_EQ(e.item(), item) << e.what();
  EXPECT_NE(e.message().find(needle), std::string::npos)
      << "message lacks \"" << needle << "\": " << e.what();
  EXPECT_FALSE(e.remedy().empty()) << e.what();
  EXPECT_NE(std::string(e.what()).find(kLabel), std::string::npos) << e.what();
}

const char* kOneTensor = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";

// ---------------------------------------------------------------------------
// The bundled demo model

TEST(SafetensorsReader, DemoModelHeader) {
  const SafetensorsFile f = SafetensorsFile::open(kDemo);
  EXPECT_EQ(f.tensors().size(), 47u);
  EXPECT_EQ(f.header_len(), 4888u);
  EXPECT_EQ(f.file_size(), 524960u);
  EXPECT_EQ(f.data_offset(), 8u + 4888u);
  EXPECT_EQ(f.path(), kDemo);
  ASSERT_EQ(f.metadata().size(), 1u);
  EXPECT_EQ(f.metadata().at("format"), "pt");

  uint64_t expected = 0;
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.dtype, DType::kBF16) << t.name;
    EXPECT_EQ(t.data_begin, expected) << t.name;  // file order, contiguous
    EXPECT_EQ(t.nbytes(), t.numel() * 2) << t.name;
    expected = t.data_end;
  }
  EXPECT_EQ(expected, f.file_size() - f.data_offset());

  const TensorInfo* emb = f.find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<uint64_t>{512, 64}));
  EXPECT_EQ(emb->numel(), 512u * 64u);
  EXPECT_EQ(emb->nbytes(), 65536u);
  const TensorInfo* down = f.find("model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<uint64_t>{64, 172}));
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);  // tied embeddings
  EXPECT_FALSE(f.contains("nope"));
}

TEST(SafetensorsReader, DemoModelViewsPointIntoTheFile) {
  const SafetensorsFile f = SafetensorsFile::open(kDemo);
  const std::string raw = qloom::test::read_file(kDemo);
  ASSERT_EQ(raw.size(), f.file_size());
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight",
                           "model.layers.4.self_attn.v_proj.weight"}) {
    const TensorView v = f.view(name);
    EXPECT_EQ(v.name(), name);
    EXPECT_EQ(v.dtype(), DType::kBF16);
    EXPECT_EQ(v.nbytes(), v.info->nbytes());
    EXPECT_EQ(v.numel() * 2, v.data.size());
    const size_t off = f.data_offset() + v.info->data_begin;
    EXPECT_EQ(std::memcmp(raw.data() + off, v.data.data(), v.data.size()), 0) << name;
    // Same memory as the map: nothing copied.
    EXPECT_EQ(v.data.data(), f.mapped().bytes().data() + off);
  }
  // norm weights of a trained tiny llama are not all zero
  const TensorView norm = f.view("model.norm.weight");
  bool nonzero = false;
  for (std::byte b : norm.data) nonzero = nonzero || b != std::byte{0};
  EXPECT_TRUE(nonzero);
}

TEST(SafetensorsReader, ViewOfUnknownTensorIsNotFound) {
  const SafetensorsFile f = SafetensorsFile::open(kDemo);
  const Error e = catch_error([&] { f.view("model.layers.9.mlp.up_proj.weight"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.item(), "model.layers.9.mlp.up_proj.weight");
  EXPECT_EQ(e.file(), kDemo.string());
}

TEST(SafetensorsReader, MovedFileKeepsViewsValid) {
  SafetensorsFile a = SafetensorsFile::open(kDemo);
  const TensorInfo* info = a.find("model.norm.weight");
  const auto* data = a.view(*info).data.data();
  SafetensorsFile b = std::move(a);
  EXPECT_EQ(b.find("model.norm.weight"), info);
  EXPECT_EQ(b.view(*info).data.data(), data);
}

TEST(SafetensorsReader, OpenErrors) {
  qloom::test::TempDir d("reader");
  Error e = catch_error([&] { SafetensorsFile::open(d / "missing.safetensors"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), (d / "missing.safetensors").string());

  e = catch_error([&] { SafetensorsFile::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("directory"), std::string::npos);

  const fs::path empty = d.write("empty.safetensors", "");
  e = catch_error([&] { SafetensorsFile::open(empty); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), empty.string());
  EXPECT_NE(e.message().find("too short"), std::string::npos);
}

TEST(MappedFile, EmptyAndRegularFiles) {
  qloom::test::TempDir d("mmap");
  const MappedFile empty = MappedFile::open(d.write("empty", ""));
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_TRUE(empty.bytes().empty());
  empty.advise(MappedFile::Access::kSequential);  // no-ops, must not crash
  empty.prefetch(0, 100);

  MappedFile m = MappedFile::open(d.write("abc", "hello"));
  EXPECT_EQ(m.size(), 5u);
  EXPECT_EQ(std::memcmp(m.bytes().data(), "hello", 5), 0);
  m.advise(MappedFile::Access::kRandom);
  m.prefetch(3, 1000);
  MappedFile moved = std::move(m);
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_EQ(m.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.path(), d / "abc");
}

// ---------------------------------------------------------------------------
// Valid corner cases

TEST(SafetensorsHeaderParse, MinimalValidFile) {
  const auto h = parse(st_bytes(kOneTensor, 16));
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].name, "w");
  EXPECT_EQ(h.tensors[0].dtype, DType::kF32);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(h.data_size, 16u);
  EXPECT_TRUE(h.metadata.empty());
}

TEST(SafetensorsHeaderParse, EmptyObjectNoTensors) {
  const auto h = parse(st_bytes("{}", 0));
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_EQ(h.data_size, 0u);
}

TEST(SafetensorsHeaderParse, TrailingSpacePaddingAccepted) {
  const auto h = parse(st_bytes(std::string(kOneTensor) + "       ", 16));
  EXPECT_EQ(h.tensors.size(), 1u);
}

TEST(SafetensorsHeaderParse, ScalarsZeroSizedAndSubByteTensors) {
  const auto h = parse(st_bytes(
      R"({"__metadata__":{"format":"pt","x":""},)"
      R"("s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
      R"("z":{"dtype":"BF16","shape":[0,5],"data_offsets":[8,8]},)"
      R"("z2":{"dtype":"I32","shape":[3,0],"data_offsets":[8,8]},)"
      R"("f4":{"dtype":"F4","shape":[3,2],"data_offsets":[8,11]},)"
      R"("f6":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[11,14]},)"
      R"("e":{"dtype":"F8_E8M0","shape":[2],"data_offsets":[14,16]}})",
      16));
  ASSERT_EQ(h.tensors.size(), 6u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.metadata.at("x"), "");
  EXPECT_EQ(h.tensors[0].name, "s");
  EXPECT_EQ(h.tensors[0].numel(), 1u);
  EXPECT_EQ(h.tensors[0].shape.size(), 0u);
  // Sorted by offset; zero-sized tensors at the same offset sort by name.
  EXPECT_EQ(h.tensors[1].name, "z");
  EXPECT_EQ(h.tensors[2].name, "z2");
  EXPECT_EQ(h.tensors[1].numel(), 0u);
  EXPECT_EQ(h.tensors[3].name, "f4");
  EXPECT_EQ(h.tensors[3].dtype, DType::kF4_E2M1);
  EXPECT_EQ(h.tensors[4].dtype, DType::kF6_E2M3);
  EXPECT_EQ(h.tensors[5].dtype, DType::kE8M0);
}

TEST(SafetensorsHeaderParse, EveryKnownDtypeName) {
  for (const char* dt : {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I8", "U8",
                         "I16", "U16", "I32", "U32", "I64", "U64", "BOOL"}) {
    const std::string h = std::string(R"({"t":{"dtype":")") + dt +
                          R"(","shape":[8],"data_offsets":[0,)" +
                          std::to_string(8 * qloom::dtype_bits(*qloom::dtype_from_safetensors(dt)) / 8) +
                          "]}}";
    EXPECT_NO_THROW(parse(st_bytes(h, 8 * qloom::dtype_bits(*qloom::dtype_from_safetensors(dt)) / 8)))
        << dt;
  }
}

TEST(SafetensorsHeaderParse, TensorsReturnedInDataOrder) {
  const auto h = parse(st_bytes(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                                R"("a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},)"
                                R"("c":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
                                6));
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "c");
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.tensors[2].name, "a");
}

// ---------------------------------------------------------------------------
// The length prefix

TEST(SafetensorsHeaderParse, FileShorterThanEightBytes) {
  for (size_t n : {0, 1, 7}) {
    std::vector<uint8_t> b(n, 0);
    expect_bad(b, ErrorKind::kInvalidInput, "header length", "too short");
  }
}

TEST(SafetensorsHeaderParse, HeaderLengthBeyondFile) {
  expect_bad(st_bytes(kOneTensor, 16, 1000), ErrorKind::kInvalidInput, "header length",
             "claims 1000 bytes but only " + std::to_string(std::strlen(kOneTensor) + 16) +
                 " bytes follow");
  // Exactly at the limit but beyond the file.
  expect_bad(st_bytes("{}", 0, 100'000'000), ErrorKind::kInvalidInput, "header length",
             "truncated");
}

TEST(SafetensorsHeaderParse, HeaderLengthOverLimit) {
  expect_bad(st_bytes("{}", 0, 100'000'001), ErrorKind::kInvalidInput, "header length",
             "100000000-byte limit");
  // A length whose 8 + N would overflow 64 bits.
  expect_bad(st_bytes("{}", 0, UINT64_MAX), ErrorKind::kInvalidInput, "header length", "limit");
  expect_bad(st_bytes("{}", 0, UINT64_MAX - 7), ErrorKind::kInvalidInput, "header length",
             "limit");
}

TEST(SafetensorsHeaderParse, EmptyHeader) {
  expect_bad(st_bytes("", 0), ErrorKind::kInvalidInput, "header", "empty");
}

// ---------------------------------------------------------------------------
// The JSON text

TEST(SafetensorsHeaderParse, GarbageJson) {
  expect_bad(st_bytes("{abc", 0), ErrorKind::kInvalidInput, "", "not valid JSON");
  expect_bad(st_bytes(R"({"w":{"dtype":"F32",)", 0), ErrorKind::kInvalidInput, "",
             "not valid JSON");
  expect_bad(st_bytes(std::string(kOneTensor) + " x", 16), ErrorKind::kInvalidInput, "",
             "not valid JSON");
  // NUL padding is not whitespace.
  expect_bad(st_bytes(std::string(kOneTensor) + std::string(3, '\0'), 16),
             ErrorKind::kInvalidInput, "", "not valid JSON");
  // nlohmann alone would stop at a NUL and ignore what follows.
  expect_bad(st_bytes(std::string("{}\0junk", 7), 0), ErrorKind::kInvalidInput, "",
             "NUL byte at offset 2");
  // Comments are not JSON.
  expect_bad(st_bytes("{/*c*/}", 0), ErrorKind::kInvalidInput, "", "not valid JSON");
}

TEST(SafetensorsHeaderParse, JsonErrorNamesBytePosition) {
  const Error e = catch_error([&] { parse(st_bytes(R"({"a":tru})", 0)); });
  EXPECT_NE(e.message().find("byte"), std::string::npos) << e.what();
  EXPECT_EQ(e.message().find("[json.exception"), std::string::npos) << e.what();
}

TEST(SafetensorsHeaderParse, NonObjectJson) {
  expect_bad(st_bytes("[1,2,3]", 0), ErrorKind::kInvalidInput, "header", "'{'");
  expect_bad(st_bytes("\"str\"", 0), ErrorKind::kInvalidInput, "header", "'{'");
  expect_bad(st_bytes(" {}", 0), ErrorKind::kInvalidInput, "header", "'{'");
}

TEST(SafetensorsHeaderParse, InvalidUtf8) {
  expect_bad(st_bytes("{\"w\xff\":{}}", 0), ErrorKind::kInvalidInput, "header", "UTF-8");
  // Overlong encoding of '/', a surrogate, and a truncated sequence.
  expect_bad(st_bytes("{\"\xc0\xaf\":1}", 0), ErrorKind::kInvalidInput, "header", "UTF-8");
  expect_bad(st_bytes("{\"\xed\xa0\x80\":1}", 0), ErrorKind::kInvalidInput, "header", "UTF-8");
  expect_bad(st_bytes("{\"\xe2\x82", 0), ErrorKind::kInvalidInput, "header", "UTF-8");
  // Valid multi-byte names are fine.
  EXPECT_NO_THROW(parse(st_bytes("{\"caf\xc3\xa9 \xf0\x9f\x98\x80\":"
                                 R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                 1)));
}

TEST(SafetensorsHeaderParse, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "{\"w\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_bad(st_bytes(deep, 0), ErrorKind::kInvalidInput, "w", "nested");
}

TEST(SafetensorsHeaderParse, DuplicateTensorNames) {
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                      R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                      2),
             ErrorKind::kInvalidInput, "w", "twice");
}

TEST(SafetensorsHeaderParse, DuplicateFieldInEntry) {
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "twice");
}

TEST(SafetensorsHeaderParse, DuplicateMetadataKey) {
  expect_bad(st_bytes(R"({"__metadata__":{"a":"1","a":"2"}})", 0), ErrorKind::kInvalidInput,
             "__metadata__", "twice");
}

// ---------------------------------------------------------------------------
// Entries

TEST(SafetensorsHeaderParse, UnknownDtype) {
  expect_bad(st_bytes(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1),
             ErrorKind::kUnsupported, "w", "unknown dtype \"Q7\"");
  // qloom-internal dtypes have no safetensors name and are not accepted.
  expect_bad(st_bytes(R"({"w":{"dtype":"i4","shape":[2],"data_offsets":[0,1]}})", 1),
             ErrorKind::kUnsupported, "w", "unknown dtype");
  expect_bad(st_bytes(R"({"w":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}})", 2),
             ErrorKind::kUnsupported, "w", "unknown dtype");
}

TEST(SafetensorsHeaderParse, EntryShape) {
  expect_bad(st_bytes(R"({"w":[1,2]})", 0), ErrorKind::kInvalidInput, "w", "must be an object");
  expect_bad(st_bytes(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "\"dtype\"");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "\"shape\"");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1]}})", 1), ErrorKind::kInvalidInput, "w",
             "\"data_offsets\"");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})", 1),
             ErrorKind::kInvalidInput, "w", "unknown field \"extra\"");
  expect_bad(st_bytes(R"({"w":{"dtype":5,"shape":[1],"data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "\"dtype\" must be a string");
}

TEST(SafetensorsHeaderParse, BadShapeValues) {
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":{},"data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "\"shape\" must be an array");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "shape[0] is the negative integer -1");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", 1),
             ErrorKind::kInvalidInput, "w", "shape[0]");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1,"2"],"data_offsets":[0,2]}})", 2),
             ErrorKind::kInvalidInput, "w", "shape[1] is a string");
  // 2^64 does not fit.
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})",
                      1),
             ErrorKind::kInvalidInput, "w", "shape[0]");
}

TEST(SafetensorsHeaderParse, OverflowingShape) {
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,2],)"
                      R"("data_offsets":[0,1]}})",
                      1),
             ErrorKind::kInvalidInput, "w", "more than 2^64 elements");
  // numel fits but the bit count does not.
  expect_bad(st_bytes(R"({"w":{"dtype":"F64","shape":[2305843009213693952],)"
                      R"("data_offsets":[0,1]}})",
                      1),
             ErrorKind::kInvalidInput, "w", "more than 2^64 bits");
  // A huge product with a zero dimension is an empty tensor, not an overflow.
  EXPECT_NO_THROW(parse(st_bytes(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,0],)"
                                 R"("data_offsets":[0,0]}})",
                                 0)));
}

TEST(SafetensorsHeaderParse, SubByteNotWholeBytes) {
  expect_bad(st_bytes(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2),
             ErrorKind::kInvalidInput, "w", "not a whole number of bytes");
  expect_bad(st_bytes(R"({"w":{"dtype":"F6_E3M2","shape":[3],"data_offsets":[0,2]}})", 2),
             ErrorKind::kInvalidInput, "w", "18 bits");
}

TEST(SafetensorsHeaderParse, BadOffsets) {
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1),
             ErrorKind::kInvalidInput, "w", "exactly two");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1),
             ErrorKind::kInvalidInput, "w", "exactly two");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":"0,1"}})", 1),
             ErrorKind::kInvalidInput, "w", "exactly two");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", 1),
             ErrorKind::kInvalidInput, "w", "data_offsets[0]");
  expect_bad(st_bytes(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}})", 1),
             ErrorKind::kInvalidInput, "w", "end before they begin");
}

TEST(SafetensorsHeaderParse, ShapeOffsetMismatch) {
  expect_bad(st_bytes(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,15]}})", 15),
             ErrorKind::kInvalidInput, "w", "hold 15 bytes but F32 shape [2, 2] needs 16 bytes");
}

TEST(SafetensorsHeaderParse, MetadataMustBeStringToString) {
  expect_bad(st_bytes(R"({"__metadata__":{"format":1}})", 0), ErrorKind::kInvalidInput,
             "__metadata__", "\"format\" is the integer 1, not a string");
  expect_bad(st_bytes(R"({"__metadata__":{"a":{"b":"c"}}})", 0), ErrorKind::kInvalidInput,
             "__metadata__", "not a string");
  expect_bad(st_bytes(R"({"__metadata__":["a"]})", 0), ErrorKind::kInvalidInput, "__metadata__",
             "must be an object");
  expect_bad(st_bytes(R"({"__metadata__":null})", 0), ErrorKind::kInvalidInput, "__metadata__",
             "must be an object");
}

// ---------------------------------------------------------------------------
// Layout of the data area

TEST(SafetensorsHeaderParse, OverlappingTensors) {
  expect_bad(st_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
                      12),
             ErrorKind::kInvalidInput, "b", "overlaps tensor a");
  // Same range twice.
  expect_bad(st_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                      8),
             ErrorKind::kInvalidInput, "b", "overlaps tensor a");
  // An empty tensor inside another one.
  expect_bad(st_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                      R"("e":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
                      8),
             ErrorKind::kInvalidInput, "e", "overlaps tensor a");
}

TEST(SafetensorsHeaderParse, GapBetweenTensors) {
  expect_bad(st_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"U8","shape":[8],"data_offsets":[12,20]}})",
                      20),
             ErrorKind::kInvalidInput, "b", "gap before tensor b");
  // Data not starting at 0.
  expect_bad(st_bytes(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})", 12),
             ErrorKind::kInvalidInput, "a", "gap before tensor a: data-area bytes [0, 4)");
}

TEST(SafetensorsHeaderParse, TruncatedData) {
  const std::string h = kOneTensor;
  const uint64_t full = 8 + h.size() + 16;
  expect_bad(st_bytes(h, 10), ErrorKind::kInvalidInput, "w",
             "file is truncated: expected " + std::to_string(full) + " bytes, found " +
                 std::to_string(full - 6));
  expect_bad(st_bytes(h, 0), ErrorKind::kInvalidInput, "w", "file is truncated");
  // Tensors ending near 2^64: the expected file size does not fit 64 bits.
  // Eight U8 tensors of 2^61 - 1 bytes (the most one tensor can hold: its
  // bit count must fit 64 bits) end at 2^64 - 8.
  std::string huge = "{";
  const uint64_t step = (uint64_t{1} << 61) - 1;
  for (uint64_t i = 0; i < 8; ++i) {
    const uint64_t len = step;
    if (i) huge += ',';
    huge.append("\"t").append(std::to_string(i));
    huge.append(R"(":{"dtype":"U8","shape":[)").append(std::to_string(len));
    huge.append(R"(],"data_offsets":[)").append(std::to_string(i * step));
    huge.append(",").append(std::to_string(i * step + len)).append("]}");
  }
  huge += "}";
  expect_bad(st_bytes(huge, 4), ErrorKind::kInvalidInput, "t0", "expected more than 2^64 bytes");
}

TEST(SafetensorsHeaderParse, TrailingBytes) {
  expect_bad(st_bytes(kOneTensor, 20), ErrorKind::kInvalidInput, "data", "4 trailing bytes");
  expect_bad(st_bytes("{}", 1), ErrorKind::kInvalidInput, "data", "1 trailing bytes");
}

TEST(SafetensorsHeaderParse, CraftedFileOnDiskNamesThePath) {
  qloom::test::TempDir d("reader");
  const fs::path p = d.write("bad.safetensors", st_bytes(kOneTensor, 10));
  const Error e = catch_error([&] { SafetensorsFile::open(p); });
  EXPECT_EQ(e.file(), p.string());
  EXPECT_EQ(e.item(), "w");
  EXPECT_NE(std::string(e.what()).find("re-download"), std::string::npos) << e.what();
  EXPECT_EQ(e.exit_code(), 2);
}

}  // namespace

namespace {

// The fuzz seeds say what they are in their names: valid_* parse, bad_* fail.
TEST(SafetensorsHeaderParse, FuzzSeedsBehaveAsNamed) {
  const fs::path corpus = fs::path(QLOOM_SOURCE_DIR) / "fuzz" / "corpus";
  ASSERT_TRUE(fs::is_directory(corpus));
  int seen = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    const std::string name = e.path().filename().string();
    const std::string raw = qloom::test::read_file(e.path());
    const std::vector<uint8_t> bytes(raw.begin(), raw.end());
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_NO_THROW(parse(bytes)) << name;
      ++seen;
    } else if (name.rfind("bad_", 0) == 0) {
      EXPECT_THROW(parse(bytes), Error) << name;
      ++seen;
    }
  }
  EXPECT_GE(seen, 10);
}

}  // namespace

namespace {

// Real MoE checkpoints carry 100k+ tensors in one header. Parsing must stay
// linear (a callback-based nlohmann parse rescans the root object after each
// entry: minutes instead of milliseconds at this size).
TEST(SafetensorsHeaderParse, LargeHeaderWithManyTensors) {
  constexpr uint64_t kTensors = 60000;
  std::string h = R"({"__metadata__":{"format":"pt"})";
  h.reserve(kTensors * 110);
  for (uint64_t i = 0; i < kTensors; ++i) {
    h += ",\"model.layers.";
    h += std::to_string(i / 64);
    h += ".mlp.experts.";
    h += std::to_string(i % 64);
    h += R"(.down_proj.weight_scale":{"dtype":"BF16","shape":[2],"data_offsets":[)";
    h += std::to_string(4 * i);
    h += ',';
    h += std::to_string(4 * i + 4);
    h += "]}";
  }
  h += '}';
  const auto start = std::chrono::steady_clock::now();
  const auto header = parse(st_bytes(h, 4 * kTensors));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(header.tensors.size(), kTensors);
  EXPECT_EQ(header.tensors.back().data_end, 4 * kTensors);
  // Generous bound (sanitizer builds included); the quadratic parse took minutes.
  EXPECT_LT(secs, 30.0);
}

}  // namespace
