// Tests for SafetensorsWriter and write_safetensors_file: round trips for every
// dtype, exact header bytes, HF sharding and index, and misuse errors.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/io/weight_index.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using qloom::DType;
using qloom::Error;
using qloom::ErrorKind;
using namespace qloom::io;
using qloom::test::read_file;
using qloom::test::catch_error;
using qloom::test::TempDir;

std::vector<std::byte> pattern(size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = std::byte(x >> 24);
  }
  return v;
}

std::vector<DType> safetensors_dtypes() {
  std::vector<DType> out;
  for (int i = 0; i < qloom::kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    if (!qloom::dtype_info(t).safetensors_name.empty()) out.push_back(t);
  }
  return out;
}

void expect_same_bytes(std::span<const std::byte> a, const std::vector<std::byte>& b,
                       const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (!b.empty()) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), b.size()), 0) << what;
  }
}

// ---------------------------------------------------------------------------

TEST(TensorSpec, Sizes) {
  EXPECT_EQ((TensorSpec{"a", DType::kBF16, {512, 64}}.nbytes()), 65536u);
  EXPECT_EQ((TensorSpec{"s", DType::kF32, {}}.nbytes()), 4u);
  EXPECT_EQ((TensorSpec{"z", DType::kF32, {0, 7}}.nbytes()), 0u);
  EXPECT_EQ((TensorSpec{"f4", DType::kF4_E2M1, {3, 2}}.nbytes()), 3u);
  EXPECT_EQ((TensorSpec{"f6", DType::kF6_E3M2, {4}}.nbytes()), 3u);
  const Error e = catch_error([] { (void)TensorSpec{"odd", DType::kF4_E2M1, {3}}.nbytes(); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "odd");
  const Error o = catch_error(
      [] { (void)TensorSpec{"big", DType::kU8, {1ULL << 32, 1ULL << 32, 2}}.numel(); });
  EXPECT_EQ(o.item(), "big");
}

TEST(SafetensorsWriter, RoundTripEveryDtype) {
  TempDir d("writer");
  std::vector<TensorSpec> specs;
  std::vector<std::vector<std::byte>> data;
  unsigned seed = 1;
  for (DType t : safetensors_dtypes()) {
    const std::string base(qloom::dtype_info(t).safetensors_name);
    specs.push_back({base + ".matrix", t, {2, 8}});  // 16 elements: whole bytes for all
    // A sub-byte scalar is not a whole number of bytes, so not storable.
    if (qloom::dtype_bits(t) % 8 == 0) specs.push_back({base + ".scalar", t, {}});
    specs.push_back({base + ".empty", t, {0, 3}});
  }
  for (const auto& s : specs) data.push_back(pattern(s.nbytes(), seed++));

  SafetensorsWriter w(d.path(), specs);
  for (size_t i = 0; i < specs.size(); ++i) w.write(specs[i].name, data[i]);
  w.finish();
  ASSERT_EQ(w.files(), (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(w.num_shards(), 1u);

  const SafetensorsFile f = SafetensorsFile::open(d / "model.safetensors");
  ASSERT_EQ(f.tensors().size(), specs.size());
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorView v = f.view(specs[i].name);
    EXPECT_EQ(v.dtype(), specs[i].dtype) << specs[i].name;
    EXPECT_EQ(v.shape(), specs[i].shape) << specs[i].name;
    expect_same_bytes(v.data, data[i], specs[i].name);
  }
  // Data offsets follow write order.
  uint64_t off = 0;
  for (const auto& s : specs) {
    const TensorInfo* t = f.find(s.name);
    EXPECT_EQ(t->data_begin, off) << s.name;
    off = t->data_end;
  }
}

TEST(SafetensorsWriter, ExactHeaderBytes) {
  TempDir d("writer");
  const auto b = pattern(4, 1);
  const auto a = pattern(2, 2);
  SafetensorsWriter w(d.path(), {{"b", DType::kF32, {}}, {"a", DType::kBF16, {1}}});
  w.write("b", b);
  w.write("a", a);
  w.finish();
  const std::string raw = read_file(d / "model.safetensors");
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("a":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}})";
  std::string padded = json;
  while (padded.size() % 8) padded += ' ';
  ASSERT_GE(raw.size(), 8u + padded.size());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(raw[i])) << (8 * i);
  EXPECT_EQ(n, padded.size());
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw.substr(8, n), padded);
  EXPECT_EQ(raw.size(), 8 + n + 6);
  EXPECT_EQ(std::memcmp(raw.data() + 8 + n, b.data(), 4), 0);
  EXPECT_EQ(std::memcmp(raw.data() + 8 + n + 4, a.data(), 2), 0);
}

TEST(SafetensorsWriter, HeaderAlwaysPaddedToEight) {
  TempDir d("writer");
  for (size_t len = 1; len <= 9; ++len) {
    const fs::path p = d / std::string("f").append(std::to_string(len)).append(".safetensors");
    const auto bytes = pattern(1, 3);
    write_safetensors_file(p, {{TensorSpec{std::string(len, 'x'), DType::kU8, {1}}, bytes}});
    const SafetensorsFile f = SafetensorsFile::open(p);
    EXPECT_EQ(f.header_len() % 8, 0u) << len;
    EXPECT_EQ(f.data_offset() % 8, 0u) << len;
  }
}

TEST(SafetensorsWriter, NoMetadataMeansNoMetadataEntry) {
  TempDir d("writer");
  WriterOptions o;
  o.metadata.clear();
  SafetensorsWriter w(d.path(), {{"t", DType::kU8, {2}}}, o);
  w.write("t", pattern(2, 1));
  w.finish();
  const std::string raw = read_file(d / "model.safetensors");
  EXPECT_EQ(raw.substr(8, 5), R"({"t":)");
  EXPECT_TRUE(SafetensorsFile::open(d / "model.safetensors").metadata().empty());
}

TEST(SafetensorsWriter, PlainFileHelperRoundTrip) {
  TempDir d("writer");
  const auto x = pattern(12, 9);
  const fs::path p = d / "one.safetensors";
  write_safetensors_file(p, {{TensorSpec{"x", DType::kI32, {3}}, x}}, {{"k", "v"}});
  const SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.metadata().at("k"), "v");
  expect_same_bytes(f.view("x").data, x, "x");

  const Error e = catch_error([&] {
    write_safetensors_file(p, {{TensorSpec{"x", DType::kI32, {4}}, x}});
  });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "x");
}

TEST(SafetensorsWriter, NoTensorsGivesAHeaderOnlyFile) {
  TempDir d("writer");
  SafetensorsWriter w(d.path(), {});
  w.finish();
  const SafetensorsFile f = SafetensorsFile::open(d / "model.safetensors");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(SafetensorsWriter, UnicodeNamesRoundTripAndIndexEscapesThem) {
  TempDir d("writer");
  WriterOptions o;
  o.max_shard_bytes = 1;
  const std::string name = "caf\xc3\xa9.weight";
  SafetensorsWriter w(d.path(), {{name, DType::kU8, {2}}, {"z", DType::kU8, {2}}}, o);
  w.write(name, pattern(2, 1));
  w.write("z", pattern(2, 2));
  w.finish();
  EXPECT_NE(read_file(d / "model.safetensors.index.json").find("caf\\u00e9.weight"),
            std::string::npos);
  const WeightIndex idx = WeightIndex::open(d.path());
  EXPECT_NE(idx.find(name), nullptr);
}

// ---------------------------------------------------------------------------
// Sharding

TEST(SafetensorsWriter, ShardsLikeTransformers) {
  TempDir d("writer");
  WriterOptions o;
  o.max_shard_bytes = 100;
  // 60 | 60+30 | 200 (alone, over the limit) | 10+0+90 (exactly at the limit) | 1
  const std::vector<TensorSpec> specs = {
      {"a", DType::kU8, {60}},  {"b", DType::kU8, {60}},    {"c", DType::kU8, {30}},
      {"big", DType::kU8, {200}}, {"d", DType::kU8, {10}},  {"e0", DType::kU8, {0}},
      {"f", DType::kU8, {90}},  {"g", DType::kU8, {1}}};
  SafetensorsWriter w(d.path(), specs, o);
  ASSERT_EQ(w.num_shards(), 5u);
  const std::vector<size_t> expect_shard = {0, 1, 1, 2, 3, 3, 3, 4};
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(w.shard_of_spec(i), expect_shard[i]) << i;
  EXPECT_EQ(w.total_bytes(), 451u);
  const std::vector<std::string> shards = {
      "model-00001-of-00005.safetensors", "model-00002-of-00005.safetensors",
      "model-00003-of-00005.safetensors", "model-00004-of-00005.safetensors",
      "model-00005-of-00005.safetensors"};
  EXPECT_EQ(w.shard_files(), shards);
  std::vector<std::string> all = shards;
  all.push_back("model.safetensors.index.json");
  EXPECT_EQ(w.files(), all);

  std::vector<std::vector<std::byte>> data;
  for (size_t i = 0; i < specs.size(); ++i) {
    data.push_back(pattern(specs[i].nbytes(), unsigned(i)));
    w.write(specs[i].name, data[i]);
  }
  w.finish();

  // Index text: sorted keys, 2-space indent, trailing newline.
  std::string expect_index =
      "{\n  \"metadata\": {\n    \"total_size\": 451\n  },\n  \"weight_map\": {\n";
  const std::vector<std::pair<std::string, size_t>> sorted = {
      {"a", 0}, {"b", 1}, {"big", 2}, {"c", 1}, {"d", 3}, {"e0", 3}, {"f", 3}, {"g", 4}};
  for (size_t i = 0; i < sorted.size(); ++i)
    expect_index += "    \"" + sorted[i].first + "\": \"" + shards[sorted[i].second] + "\"" +
                    (i + 1 < sorted.size() ? ",\n" : "\n");
  expect_index += "  }\n}\n";
  EXPECT_EQ(read_file(d / "model.safetensors.index.json"), expect_index);

  // Each shard is a valid file holding its tensors at offsets from 0.
  const SafetensorsFile s2 = SafetensorsFile::open(d / shards[1]);
  ASSERT_EQ(s2.tensors().size(), 2u);
  EXPECT_EQ(s2.find("b")->data_begin, 0u);
  EXPECT_EQ(s2.find("c")->data_begin, 60u);
  EXPECT_EQ(s2.metadata().at("format"), "pt");

  const WeightIndex idx = WeightIndex::open(d.path());
  EXPECT_TRUE(idx.is_sharded());
  EXPECT_EQ(idx.shard_files(), shards);
  EXPECT_EQ(idx.total_bytes(), 451u);
  EXPECT_EQ(idx.index_metadata().at("total_size"), 451);
  for (size_t i = 0; i < specs.size(); ++i) {
    expect_same_bytes(idx.view(specs[i].name).data, data[i], specs[i].name);
    EXPECT_EQ(idx.shard_of(specs[i].name), expect_shard[i]);
  }
}

TEST(SafetensorsWriter, BaseNameAndManyShards) {
  TempDir d("writer");
  WriterOptions o;
  o.max_shard_bytes = 0;  // every tensor alone
  o.base_name = "weights";
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 12; ++i)
    specs.push_back({std::string("t").append(std::to_string(i)), DType::kU8, {1}});
  SafetensorsWriter w(d.path(), specs, o);
  for (const auto& s : specs) w.write(s.name, pattern(1, 0));
  w.finish();
  EXPECT_EQ(w.shard_files().front(), "weights-00001-of-00012.safetensors");
  EXPECT_EQ(w.shard_files().back(), "weights-00012-of-00012.safetensors");
  EXPECT_EQ(w.files().back(), "weights.safetensors.index.json");
  for (const auto& f : w.files()) EXPECT_TRUE(fs::exists(d / f)) << f;
}

// ---------------------------------------------------------------------------
// Streaming

TEST(SafetensorsWriter, StreamingChunksAcrossTheBuffer) {
  TempDir d("writer");
  // 20 MiB + 3 bytes, sent in 3 MiB + 1 chunks, so buffered and direct
  // writes both happen and buffer boundaries fall mid-chunk.
  const size_t big = (20u << 20) + 3;
  const auto data = pattern(big, 42);
  const auto small = pattern(5, 7);
  SafetensorsWriter w(d.path(), {{"small", DType::kU8, {5}}, {"big", DType::kU8, {big}},
                                 {"tail", DType::kU8, {5}}});
  w.write("small", small);
  w.begin("big");
  const size_t chunk = (3u << 20) + 1;
  for (size_t off = 0; off < big; off += chunk)
    w.append(std::span(data).subspan(off, std::min(chunk, big - off)));
  w.end();
  // Direct (large) write after buffered bytes.
  w.begin("tail");
  w.append(std::span(small).first(2));
  w.append(std::span(small).subspan(2));
  w.end();
  w.finish();
  const SafetensorsFile f = SafetensorsFile::open(d / "model.safetensors");
  expect_same_bytes(f.view("small").data, small, "small");
  expect_same_bytes(f.view("big").data, data, "big");
  expect_same_bytes(f.view("tail").data, small, "tail");
}

TEST(SafetensorsWriter, BigSingleWrite) {
  TempDir d("writer");
  const auto data = pattern(9u << 20, 5);  // above the direct-write threshold
  SafetensorsWriter w(d.path(), {{"h", DType::kU8, {3}}, {"x", DType::kBF16, {data.size() / 2}}});
  const auto h = pattern(3, 1);
  w.write("h", h);
  w.write("x", data);
  w.finish();
  const SafetensorsFile f = SafetensorsFile::open(d / "model.safetensors");
  expect_same_bytes(f.view("h").data, h, "h");
  expect_same_bytes(f.view("x").data, data, "x");
}

// ---------------------------------------------------------------------------
// Misuse

TEST(SafetensorsWriter, ConstructionErrors) {
  TempDir d("writer");
  Error e = catch_error([&] {
    SafetensorsWriter w(d.path(), {{"a", DType::kU8, {1}}, {"a", DType::kU8, {2}}});
  });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "a");
  EXPECT_NE(e.message().find("twice"), std::string::npos);

  e = catch_error([&] { SafetensorsWriter w(d.path(), {{"odd", DType::kF4_E2M1, {3}}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "odd");

  e = catch_error([&] { SafetensorsWriter w(d.path(), {{"q", DType::kI4, {2}}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "q");

  e = catch_error([&] { SafetensorsWriter w(d.path(), {{"", DType::kU8, {1}}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);

  e = catch_error([&] { SafetensorsWriter w(d.path(), {{"__metadata__", DType::kU8, {1}}}); });
  EXPECT_EQ(e.item(), "__metadata__");

  e = catch_error([&] { SafetensorsWriter w(d.path(), {{"bad\xff", DType::kU8, {1}}}); });
  EXPECT_NE(e.message().find("UTF-8"), std::string::npos);

  WriterOptions o;
  o.metadata["k"] = "\xc3";
  e = catch_error([&] { SafetensorsWriter w(d.path(), {}, o); });
  EXPECT_EQ(e.item(), "__metadata__");

  // Nothing was created by the failed constructions.
  EXPECT_TRUE(fs::is_empty(d.path()));
}

TEST(SafetensorsWriter, WriteOrderAndSizeErrors) {
  TempDir d("writer");
  SafetensorsWriter w(d.path(), {{"a", DType::kU8, {4}}, {"b", DType::kU8, {4}}});
  const auto four = pattern(4, 1);

  Error e = catch_error([&] { w.write("b", four); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), "b");
  EXPECT_NE(e.message().find("expected \"a\" next"), std::string::npos) << e.what();

  e = catch_error([&] { w.write("a", std::span(four).first(3)); });
  EXPECT_EQ(e.item(), "a");
  EXPECT_NE(e.message().find("expected 4"), std::string::npos) << e.what();

  e = catch_error([&] { w.write("zzz", four); });
  EXPECT_EQ(e.item(), "zzz");

  e = catch_error([&] { w.append(four); });  // no begin
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  e = catch_error([&] { w.end(); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);

  w.begin("a");
  e = catch_error([&] { w.begin("b"); });  // still open
  EXPECT_EQ(e.item(), "a");
  w.append(std::span(four).first(3));
  e = catch_error([&] { w.append(std::span(four).first(2)); });  // 5 > 4
  EXPECT_EQ(e.item(), "a");
  EXPECT_NE(e.message().find("more than the 4"), std::string::npos) << e.what();
  e = catch_error([&] { w.end(); });  // 3 < 4
  EXPECT_NE(e.message().find("received 3 bytes, expected 4"), std::string::npos) << e.what();
  e = catch_error([&] { w.finish(); });  // tensor open
  EXPECT_EQ(e.item(), "a");
  w.append(std::span(four).subspan(3));
  w.end();

  EXPECT_EQ(w.next_tensor(), "b");
  e = catch_error([&] { w.finish(); });
  EXPECT_EQ(e.item(), "b");
  EXPECT_NE(e.message().find("finish() before this tensor"), std::string::npos);

  w.write("b", four);
  e = catch_error([&] { w.write("c", four); });
  EXPECT_NE(e.message().find("already written"), std::string::npos);
  w.finish();
  e = catch_error([&] { w.finish(); });
  EXPECT_NE(e.message().find("after finish()"), std::string::npos);

  const SafetensorsFile f = SafetensorsFile::open(d / "model.safetensors");
  expect_same_bytes(f.view("a").data, four, "a");
}

TEST(SafetensorsWriter, MissingDirectoryIsAnIoError) {
  TempDir d("writer");
  SafetensorsWriter w(d / "no" / "such" / "dir", {{"a", DType::kU8, {1}}});
  const Error e = catch_error([&] { w.write("a", pattern(1, 0)); });
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_NE(e.file().find("model.safetensors"), std::string::npos);
  // The writer refuses further use after an I/O failure.
  const Error e2 = catch_error([&] { w.finish(); });
  EXPECT_EQ(e2.kind(), ErrorKind::kUsage);
}

TEST(SafetensorsWriter, DestroyWithoutFinishClosesQuietly) {
  TempDir d("writer");
  {
    SafetensorsWriter w(d.path(), {{"a", DType::kU8, {4}}, {"b", DType::kU8, {4}}});
    w.write("a", pattern(4, 1));
  }  // no finish(): must not throw or crash
  EXPECT_TRUE(fs::exists(d / "model.safetensors"));
  SafetensorsWriter moved_from(d.path(), {});
  SafetensorsWriter moved = std::move(moved_from);
  moved.finish();
}

}  // namespace
