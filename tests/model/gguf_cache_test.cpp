// The GGUF conversion cache is keyed by content (model/gguf_cache.cpp): an
// in-place edit is converted afresh even with its mtime set back, an
// unchanged file skips the full hash, and the cache honours QLOOM_CACHE_DIR.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "qloom/io/gguf.h"
#include "qloom/model/gguf_convert.h"
#include "support/env_guard.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using test::EnvGuard;

const fs::path kStoriesGguf = fs::path(QLOOM_TEST_DATA_DIR) / "gguf_convert/stories260k.gguf";

// Overwrites the first 4 bytes of the first F32 tensor with the float 0.375
// in place (same size), then sets the file's mtime back to what it was.
void edit_a_tensor_in_place(const fs::path& p) {
  struct stat before {};
  ASSERT_EQ(::stat(p.c_str(), &before), 0);
  uint64_t at = 0;
  {
    const io::GgufFile f = io::GgufFile::open(p);
    for (const auto& t : f.tensors())
      if (t.type == io::GgmlType::kF32 && t.nbytes >= 4 && at == 0) at = f.header().data_offset + t.offset;
  }
  ASSERT_GT(at, 0u) << "the demo GGUF has an F32 tensor";
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    const float v = 0.375f;
    char bytes[4];
    std::memcpy(bytes, &v, 4);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(bytes, 4);
    ASSERT_TRUE(f.good());
  }
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(p.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_ino, before.st_ino);
}

TEST(GgufCache, AnInPlaceEditIsConvertedAfreshEvenWithItsMtimeSetBack) {
  test::TempDir t("gguf-cache-edit");
  EnvGuard env;
  env.set("QLOOM_GGUF_CACHE", (t / "cache").c_str());
  fs::copy_file(kStoriesGguf, t / "m.gguf");
  const fs::path a = model::resolve_gguf_model(t / "m.gguf");
  const std::string before = test::read_file(a / "model.safetensors");
  edit_a_tensor_in_place(t / "m.gguf");
  const fs::path b = model::resolve_gguf_model(t / "m.gguf");
  EXPECT_NE(b, a);
  EXPECT_NE(test::read_file(b / "model.safetensors"), before);
  EXPECT_EQ(test::read_file(a / "model.safetensors"), before);  // the old conversion is left alone
}

TEST(GgufCache, TheWholeFileIsHashedOnlyWhenItsStampChanges) {
  test::TempDir t("gguf-cache-stamp");
  EnvGuard env;
  env.set("QLOOM_GGUF_CACHE", (t / "cache").c_str());
  fs::copy_file(kStoriesGguf, t / "m.gguf");
  bool whole = false;
  const std::string key = model::gguf_cache_key(t / "m.gguf", &whole);
  EXPECT_TRUE(whole);  // first use
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(model::gguf_cache_key(t / "m.gguf", &whole), key);
  EXPECT_FALSE(whole);  // remembered
  fs::permissions(t / "m.gguf", fs::perms::owner_exec, fs::perm_options::add);  // ctime moves, content not
  EXPECT_EQ(model::gguf_cache_key(t / "m.gguf", &whole), key);
  EXPECT_TRUE(whole);
  fs::copy_file(kStoriesGguf, t / "copy.gguf");  // same content elsewhere: same key
  EXPECT_EQ(model::gguf_cache_key(t / "copy.gguf", &whole), key);
  EXPECT_TRUE(whole);
}

TEST(GgufCache, TheRootHonoursQloomCacheDir) {
  test::TempDir t("gguf-cache-root");
  EnvGuard env;
  env.set("QLOOM_GGUF_CACHE", nullptr);
  env.set("QLOOM_CACHE_DIR", (t / "qc").c_str());
  env.set("XDG_CACHE_HOME", (t / "xdg").c_str());
  EXPECT_EQ(model::gguf_cache_root(), t / "qc" / "gguf");
  const fs::path a = model::resolve_gguf_model(kStoriesGguf);
  EXPECT_EQ(a.parent_path().parent_path(), t / "qc" / "gguf");
  env.set("QLOOM_GGUF_CACHE", (t / "g").c_str());
  EXPECT_EQ(model::gguf_cache_root(), t / "g");
  env.set("QLOOM_GGUF_CACHE", nullptr);
  env.set("QLOOM_CACHE_DIR", nullptr);
  EXPECT_EQ(model::gguf_cache_root(), t / "xdg" / "qloom" / "gguf");
  env.set("HOME", t.path().c_str());
  env.set("QLOOM_CACHE_DIR", "~/c");
  EXPECT_EQ(model::gguf_cache_root(), t / "c" / "gguf");
}

}  // namespace
}  // namespace qloom
