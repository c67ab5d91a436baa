#include "support/running_server.h"

#include <utility>

namespace qloom::test {
namespace {

serve::ServerOptions with_port0(serve::ServerOptions o) {
  o.port = 0;
  o.threads = 1;
  return o;
}

}  // namespace

RunningServer::RunningServer(const std::filesystem::path& dir, serve::ServerOptions opt)
    : server_(dir, with_port0(std::move(opt))) {
  port_ = server_.bind();
  thread_ = std::thread([this] { server_.run(); });
}

RunningServer::~RunningServer() {
  server_.stop();
  thread_.join();
}

}  // namespace qloom::test
