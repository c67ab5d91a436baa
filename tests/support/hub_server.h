// HubTestServer: runs tests/io/hub_test_server.py (a stand-in for the Hugging
// Face Hub on 127.0.0.1, an ephemeral port) for one test, and stops it when
// destroyed. Requests are logged so tests can check what was fetched.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/io/hub_env.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_id.h"

namespace qloom::test {

class HubTestServer {
 public:
  // Serves the demo model as "demo/stories" plus whatever `args` add
  // (--token, --corrupt FILE, --drop-after N --drop-count K, --extra ...).
  // Throws std::runtime_error when python3 cannot start it.
  explicit HubTestServer(std::vector<std::string> args = {});
  HubTestServer(const HubTestServer&) = delete;
  HubTestServer& operator=(const HubTestServer&) = delete;
  ~HubTestServer();

  // Stops the server (SIGTERM, wait); its port then refuses connections.
  void stop();
  int port() const { return port_; }
  std::string endpoint() const;  // "http://127.0.0.1:<port>"

  // Logged requests, oldest first: {"method", "path", "range", "name"}
  // (name: the repo file a resolve or CDN request is for, else null).
  std::vector<nlohmann::json> requests() const;
  // GETs of the bytes of repo file `file` (resolve or CDN).
  size_t gets_of(const std::string& file) const;
  // Names of the repo files whose bytes were fetched (GETs), sorted, unique.
  std::vector<std::string> files_fetched() const;
  size_t cdn_gets() const;  // GETs of LFS bytes
  void clear_log() const;

  // python3 is on PATH (the server needs nothing else).
  static bool available();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::filesystem::path log_;
};

// The demo model's id on the test hub.
inline io::HubId demo_hub_id() { return *io::parse_hub_id("demo/stories"); }

// Hub settings for `endpoint` with the cache and token file inside `dir` (a
// path or a TempDir).
template <class Dir>
io::HubSettings hub_settings(const std::string& endpoint, const Dir& dir) {
  io::HubSettings s;
  s.endpoint = endpoint;
  s.cache_dir = dir / "hub";
  s.token_file = dir / "token";
  return s;
}

// The io::HubError that f() throws (a test failure when it throws none).
template <class F>
io::HubError catch_hub_error(F&& f) {
  try {
    f();
  } catch (const io::HubError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an io::HubError";
  return io::HubError(io::HubFailure::kBadResponse, "", "", "no error thrown");
}

}  // namespace qloom::test
