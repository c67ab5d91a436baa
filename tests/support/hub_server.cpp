#include "support/hub_server.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>

extern char** environ;

namespace qloom::test {
namespace {

std::filesystem::path script() {
  return std::filesystem::path(QLOOM_SOURCE_DIR) / "tests" / "io" / "hub_test_server.py";
}

// The interpreter behind "python3", looked up once: version-manager shims
// (pyenv) cost a second per start, the interpreter itself a few milliseconds.
const std::string& python() {
  static const std::string path = [] {
    std::string out;
    if (FILE* p = ::popen("python3 -c 'import sys; print(sys.executable)' 2>/dev/null", "r")) {
      char buf[4096];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }();
  return path;
}

}  // namespace

bool HubTestServer::available() { return !python().empty(); }

HubTestServer::HubTestServer(std::vector<std::string> args) {
  static int counter = 0;
  log_ = std::filesystem::temp_directory_path() /
         ("qloom-hub-server-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".log");
  std::filesystem::remove(log_);
  if (!available()) throw std::runtime_error("python3 not found");
  std::vector<std::string> argv{python(), script().string(), "--repo",
                                std::string("demo/stories=") + QLOOM_DEMO_MODEL_DIR, "--log",
                                log_.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  const int rc = ::posix_spawn(&pid_, python().c_str(), &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    pid_ = -1;
    throw std::runtime_error("cannot start python3");
  }
  // Wait (10 s at most) for "PORT <n>\n".
  std::string line;
  pollfd p{out[0], POLLIN, 0};
  while (line.find('\n') == std::string::npos && ::poll(&p, 1, 10000) > 0) {
    char buf[64];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (line.rfind("PORT ", 0) != 0) {
    stop();
    throw std::runtime_error("the hub test server did not start: '" + line + "'");
  }
  port_ = std::atoi(line.c_str() + 5);
}

HubTestServer::~HubTestServer() {
  stop();
  std::error_code ec;
  std::filesystem::remove(log_, ec);
}

void HubTestServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string HubTestServer::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::vector<nlohmann::json> HubTestServer::requests() const {
  std::vector<nlohmann::json> out;
  std::ifstream f(log_);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

size_t HubTestServer::gets_of(const std::string& file) const {
  size_t n = 0;
  for (const auto& r : requests())
    if (r["method"] == "GET" && r["name"].is_string() && r["name"] == file) ++n;
  return n;
}

std::vector<std::string> HubTestServer::files_fetched() const {
  std::set<std::string> names;
  for (const auto& r : requests())
    if (r["method"] == "GET" && r["name"].is_string()) names.insert(r["name"].get<std::string>());
  return {names.begin(), names.end()};
}

size_t HubTestServer::cdn_gets() const {
  size_t n = 0;
  for (const auto& r : requests())
    if (r["method"] == "GET" && r["path"].get<std::string>().rfind("/cdn/", 0) == 0) ++n;
  return n;
}

void HubTestServer::clear_log() const {
  std::error_code ec;
  std::filesystem::remove(log_, ec);
}

}  // namespace qloom::test
