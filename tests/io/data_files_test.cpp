// Where bundled data and models are looked for (io/data_files.h): relative to
// the executable, the source tree only for an executable inside its build
// tree, $QLOOM_DATA_DIR first; a miss names every place looked.
#include "qloom/io/data_files.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::io {
namespace {

namespace fs = std::filesystem;
using V = std::vector<fs::path>;

TEST(DataFiles, InstalledExecutableLooksBesideItselfOnly) {
  test::TempDir t("roots");
  const fs::path build = t.mkdir("src/build"), src = t / "src";
  const fs::path exe = t.mkdir("prefix/bin") / "qloom";
  EXPECT_EQ(bundle_roots_for(BundleKind::kData, exe, "", build, src), (V{t / "prefix/share/qloom/data"}));
  EXPECT_EQ(bundle_roots_for(BundleKind::kModels, exe, "/env", build, src), (V{t / "prefix/share/qloom/models"}));
  EXPECT_EQ(bundle_roots_for(BundleKind::kData, exe, "/env", build, src),
            (V{"/env", t / "prefix/share/qloom/data"}));
}

TEST(DataFiles, BuildTreeExecutableFallsBackToTheSourceTree) {
  test::TempDir t("roots-build");
  const fs::path src = t / "src", build = t.mkdir("src/build");
  const fs::path exe = t.mkdir("src/build/tests") / "qloom_io_tests";
  EXPECT_EQ(bundle_roots_for(BundleKind::kData, exe, "", build, src),
            (V{t / "src/build/share/qloom/data", src / "data"}));
  EXPECT_EQ(bundle_roots_for(BundleKind::kModels, build / "qloom", "", build, src),
            (V{t / "src/share/qloom/models", src / "models"}));
  // A sibling whose name starts like the build dir is not inside it.
  const fs::path sibling = t.mkdir("src/build2") / "qloom";
  EXPECT_EQ(bundle_roots_for(BundleKind::kData, sibling, "", build, src), (V{t / "src/share/qloom/data"}));
  // Through a symlink to the build tree: still inside (compared canonically).
  fs::create_directory_symlink(build, t / "link");
  EXPECT_EQ(bundle_roots_for(BundleKind::kData, t / "link" / "qloom", "", build, src).back(), src / "data");
}

TEST(DataFiles, EnvironmentFirstAndAMissNamesEveryPlaceLooked) {
  test::TempDir t("env");
  t.write("datasets/only-here.txt", "x");
  ::setenv("QLOOM_DATA_DIR", t.path().c_str(), 1);
  const auto found = find_bundled_data("datasets/only-here.txt");
  const auto tried = bundled_data_candidates("datasets/nope.txt");
  const Error e = test::catch_error([] { require_bundled_data("datasets/nope.txt", "a test file"); });
  ::unsetenv("QLOOM_DATA_DIR");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, t / "datasets/only-here.txt");
  ASSERT_GE(tried.size(), 2u);
  EXPECT_EQ(tried[0], t / "datasets/nope.txt");
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  for (const auto& p : tried) EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  // This test binary runs from its build tree: the source tree's data is the fallback.
  EXPECT_EQ(fs::canonical(*find_bundled_data("datasets/wikitext-2-raw/wiki.test.raw")),
            fs::canonical(fs::path(QLOOM_SOURCE_DIR) / "data/datasets/wikitext-2-raw/wiki.test.raw"));
  ASSERT_TRUE(find_bundled_model("stories260K-hf-bf16").has_value());
}

}  // namespace
}  // namespace qloom::io
