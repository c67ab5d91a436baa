// io/hub: model ids, the huggingface_hub cache layout, and downloads from a
// real HTTP server on 127.0.0.1 (tests/io/hub_test_server.py) that serves the
// demo model the way the hub does.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "qloom/io/hub.h"
#include "qloom/io/hub_cache.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_select.h"
#include "support/hub_server.h"
#include "support/env_guard.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace qloom {
namespace {

namespace fs = std::filesystem;
using io::HubFailure;
using test::EnvGuard;
using test::catch_hub_error;
using test::demo_hub_id;
using test::hub_settings;
using test::HubTestServer;
using test::TempDir;

const char* const kDemoFiles[] = {"config.json",          "generation_config.json", "model.safetensors",
                                  "special_tokens_map.json", "tokenizer.json",     "tokenizer.model",
                                  "tokenizer_config.json"};

// ---- ids, selection, settings, layout (no server) ----

TEST(HubId, ParsesOrgNameAndRevision) {
  const auto a = io::parse_hub_id("Qwen/Qwen2.5-0.5B");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->org, "Qwen");
  EXPECT_EQ(a->name, "Qwen2.5-0.5B");
  EXPECT_EQ(a->revision, "main");
  EXPECT_EQ(a->display(), "Qwen/Qwen2.5-0.5B");
  const auto b = io::parse_hub_id("meta-llama/Llama-3.2-1B@v1.0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->revision, "v1.0");
  EXPECT_EQ(b->display(), "meta-llama/Llama-3.2-1B@v1.0");
  EXPECT_TRUE(io::parse_hub_id("a/b@refs/pr/1"));
  EXPECT_TRUE(io::is_commit_hash("e5d0afaaf3d5af91388fad12f094412affb336e2"));
  EXPECT_FALSE(io::is_commit_hash("main"));
}

TEST(HubId, RejectsPathsAndMalformedIds) {
  for (const char* s : {"", "model", "/abs/path", "./org/name", "org/name/extra", "org//name", "org/",
                        "/name", "org/na me", "org/-name", "org/name.", "org/a--b", "org/a..b",
                        "org/name@", "org/name@a b", "org/name@../x", "~/models/x"})
    EXPECT_FALSE(io::parse_hub_id(s)) << s;
}

TEST(HubSelect, DownloadsWhatQuantizationNeeds) {
  for (const char* n : {"config.json", "generation_config.json", "model.safetensors",
                        "model-00001-of-00002.safetensors", "model.safetensors.index.json",
                        "tokenizer.json", "tokenizer.model", "README.md", "LICENSE"})
    EXPECT_TRUE(io::wanted_for_quantization(n, 1000)) << n;
  EXPECT_TRUE(io::wanted_for_quantization("tokenizer.json", 40u << 20));  // big but needed
  for (const char* n : {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth",
                        "model.gguf", "tf_model.h5", "flax_model.msgpack", "model.onnx", "onnx/model.onnx",
                        "original/consolidated.00.pth", "sub/config.json", ".gitattributes"})
    EXPECT_FALSE(io::wanted_for_quantization(n, 1000)) << n;
  EXPECT_FALSE(io::wanted_for_quantization("figure.png", 20u << 20));
}

TEST(HubEnv, ReadsTheVariablesHuggingfaceHubReads) {
  TempDir t("hubenv");
  EnvGuard env;
  for (const char* v : {"HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE",
                        "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "XDG_CACHE_HOME"})
    env.set(v, nullptr);
  env.set("HOME", t.path().c_str());
  env.set("HF_HOME", nullptr);
  io::HubSettings s = io::hub_settings_from_env();
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_EQ(s.cache_dir, t / ".cache/huggingface/hub");
  EXPECT_EQ(s.token_file, t / ".cache/huggingface/token");
  EXPECT_EQ(s.token, "");
  EXPECT_FALSE(s.offline);

  env.set("HF_HOME", (t / "hf").c_str());
  t.write("hf/token", "hf_fromfile\n");
  env.set("HF_ENDPOINT", "http://127.0.0.1:9/");
  env.set("HF_HUB_OFFLINE", "yes");
  s = io::hub_settings_from_env();
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(s.cache_dir, t / "hf/hub");
  EXPECT_EQ(s.token, "hf_fromfile");
  EXPECT_TRUE(s.offline);

  env.set("HF_HUB_CACHE", "~/elsewhere");
  env.set("HF_TOKEN", " hf_fromenv ");
  env.set("HF_HUB_OFFLINE", "0");
  s = io::hub_settings_from_env();
  EXPECT_EQ(s.cache_dir, t / "elsewhere");
  EXPECT_EQ(s.token, "hf_fromenv");
  EXPECT_FALSE(s.offline);
}

TEST(HubCache, RelativeLinksAndRefsAsHuggingfaceHubWritesThem) {
  TempDir t("hubcache");
  const io::HubCache cache(t.path(), demo_hub_id());
  EXPECT_EQ(cache.repo_dir(), t / "models--demo--stories");
  EXPECT_EQ(cache.lock_file("abc"), t / ".locks/models--demo--stories/abc.lock");
  const std::string commit(40, 'a');
  t.write("models--demo--stories/blobs/e1", "x");
  cache.link(commit, "config.json", "e1");
  cache.link(commit, "sub/dir/f.json", "e1");
  EXPECT_EQ(fs::read_symlink(cache.snapshot(commit) / "config.json"), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(cache.snapshot(commit) / "sub/dir/f.json"), "../../../../blobs/e1");
  EXPECT_TRUE(cache.has_file(commit, "sub/dir/f.json"));
  cache.link(commit, "dangling.json", "missing");
  EXPECT_FALSE(cache.has_file(commit, "dangling.json"));
  cache.write_ref("main", commit);
  EXPECT_EQ(test::read_file(cache.ref_file("main")), commit);  // no newline
  EXPECT_EQ(cache.cached_commit("main"), commit);
  EXPECT_EQ(cache.cached_commit(commit), commit);
  EXPECT_FALSE(cache.cached_commit("dev"));
}

// ---- against the test server ----

class HubServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HubTestServer::available()) GTEST_SKIP() << "python3 not found";
  }
  TempDir cache_{"hubdl"};
};

void expect_demo_snapshot(const fs::path& snap, const fs::path& cache_root) {
  for (const char* f : kDemoFiles) {
    const fs::path p = snap / f;
    ASSERT_TRUE(fs::is_symlink(p)) << p;
    const std::string target = fs::read_symlink(p).string();
    EXPECT_EQ(target.rfind("../../blobs/", 0), 0u) << target;
    EXPECT_EQ(test::read_file(p), test::read_file(fs::path(QLOOM_DEMO_MODEL_DIR) / f)) << f;
    const std::string etag = target.substr(12);
    const bool lfs = std::string(f).find(".safetensors") != std::string::npos ||
                     std::string(f) == "tokenizer.model";
    EXPECT_EQ(etag.size(), lfs ? 64u : 40u) << f;  // LFS sha256 or git blob sha1
  }
  EXPECT_TRUE(fs::exists(cache_root / "CACHEDIR.TAG"));
}

TEST_F(HubServerTest, FreshDownloadLaysOutTheCacheLikeHuggingfaceHub) {
  HubTestServer srv;
  const auto s = hub_settings(srv.endpoint(), cache_);
  const fs::path snap = io::resolve_hub_model(demo_hub_id(), s);
  const io::HubCache cache(s.cache_dir, demo_hub_id());
  const auto commit = cache.cached_commit("main");
  ASSERT_TRUE(commit);
  EXPECT_EQ(snap, cache.snapshot(*commit));
  expect_demo_snapshot(snap, s.cache_dir);
  for (const char* f : kDemoFiles) EXPECT_EQ(srv.gets_of(f), 1u) << f;
  for (const auto& e : fs::directory_iterator(cache.repo_dir() / "blobs"))
    EXPECT_EQ(e.path().extension(), "") << "leftover " << e.path();
}

TEST_F(HubServerTest, ConfigOnlyDownloadsOnlyConfigJson) {
  HubTestServer srv;
  const auto s = hub_settings(srv.endpoint(), cache_);
  io::HubResolveOptions o;
  o.fetch = io::HubFetch::kConfigOnly;
  const fs::path snap = io::resolve_hub_model(demo_hub_id(), s, o);
  EXPECT_EQ(test::read_file(snap / "config.json"),
            test::read_file(fs::path(QLOOM_DEMO_MODEL_DIR) / "config.json"));
  EXPECT_EQ(srv.files_fetched(), std::vector<std::string>{"config.json"});
  EXPECT_FALSE(fs::exists(snap / "model.safetensors"));
  for (const auto& r : srv.requests())
    EXPECT_EQ(r["path"].get<std::string>().find("/api/"), std::string::npos) << r.dump();
}

TEST_F(HubServerTest, SecondRunDownloadsNothingAndTheCacheServesWithTheServerDown) {
  HubTestServer srv;
  const auto s = hub_settings(srv.endpoint(), cache_);
  const fs::path first = io::resolve_hub_model(demo_hub_id(), s);
  srv.clear_log();
  EXPECT_EQ(io::resolve_hub_model(demo_hub_id(), s), first);
  EXPECT_TRUE(srv.files_fetched().empty());
  srv.stop();
  std::ostringstream log;
  io::HubResolveOptions o;
  o.log = &log;
  EXPECT_EQ(io::resolve_hub_model(demo_hub_id(), s, o), first);
  EXPECT_NE(log.str().find("using the cached snapshot"), std::string::npos) << log.str();
  o.fetch = io::HubFetch::kConfigOnly;
  EXPECT_EQ(io::resolve_hub_model(demo_hub_id(), s, o), first);
}

TEST_F(HubServerTest, OfflineModeNeverTouchesTheNetwork) {
  HubTestServer srv;
  auto s = hub_settings(srv.endpoint(), cache_);
  s.offline = true;
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kNotCached);
  EXPECT_NE(std::string(e.what()).find("HF_HUB_OFFLINE"), std::string::npos) << e.what();
  EXPECT_TRUE(srv.requests().empty());
  s.offline = false;
  const fs::path snap = io::resolve_hub_model(demo_hub_id(), s);
  srv.clear_log();
  s.offline = true;
  EXPECT_EQ(io::resolve_hub_model(demo_hub_id(), s), snap);
  EXPECT_TRUE(srv.requests().empty());
}

TEST_F(HubServerTest, NetworkDownWithNothingCachedSaysSo) {
  int port = 0;
  {
    HubTestServer srv;
    port = srv.port();
  }  // stopped: the port refuses connections
  const auto s = hub_settings("http://127.0.0.1:" + std::to_string(port), cache_);
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kNetwork);
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  const std::string what = e.what();
  EXPECT_NE(what.find("cannot reach"), std::string::npos) << what;
  EXPECT_NE(what.find("nothing of demo/stories is cached"), std::string::npos) << what;
  EXPECT_NE(what.find("HF_HUB_OFFLINE"), std::string::npos) << what;
}

TEST_F(HubServerTest, InterruptedDownloadKeepsThePartialFileAndResumesWithRange) {
  HubTestServer srv({"--drop-after", "100000", "--drop-count", "3"});
  const auto s = hub_settings(srv.endpoint(), cache_);
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kInterrupted);
  EXPECT_EQ(e.item(), "model.safetensors");
  EXPECT_NE(std::string(e.what()).find("resumes"), std::string::npos) << e.what();
  const io::HubCache cache(s.cache_dir, demo_hub_id());
  // The other files download in parallel and are cancelled when this one
  // fails, so they may leave partials too: find the one named by the CDN
  // object (the LFS sha256) of model.safetensors.
  std::string sha;
  for (const auto& r : srv.requests())
    if (r["name"] == "model.safetensors" && r["path"].get<std::string>().rfind("/cdn/", 0) == 0)
      sha = r["path"].get<std::string>().substr(5);
  ASSERT_EQ(sha.size(), 64u);
  const fs::path partial = cache.repo_dir() / "blobs" / (sha + ".incomplete");
  ASSERT_TRUE(fs::exists(partial)) << partial;
  EXPECT_EQ(fs::file_size(partial), 300000u);  // three attempts of 100000 bytes
  const auto commit = cache.cached_commit("main");
  EXPECT_FALSE(commit && cache.has_file(*commit, "model.safetensors"));

  srv.clear_log();
  const fs::path snap = io::resolve_hub_model(demo_hub_id(), s);
  expect_demo_snapshot(snap, s.cache_dir);
  EXPECT_FALSE(fs::exists(partial));
  bool resumed = false;
  for (const auto& r : srv.requests())
    if (r["range"] == "bytes=300000-") resumed = true;
  EXPECT_TRUE(resumed);
  EXPECT_EQ(srv.gets_of("model.safetensors"), 1u);
}

TEST_F(HubServerTest, UnknownRepoAndRevisionAre404s) {
  HubTestServer srv;
  const auto s = hub_settings(srv.endpoint(), cache_);
  auto e = catch_hub_error([&] { io::resolve_hub_model(*io::parse_hub_id("demo/nope"), s); });
  EXPECT_EQ(e.failure(), HubFailure::kRepoNotFound);
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_NE(std::string(e.what()).find("repository not found"), std::string::npos) << e.what();
  e = catch_hub_error([&] { io::resolve_hub_model(*io::parse_hub_id("demo/stories@v9"), s); });
  EXPECT_EQ(e.failure(), HubFailure::kRevisionNotFound);
  io::HubResolveOptions o;
  o.fetch = io::HubFetch::kConfigOnly;
  e = catch_hub_error([&] { io::resolve_hub_model(*io::parse_hub_id("demo/nope"), s, o); });
  EXPECT_EQ(e.failure(), HubFailure::kRepoNotFound);
}

TEST_F(HubServerTest, PrivateRepoSays401AndHowToPassAToken) {
  HubTestServer srv({"--token", "hf_secret"});
  auto s = hub_settings(srv.endpoint(), cache_);
  auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kUnauthorized);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.remedy().find("HF_TOKEN"), std::string::npos) << e.remedy();
  EXPECT_NE(e.remedy().find("hf auth login"), std::string::npos) << e.remedy();
  s.token = "hf_wrong";
  e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kUnauthorized);
  EXPECT_NE(e.remedy().find("rejected"), std::string::npos) << e.remedy();
  s.token = "hf_secret";
  expect_demo_snapshot(io::resolve_hub_model(demo_hub_id(), s), s.cache_dir);
}

TEST_F(HubServerTest, GatedRepoSays403) {
  HubTestServer srv({"--forbidden"});
  const auto s = hub_settings(srv.endpoint(), cache_);
  const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
  EXPECT_EQ(e.failure(), HubFailure::kForbidden);
  EXPECT_NE(std::string(e.what()).find("gated"), std::string::npos) << e.what();
  EXPECT_NE(e.remedy().find("HF_TOKEN"), std::string::npos) << e.remedy();
}

// sha256 of the demo model's weights: its LFS etag, so its blob's name.
std::string model_sha256() {
  const auto r = test::run_command(
      {"sha256sum", (fs::path(QLOOM_DEMO_MODEL_DIR) / "model.safetensors").string()});
  return r.out.substr(0, 64);
}

TEST_F(HubServerTest, CorruptBytesAreDiscardedNeverUsed) {
  const auto s0 = hub_settings("", cache_);
  const io::HubCache cache(s0.cache_dir, demo_hub_id());
  {
    HubTestServer srv({"--corrupt", "model.safetensors"});
    const auto s = hub_settings(srv.endpoint(), cache_);
    const auto e = catch_hub_error([&] { io::resolve_hub_model(demo_hub_id(), s); });
    EXPECT_EQ(e.failure(), HubFailure::kChecksum);
    EXPECT_EQ(e.item(), "model.safetensors");
    EXPECT_NE(std::string(e.what()).find("sha256"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("discarded"), std::string::npos) << e.what();
    // Neither a blob nor a partial file holds the bad bytes (other files may
    // have been cut short when the mismatch stopped the download: resumable).
    const std::string bad_part = model_sha256() + ".incomplete";
    for (const auto& f : fs::directory_iterator(cache.repo_dir() / "blobs")) {
      EXPECT_NE(f.path().filename(), bad_part) << f.path();
      EXPECT_NE(f.path().filename(), model_sha256()) << f.path();
    }
    const auto commit = cache.cached_commit("main");
    EXPECT_FALSE(commit && fs::exists(cache.snapshot(*commit) / "model.safetensors"));
  }
  HubTestServer good;
  expect_demo_snapshot(io::resolve_hub_model(demo_hub_id(), hub_settings(good.endpoint(), cache_)),
                       s0.cache_dir);
}

// Download throughput on loopback against curl fetching the same ~100 MB LFS
// file from the same server. Not run by default (slow); run it with
//   qloom_io_tests --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'
TEST_F(HubServerTest, DISABLED_ThroughputVsCurl) {
  constexpr uint64_t kBytes = 100u << 20;
  HubTestServer srv({"--extra", "demo/big:big.safetensors=" + std::to_string(kBytes), "--extra",
                     "demo/big:config.json=2"});
  const auto s = hub_settings(srv.endpoint(), cache_);
  const auto t0 = std::chrono::steady_clock::now();
  io::resolve_hub_model(*io::parse_hub_id("demo/big"), s);
  const double qloom_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  const auto r = test::run_command({"curl", "-sfL", "-o", (cache_ / "curl.bin").string(),
                                    srv.endpoint() + "/demo/big/resolve/main/big.safetensors"});
  const double curl_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(fs::file_size(cache_ / "curl.bin"), kBytes);
  const double q = double(kBytes) / qloom_s / 1e6, c = double(kBytes) / curl_s / 1e6;
  std::printf("download of %llu MB on loopback: qloom %.0f MB/s (%.3f s, incl. listing, HEADs, sha256, "
              "fsync), curl %.0f MB/s (%.3f s); qloom/curl = %.2f\n",
              static_cast<unsigned long long>(kBytes >> 20), q, qloom_s, c, curl_s, q / c);
  RecordProperty("qloom_mb_s", std::to_string(q));
  RecordProperty("curl_mb_s", std::to_string(c));
}

TEST(HubResolve, ALocalDirectoryAlwaysWins) {
  TempDir t("hublocal");
  t.mkdir("demo/stories");
  const fs::path old = fs::current_path();
  fs::current_path(t.path());
  EXPECT_EQ(io::resolve_model_path("demo/stories"), fs::path("demo/stories"));
  fs::current_path(old);
}

// A missing path is reported as one, never sent to the hub as an id.
TEST_F(HubServerTest, AMissingLocalPathSaysNoSuchDirectoryAndAsksNoHub) {
  HubTestServer srv;
  EnvGuard env;
  env.set("HF_ENDPOINT", srv.endpoint().c_str());
  env.set("HF_HUB_CACHE", (cache_ / "hub").c_str());
  env.set("HF_HUB_OFFLINE", nullptr);
  cache_.mkdir("work/models");
  const fs::path old = fs::current_path();
  fs::current_path(cache_ / "work");
  for (const std::string& spec : std::vector<std::string>{"./no/such/dir", "/tmp/qloom-missing-x9", "~/no-such-model", "models/x",
                                 "a/b/c", "../up/x", ".hidden/x", "models/x@main", "./x.gguf"}) {
    try {
      io::resolve_model_path(spec);
      ADD_FAILURE() << spec << ": no error";
    } catch (const io::HubError& e) {
      ADD_FAILURE() << spec << ": a hub error: " << e.what();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << spec;
      const bool gguf = spec.find(".gguf") != std::string::npos;
      EXPECT_EQ(e.message(), (gguf ? "no such file: " : "no such directory: ") + spec);
    }
  }
  EXPECT_TRUE(srv.requests().empty());
  // A genuine org/name still goes to the hub (no local ./demo here).
  EXPECT_EQ(io::resolve_model_path("demo/stories").filename().string().size(), 40u);
  EXPECT_FALSE(srv.requests().empty());
  const auto e = catch_hub_error([] { io::resolve_model_path("demo/nope"); });
  EXPECT_EQ(e.failure(), HubFailure::kRepoNotFound);
  fs::current_path(old);
  EXPECT_TRUE(io::looks_like_local_path("./x"));
  EXPECT_FALSE(io::looks_like_local_path("Qwen/Qwen2.5-0.5B@refs/pr/1"));
}

}  // namespace
}  // namespace qloom
