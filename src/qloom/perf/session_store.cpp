#include "qloom/perf/session_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "qloom/agent/artifact_schema.h"
#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/text_file.h"

namespace qloom::perf {
namespace fs = std::filesystem;

namespace {

constexpr size_t kProgressWarnings = 50;

double seconds_since(const std::string& iso) {
  std::tm tm{};
  std::istringstream in(iso);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return 0;
  std::time_t start = timegm(&tm);
  return std::difftime(std::time(nullptr), start);
}

std::string read_pid(const fs::path& lock) {
  std::ifstream in(lock);
  std::string pid;
  std::getline(in, pid);
  return pid.empty() ? "unknown" : pid;
}

nlohmann::ordered_json parse_file(const fs::path& p) {
  try {
    return nlohmann::ordered_json::parse(io::read_text_file(p));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidInput, p.string(), "", std::string("not valid JSON: ") + e.what(),
                "restore the file or start a new session directory");
  }
}

}  // namespace

SessionStore::SessionStore(fs::path dir) : dir_(fs::absolute(std::move(dir)).lexically_normal()) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(ErrorKind::kIo, dir_.string(), "--session-dir", "cannot create: " + ec.message());
  const fs::path lock = dir_ / "orchestrator.lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw_errno(errno, lock.string(), "open", true);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error(ErrorKind::kUsage, lock.string(), "",
                  "another qloom perf orchestrates this session (pid " + read_pid(lock) + ")",
                  "wait for it (qloom perf status --session " + dir_.string() + ") or use another --session-dir");
    throw_errno(err, lock.string(), "flock", true);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0)
    throw_errno(errno, lock.string(), "write", true);
  if (fs::exists(dir_ / "progress.json")) progress_ = parse_file(dir_ / "progress.json");
}

SessionStore::~SessionStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

bool SessionStore::has_state() const { return fs::exists(dir_ / "state.json"); }

void SessionStore::load() {
  const fs::path p = dir_ / "state.json";
  state_ = parse_file(p);
  agent::require_valid_artifact("perf_state", state_, p);
}

void SessionStore::save() {
  const fs::path p = dir_ / "state.json";
  auto violations = agent::check_artifact("perf_state", state_);
  if (!violations.empty()) {
    std::string what;
    for (size_t i = 0; i < violations.size() && i < 5; ++i)
      what += (i ? "; " : "") + violations[i].path + ": " + violations[i].message;
    throw Error(ErrorKind::kInternal, p.string(), violations.front().path,
                "the state about to be written violates schemas/perf_state.schema.json: " + what,
                "this is a bug in qloom; report it with the session directory");
  }
  io::write_file_atomic(p, state_.dump(2) + "\n");
}

void SessionStore::progress(const nlohmann::ordered_json& update) {
  if (!progress_.is_object()) progress_ = nlohmann::ordered_json::object();
  const std::string now = utc_timestamp();
  if (!progress_.contains("started_at")) progress_["started_at"] = now;
  for (auto it = update.begin(); it != update.end(); ++it) progress_[it.key()] = it.value();
  if (!progress_.contains("warnings")) progress_["warnings"] = nlohmann::ordered_json::array();
  if (!progress_.contains("best_so_far")) progress_["best_so_far"] = {{"accuracy_gap", nullptr}, {"perf_gain", nullptr}};
  progress_["updated_at"] = now;
  progress_["elapsed_seconds"] = seconds_since(progress_["started_at"].get<std::string>());
  const fs::path p = dir_ / "progress.json";
  agent::require_valid_artifact("perf_progress", progress_, p);
  io::write_file_atomic(p, progress_.dump(2) + "\n");
}

void SessionStore::warn(const std::string& message) {
  if (!state_.contains("warnings")) state_["warnings"] = nlohmann::ordered_json::array();
  for (const auto& w : state_["warnings"])
    if (w == message) return;  // a resumed step repeats its warnings once only
  state_["warnings"].push_back(message);
  nlohmann::ordered_json warnings = progress_.value("warnings", nlohmann::ordered_json::array());
  warnings.push_back(message);
  while (warnings.size() > kProgressWarnings) warnings.erase(warnings.begin());
  save();
  progress({{"warnings", warnings}});
}

nlohmann::ordered_json read_session_file(const fs::path& session_dir, std::string_view name) {
  const fs::path p = session_dir / name;
  if (!fs::exists(p))
    throw Error(ErrorKind::kNotFound, p.string(), "", "no such session file",
                "check --session (a directory a qloom perf run created)");
  return parse_file(p);
}

}  // namespace qloom::perf
