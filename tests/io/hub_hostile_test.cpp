// io/hub against a hostile server (tests/io/hub_test_server.py's --commit,
// --lie and hostile --extra names): every name it sends is checked before it
// touches the file system, every size it announces is bounded, and a
// download never writes more than announced.
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/io/hub.h"
#include "qloom/io/hub_api.h"
#include "qloom/io/hub_cache.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_names.h"
#include "support/hub_server.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using io::HubFailure;
using test::catch_hub_error;
using test::demo_hub_id;
using test::hub_settings;
using test::HubTestServer;
using test::TempDir;

io::HubResolveOptions fetching(io::HubFetch f) {
  io::HubResolveOptions o;
  o.fetch = f;
  return o;
}

// Every path under `root`, relative, sorted.
std::set<std::string> tree(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    out.insert(fs::relative(e.path(), root).string());
  return out;
}

// ---- the checks themselves ----

TEST(HubNames, CommitIdsMustBeCommitHashes) {
  io::check_hub_commit("e5d0afaaf3d5af91388fad12f094412affb336e2", "u", "sha");
  for (const std::string& bad : std::vector<std::string>{"", "main", "../../../../../victim", "E5D0AFAAF3D5AF91388FAD12F094412AFFB336E2",
                                "e5d0afaaf3d5af91388fad12f094412affb336e", "e5d0afaaf3d5af91388fad12f094412affb336e2/",
                                std::string("e5d0afaaf3d5af91388fad12f094412affb336e\0", 40)}) {
    const auto e = catch_hub_error([&] { io::check_hub_commit(bad, "u", "X-Repo-Commit"); });
    EXPECT_EQ(e.failure(), HubFailure::kBadResponse) << bad;
    EXPECT_EQ(e.item(), "X-Repo-Commit");
    EXPECT_NE(std::string(e.what()).find("not a 40-hex-digit commit hash"), std::string::npos) << e.what();
  }
}

TEST(HubNames, FileNamesStayInsideTheSnapshot) {
  for (const char* ok : {"config.json", "sub/dir/f.json", "onnx/model.onnx", "a..b", "..x", "模型.json"})
    EXPECT_NO_THROW(io::check_hub_file_name(ok, "u")) << ok;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "is empty"},
      {"../x", "'..' component"},
      {"a/../../x", "'..' component"},
      {"a/..", "'..' component"},
      {"./x", "'.' component"},
      {"/etc/passwd", "absolute path"},
      {"a//b", "empty component"},
      {"a/", "empty component"},
      {"a\\..\\x", "backslash"},
      {std::string("a\0b", 3), "control byte"},
      {"a\nb", "control byte"},
      {"\xff\xfe.json", "not valid UTF-8"},
      {std::string(300, 'a'), "component of 300 bytes"},
      {std::string(1100, 'a'), "1100 bytes long"}};
  for (const auto& [name, why] : bad) {
    const auto e = catch_hub_error([&] { io::check_hub_file_name(name, "u"); });
    EXPECT_EQ(e.failure(), HubFailure::kBadResponse) << name;
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(HubNames, EtagsAndLocations) {
  io::check_hub_etag("0123abcd", "u", "f");
  io::check_hub_location("https://cdn.example/x?y=1", "u", "f");
  for (const char* bad : {"", "../x", "a/b", ".hidden", "a b"})
    EXPECT_EQ(catch_hub_error([&] { io::check_hub_etag(bad, "u", "f"); }).failure(), HubFailure::kBadResponse) << bad;
  for (const char* bad : {"file:///etc/passwd", "ftp://h/x", "/relative", "https://h/a b", "https://h/\r\nX: y"})
    EXPECT_EQ(catch_hub_error([&] { io::check_hub_location(bad, "u", "f"); }).failure(), HubFailure::kBadResponse)
        << bad;
  EXPECT_EQ(io::printable_name(std::string("a\0\n\xff", 4)), "a\\x00\\x0a\\xff");
}

TEST(HubNames, TheCacheRefusesHostileNamesEvenWhenCalledDirectly) {
  TempDir t("hubnames");
  const io::HubCache cache(t / "hub", demo_hub_id());
  const std::string commit(40, 'a');
  EXPECT_THROW(cache.link(commit, "../../../victim", "e1"), io::HubError);
  EXPECT_THROW(cache.link("../../victim", "config.json", "e1"), io::HubError);
  EXPECT_THROW(cache.link(commit, "config.json", "../e1"), io::HubError);
  EXPECT_THROW(cache.write_ref("main", "../../victim"), io::HubError);
  EXPECT_FALSE(fs::exists(t / "victim"));
  // A ref file whose content is not a commit hash names no snapshot.
  t.write("hub/models--demo--stories/refs/main", "../../../victim");
  EXPECT_FALSE(cache.cached_commit("main"));
  // A snapshot folder that is a symlink is not followed.
  t.mkdir("elsewhere");
  fs::create_directories(cache.snapshot(commit));
  fs::create_directory_symlink(t / "elsewhere", cache.snapshot(commit) / "sub");
  EXPECT_THROW(cache.link(commit, "sub/f.json", "e1"), io::HubError);
  EXPECT_TRUE(fs::is_empty(t / "elsewhere"));
}

// ---- against the test server ----

class HubHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HubTestServer::available()) GTEST_SKIP() << "python3 not found";
    victim_ = t_.write("victim/config.json", "precious");
  }
  // The victim is untouched and nothing but hub/ and victim/ exists in t_.
  void expect_nothing_escaped() {
    EXPECT_FALSE(fs::is_symlink(victim_));
    EXPECT_EQ(test::read_file(victim_), "precious");
    std::set<std::string> top;
    for (const auto& e : fs::directory_iterator(t_.path())) top.insert(e.path().filename().string());
    EXPECT_EQ(top, (std::set<std::string>{"hub", "victim"}));
    EXPECT_EQ(tree(t_ / "victim"), std::set<std::string>{"config.json"});
  }
  TempDir t_{"hubhostile"};
  fs::path victim_;
};

TEST_F(HubHostileTest, ACommitIdThatIsAPathIsRefusedAndNothingLeavesTheCache) {
  // hub/models--demo--stories/snapshots/../../../victim is t_/victim.
  for (const char* commit : {"../../../victim", "../../../../../victim", "/tmp/victim", "main"}) {
    HubTestServer srv({"--commit", commit});
    const auto s = hub_settings(srv.endpoint(), t_);
    for (const auto fetch : {io::HubFetch::kConfigOnly, io::HubFetch::kModel}) {
      const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s, fetching(fetch)); });
      EXPECT_EQ(e.failure(), HubFailure::kBadResponse) << commit;
      EXPECT_EQ(e.item(), fetch == io::HubFetch::kModel ? "sha" : "X-Repo-Commit");
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("'") + commit + "' is not a 40-hex-digit commit hash"), std::string::npos)
          << what;
      expect_nothing_escaped();
    }
    EXPECT_TRUE(srv.files_fetched().empty());
  }
}

TEST_F(HubHostileTest, ListedFileNamesThatLeaveTheSnapshotAreRefused) {
  for (const char* name : {"../x", "../../../victim/config.json", "a/../../../../victim/config.json", "/tmp/x",
                           "a//b.json", "a\\..\\x.json", "x\x01y.json", "./config.json"}) {
    HubTestServer srv({"--extra", std::string("demo/stories:") + name + "=5"});
    const auto s = hub_settings(srv.endpoint(), t_);
    const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
    EXPECT_EQ(e.failure(), HubFailure::kBadResponse) << name;
    EXPECT_NE(std::string(e.what()).find("the repo file name '" + io::printable_name(name) + "'"),
              std::string::npos)
        << e.what();
    EXPECT_TRUE(srv.files_fetched().empty()) << name;
    EXPECT_FALSE(fs::exists(t_ / "hub/models--demo--stories/snapshots")) << name;
    expect_nothing_escaped();
  }
}

// True when no blob or partial download is bigger than `max` bytes.
void expect_no_blob_over(const fs::path& blobs, uint64_t max) {
  std::error_code ec;
  if (!fs::exists(blobs, ec)) return;
  for (const auto& e : fs::directory_iterator(blobs)) EXPECT_LE(fs::file_size(e.path()), max) << e.path();
}

TEST_F(HubHostileTest, AHugeAnnouncedSizeForATextFileIsRefusedBeforeDownloading) {
  HubTestServer srv({"--lie", "config.json=huge"});
  const auto s = hub_settings(srv.endpoint(), t_);
  for (const auto fetch : {io::HubFetch::kConfigOnly, io::HubFetch::kModel}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s, fetching(fetch)); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    EXPECT_EQ(e.failure(), HubFailure::kBadResponse);
    EXPECT_EQ(e.item(), "config.json");
    const std::string what = e.what();
    EXPECT_NE(what.find("announces 1000000000000 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("the limit is 64.0 MiB"), std::string::npos) << what;
  }
  EXPECT_EQ(srv.gets_of("config.json"), 0u);
  expect_nothing_escaped();
}

TEST_F(HubHostileTest, ATextFileWithNoSizeStopsAtTheTextLimit) {
  HubTestServer srv({"--lie", "config.json=nolength"});
  const auto s = hub_settings(srv.endpoint(), t_);
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s, fetching(io::HubFetch::kConfigOnly)); });
  EXPECT_EQ(e.failure(), HubFailure::kBadResponse);
  EXPECT_EQ(e.item(), "config.json");
  EXPECT_NE(std::string(e.what()).find("more than the 64.0 MiB limit for a text file"), std::string::npos)
      << e.what();
  expect_no_blob_over(t_ / "hub/models--demo--stories/blobs", 0);  // discarded, nothing left
}

TEST_F(HubHostileTest, ABodyLongerThanAnnouncedIsCutAndDiscarded) {
  for (const char* file : {"config.json", "model.safetensors"}) {
    fs::remove_all(t_ / "hub");  // the other file's blob from the round before
    HubTestServer srv({"--lie", std::string(file) + "=endless"});
    const auto s = hub_settings(srv.endpoint(), t_);
    const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
    EXPECT_EQ(e.failure(), HubFailure::kBadResponse) << file;
    EXPECT_EQ(e.item(), file);
    const auto size = fs::file_size(fs::path(QLOOM_DEMO_MODEL_DIR) / file);
    EXPECT_NE(std::string(e.what()).find("sent more than the " + std::to_string(size) + " bytes announced"),
              std::string::npos)
        << e.what();
    expect_no_blob_over(t_ / "hub/models--demo--stories/blobs", 16u << 20);
  }
}

TEST_F(HubHostileTest, WeightSizesAreCheckedAgainstTheListing) {
  HubTestServer srv({"--lie", "model.safetensors=listed"});
  const auto s = hub_settings(srv.endpoint(), t_);
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kBadResponse);
  EXPECT_EQ(e.item(), "model.safetensors");
  EXPECT_NE(std::string(e.what()).find("the repo listing gives"), std::string::npos) << e.what();
  EXPECT_EQ(srv.gets_of("model.safetensors"), 0u);
}

TEST_F(HubHostileTest, AWeightFileWithoutSizeHeadersIsBoundByTheListing) {
  HubTestServer srv({"--lie", "model.safetensors=nolength"});
  const auto s = hub_settings(srv.endpoint(), t_);
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.item(), "model.safetensors");
  const auto size = fs::file_size(fs::path(QLOOM_DEMO_MODEL_DIR) / "model.safetensors");
  EXPECT_NE(std::string(e.what()).find("sent more than the " + std::to_string(size) + " bytes announced"),
            std::string::npos)
      << e.what();
  // With no listing either, a weight file has no bound: refused before any byte.
  io::HubFileMeta m;
  m.name = "model.safetensors";
  const auto none = catch_hub_error([&] { io::settle_hub_file_size(m, std::nullopt, demo_hub_id()); });
  EXPECT_NE(std::string(none.what()).find("neither the repo listing nor the file's headers give its size"),
            std::string::npos);
  m.name = "tokenizer_config.json";
  io::settle_hub_file_size(m, std::nullopt, demo_hub_id());
  EXPECT_EQ(io::hub_download_limit(m), io::kMaxHubTextFileBytes);
}

}  // namespace
}  // namespace qloom
