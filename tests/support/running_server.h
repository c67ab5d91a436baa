// RunningServer: a qloom serve::Server on a free loopback port, run on its own
// thread for the lifetime of the object (stopped and joined on destruction).
// For tests that talk HTTP to `qloom serve` in-process.
#pragma once

#include <filesystem>
#include <string>
#include <thread>

#include "qloom/serve/server.h"

namespace qloom::test {

class RunningServer {
 public:
  // `opt.port` and `opt.threads` are overridden (0: a free port; 1 thread).
  RunningServer(const std::filesystem::path& dir, serve::ServerOptions opt);
  ~RunningServer();
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& name() const { return server_.model_name(); }

 private:
  serve::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace qloom::test
