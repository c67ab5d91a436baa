// Tests for WeightIndex: single-file and sharded models, and every way an
// index and its shards can disagree or point outside the model directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
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
using qloom::test::catch_error;
using qloom::test::TempDir;

// Writes a small safetensors file holding U8 tensors of the given names.
void shard(const fs::path& p, const std::vector<std::string>& names) {
  static const std::vector<std::byte> two(2, std::byte{7});
  std::vector<std::pair<TensorSpec, std::span<const std::byte>>> ts;
  for (const auto& n : names) ts.push_back({TensorSpec{n, DType::kU8, {2}}, two});
  write_safetensors_file(p, ts);
}

void index(const fs::path& dir, const nlohmann::json& weight_map) {
  std::ofstream(dir / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2);
}

// A two-shard model: a,b in shard 1, c in shard 2.
void two_shards(const TempDir& d) {
  shard(d / "model-00001-of-00002.safetensors", {"a", "b"});
  shard(d / "model-00002-of-00002.safetensors", {"c"});
  index(d.path(), {{"a", "model-00001-of-00002.safetensors"},
                   {"b", "model-00001-of-00002.safetensors"},
                   {"c", "model-00002-of-00002.safetensors"}});
}

std::string index_label(const TempDir& d) { return (d / "model.safetensors.index.json").string(); }

// ---------------------------------------------------------------------------

TEST(WeightIndex, DemoModel) {
  const WeightIndex w = WeightIndex::open(QLOOM_DEMO_MODEL_DIR);
  EXPECT_FALSE(w.is_sharded());
  EXPECT_EQ(w.num_shards(), 1u);
  EXPECT_EQ(w.shard_files(), std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(w.num_tensors(), 47u);
  const auto names = w.tensor_names();
  ASSERT_EQ(names.size(), 47u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_EQ(w.total_bytes(), 520064u);
  EXPECT_EQ(w.size_on_disk(), 524960u);
  EXPECT_TRUE(w.index_metadata().is_null());
  const TensorInfo* t = w.find("model.embed_tokens.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<uint64_t>{512, 64}));
  EXPECT_EQ(w.view("model.embed_tokens.weight").data.size(), 65536u);
  EXPECT_EQ(w.shard_of("model.norm.weight"), 0u);
  EXPECT_EQ(w.shard_of("lm_head.weight"), std::nullopt);
  EXPECT_EQ(&w.shard(0).tensors()[0], w.find(w.shard(0).tensors()[0].name));

  const Error e = catch_error([&] { w.view("lm_head.weight"); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.item(), "lm_head.weight");
  EXPECT_EQ(catch_error([&] { w.shard(1); }).kind(), ErrorKind::kUsage);
}

TEST(WeightIndex, ShardedModel) {
  TempDir d("windex");
  two_shards(d);
  WeightIndex w0 = WeightIndex::open(d.path());
  const WeightIndex w = std::move(w0);  // views survive moves
  EXPECT_TRUE(w.is_sharded());
  EXPECT_EQ(w.num_shards(), 2u);
  EXPECT_EQ(w.tensor_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(w.shard_of("c"), 1u);
  EXPECT_EQ(w.total_bytes(), 6u);
  EXPECT_EQ(w.size_on_disk(), fs::file_size(d / "model-00001-of-00002.safetensors") +
                                  fs::file_size(d / "model-00002-of-00002.safetensors"));
  EXPECT_EQ(w.view("c").data.size(), 2u);
  EXPECT_EQ(w.index_metadata().at("total_size"), 0);
}

TEST(WeightIndex, ShardsInSubdirectoryAndInternalSymlinks) {
  TempDir d("windex");
  d.mkdir("weights");
  shard(d / "weights" / "part1.safetensors", {"a"});
  shard(d / "real.safetensors", {"b"});
  fs::create_symlink("real.safetensors", d / "linked.safetensors");
  index(d.path(), {{"a", "weights/part1.safetensors"}, {"b", "./linked.safetensors"}});
  const WeightIndex w = WeightIndex::open(d.path());
  EXPECT_EQ(w.shard_files(),
            (std::vector<std::string>{"./linked.safetensors", "weights/part1.safetensors"}));
  EXPECT_EQ(w.num_tensors(), 2u);
}

TEST(WeightIndex, HuggingFaceCacheSnapshotSymlinksAreAllowed) {
  // <repo>/snapshots/<rev>/model.safetensors -> ../../blobs/<hash>
  TempDir d("windex");
  const fs::path repo = d.mkdir("models--org--tiny");
  d.mkdir("models--org--tiny/blobs");
  const fs::path snap = d.mkdir("models--org--tiny/snapshots/0123abc");
  shard(repo / "blobs" / "deadbeef", {"a"});
  fs::create_symlink("../../blobs/deadbeef", snap / "model.safetensors");
  const WeightIndex w = WeightIndex::open(snap);
  EXPECT_EQ(w.num_tensors(), 1u);
}

TEST(WeightIndex, SingleFileFallbacks) {
  TempDir d("windex");
  shard(d / "weights.safetensors", {"x"});
  EXPECT_EQ(WeightIndex::open(d.path()).shard_files(),
            std::vector<std::string>{"weights.safetensors"});

  shard(d / "other.safetensors", {"y"});
  Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("other.safetensors, weights.safetensors"), std::string::npos)
      << e.what();

  // model.safetensors wins over other files.
  shard(d / "model.safetensors", {"m"});
  EXPECT_EQ(WeightIndex::open(d.path()).tensor_names(), std::vector<std::string>{"m"});
}

TEST(WeightIndex, NoSafetensorsAtAll) {
  TempDir d("windex");
  d.write("config.json", "{}");
  d.write("pytorch_model.bin", "pickle");
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), d.path().string());
  EXPECT_NE(e.message().find("no *.safetensors"), std::string::npos);
  EXPECT_NE(e.message().find("pytorch_model.bin"), std::string::npos);
  EXPECT_NE(e.remedy().find("pickle"), std::string::npos);
}

TEST(WeightIndex, MissingDirectory) {
  TempDir d("windex");
  EXPECT_EQ(catch_error([&] { WeightIndex::open(d / "nope"); }).kind(), ErrorKind::kNotFound);
  EXPECT_EQ(catch_error([&] { WeightIndex::open(d.write("f", "")); }).kind(),
            ErrorKind::kInvalidInput);
}

TEST(WeightIndex, IndexNamesMissingShard) {
  TempDir d("windex");
  shard(d / "model-00001-of-00002.safetensors", {"a"});
  index(d.path(), {{"a", "model-00001-of-00002.safetensors"},
                   {"z", "model-00002-of-00002.safetensors"}});
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.file(), index_label(d));
  EXPECT_EQ(e.item(), "z");
  EXPECT_NE(e.message().find("model-00002-of-00002.safetensors"), std::string::npos);
  EXPECT_NE(e.remedy().find("re-download"), std::string::npos);
}

TEST(WeightIndex, DanglingSymlinkShardIsMissing) {
  TempDir d("windex");
  fs::create_symlink("gone.safetensors", d / "s.safetensors");
  index(d.path(), {{"a", "s.safetensors"}});
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_NE(e.message().find("dangling"), std::string::npos);
}

TEST(WeightIndex, IndexPathEscapes) {
  TempDir d("windex");
  const fs::path model = d.mkdir("model");
  shard(d / "outside.safetensors", {"a"});
  const std::vector<std::string> bads = {"../outside.safetensors",
                                         "sub/../../outside.safetensors",
                                         (d / "outside.safetensors").string()};
  for (const std::string& bad : bads) {
    index(model, {{"a", bad}});
    const Error e = catch_error([&] { WeightIndex::open(model); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << bad;
    EXPECT_EQ(e.item(), "a") << bad;
    EXPECT_EQ(e.file(), (model / "model.safetensors.index.json").string());
    EXPECT_TRUE(e.message().find("\"..\"") != std::string::npos ||
                e.message().find("absolute") != std::string::npos)
        << e.what();
  }
}

TEST(WeightIndex, SymlinkedShardEscapingTheDirectory) {
  TempDir d("windex");
  const fs::path model = d.mkdir("model");
  shard(d / "outside.safetensors", {"a"});
  fs::create_symlink(d / "outside.safetensors", model / "model-00001-of-00001.safetensors");
  index(model, {{"a", "model-00001-of-00001.safetensors"}});
  Error e = catch_error([&] { WeightIndex::open(model); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "a");
  EXPECT_NE(e.message().find("outside the model directory"), std::string::npos) << e.what();

  // Same through a symlinked subdirectory, and for the unsharded case.
  fs::remove(model / "model.safetensors.index.json");
  fs::remove(model / "model-00001-of-00001.safetensors");
  fs::create_symlink(d / "outside.safetensors", model / "model.safetensors");
  e = catch_error([&] { WeightIndex::open(model); });
  EXPECT_NE(e.message().find("outside the model directory"), std::string::npos) << e.what();
  fs::remove(model / "model.safetensors");
  fs::create_symlink(d.path(), model / "up");
  index(model, {{"a", "up/outside.safetensors"}});
  e = catch_error([&] { WeightIndex::open(model); });
  EXPECT_NE(e.message().find("outside the model directory"), std::string::npos) << e.what();
}

TEST(WeightIndex, TensorInIndexButNotInShard) {
  TempDir d("windex");
  two_shards(d);
  index(d.path(), {{"a", "model-00001-of-00002.safetensors"},
                   {"b", "model-00001-of-00002.safetensors"},
                   {"c", "model-00002-of-00002.safetensors"},
                   {"ghost", "model-00002-of-00002.safetensors"}});
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "ghost");
  EXPECT_EQ(e.file(), index_label(d));
  EXPECT_NE(e.message().find("does not contain it"), std::string::npos);
}

TEST(WeightIndex, TensorInShardButNotInIndex) {
  TempDir d("windex");
  two_shards(d);
  index(d.path(), {{"a", "model-00001-of-00002.safetensors"},
                   {"c", "model-00002-of-00002.safetensors"}});
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.item(), "b");
  EXPECT_NE(e.message().find("does not list it"), std::string::npos);
}

TEST(WeightIndex, TensorInTwoShards) {
  TempDir d("windex");
  shard(d / "model-00001-of-00002.safetensors", {"a", "b"});
  shard(d / "model-00002-of-00002.safetensors", {"b", "c"});
  index(d.path(), {{"a", "model-00001-of-00002.safetensors"},
                   {"b", "model-00001-of-00002.safetensors"},
                   {"c", "model-00002-of-00002.safetensors"}});
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "b");
  EXPECT_NE(e.message().find("two shards"), std::string::npos);
}

TEST(WeightIndex, TensorListedTwiceInIndex) {
  TempDir d("windex");
  two_shards(d);
  std::ofstream(d / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-00001-of-00002.safetensors",)"
         R"("b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors",)"
         R"("a":"model-00002-of-00002.safetensors"}})";
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("\"a\" appears twice"), std::string::npos) << e.what();
}

TEST(WeightIndex, MalformedIndex) {
  TempDir d("windex");
  two_shards(d);
  const fs::path p = d / "model.safetensors.index.json";
  struct Case {
    std::string text, item, needle;
  } cases[] = {
      {"{\"weight_map\": {", "", "not valid JSON"},
      {"[]", "", "JSON object"},
      {"{}", "weight_map", "no \"weight_map\""},
      {R"({"weight_map": []})", "weight_map", "must be an object"},
      {R"({"weight_map": {}})", "weight_map", "lists no tensors"},
      {R"({"weight_map": {"a": 1}})", "a", "string"},
      {R"({"weight_map": {"a": ""}})", "a", "empty"},
      {R"({"metadata": 5, "weight_map": {"a": "x"}})", "metadata", "must be an object"},
  };
  for (const auto& c : cases) {
    std::ofstream(p, std::ios::trunc) << c.text;
    const Error e = catch_error([&] { WeightIndex::open(d.path()); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << c.text;
    EXPECT_EQ(e.file(), p.string()) << c.text;
    EXPECT_EQ(e.item(), c.item) << c.text << " -> " << e.what();
    EXPECT_NE(e.message().find(c.needle), std::string::npos) << c.text << " -> " << e.what();
  }
}

TEST(WeightIndex, CorruptShardNamesTheShard) {
  TempDir d("windex");
  two_shards(d);
  const fs::path s2 = d / "model-00002-of-00002.safetensors";
  fs::resize_file(s2, fs::file_size(s2) - 1);
  const Error e = catch_error([&] { WeightIndex::open(d.path()); });
  EXPECT_EQ(e.file(), s2.string());
  EXPECT_EQ(e.item(), "c");
  EXPECT_NE(e.message().find("truncated"), std::string::npos);
}

}  // namespace
