#include "real/artifact_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "real/real_model.h"
#include "support/sha256.h"
#include "support/subprocess.h"

namespace qloom::test {
namespace fs = std::filesystem;
namespace {

fs::path artifacts_dir() { return fs::path(QLOOM_BINARY_DIR) / "real" / "artifacts"; }

// The qloom binary as built: a rebuild changes its size or mtime.
std::string binary_identity() {
  const fs::path cli(QLOOM_CLI_PATH);
  std::error_code ec;
  const auto size = fs::file_size(cli, ec);
  const auto mtime = fs::last_write_time(cli, ec).time_since_epoch().count();
  return cli.string() + "|" + std::to_string(size) + "|" + std::to_string(mtime);
}

// An exclusive flock on `path` for the object's lifetime.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// The artifacts of this build of qloom: artifacts/<binary id>/. The first
// call of a process removes those of earlier builds (a SmolLM2 checkpoint is
// ~100 MB, so stale sets would pile up with every rebuild).
fs::path cache_root() {
  static const fs::path root = [] {
    const std::string id = sha256_hex(binary_identity()).substr(0, 16);
    fs::create_directories(artifacts_dir());
    FileLock lock(artifacts_dir() / "prune.lock");
    for (const auto& e : fs::directory_iterator(artifacts_dir())) {
      const auto name = e.path().filename();
      if (name != id && name != "prune.lock") fs::remove_all(e.path());
    }
    fs::create_directories(artifacts_dir() / id);
    return artifacts_dir() / id;
  }();
  return root;
}

// The key inside this build's set (cache_root() already stands for the
// binary): a hex SHA-256 of `kind` and every argument.
std::string artifact_key(const std::string& kind, const std::vector<std::string>& args) {
  std::string text = "qloom-real-artifact-v1\n" + kind;
  for (const auto& a : args) text += "\n" + a;
  return sha256_hex(text).substr(0, 24);
}

}  // namespace

fs::path cached_artifact(const std::string& kind, const std::vector<std::string>& args,
                         const std::function<bool(const fs::path&)>& fill) {
  const std::string key = artifact_key(kind, args);
  const fs::path dir = cache_root() / key;
  FileLock lock(cache_root() / (key + ".lock"));
  if (fs::is_directory(dir)) return dir;
  const fs::path tmp = cache_root() / (key + ".tmp");
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  if (!fill(tmp)) {
    fs::remove_all(tmp);
    return {};
  }
  fs::rename(tmp, dir);
  return dir;
}

fs::path shared_checkpoint(const std::vector<std::string>& quantize_args) {
  const fs::path dir = cached_artifact("quantize", quantize_args, [&](const fs::path& tmp) {
    std::vector<std::string> q = {"quantize", "--model_dir", real_model_dir().string(), "--output_dir",
                                  (tmp / "q").string()};
    q.insert(q.end(), quantize_args.begin(), quantize_args.end());
    const CommandResult r = run_qloom(q);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0;
  });
  return dir.empty() ? dir : dir / "q";
}

fs::path shared_file(const std::string& name, const std::string& content) {
  const fs::path dir = cached_artifact("file", {name, content}, [&](const fs::path& tmp) {
    std::ofstream(tmp / name) << content;
    return true;
  });
  return dir / name;
}

nlohmann::json shared_json(const std::vector<std::string>& args) {
  const fs::path dir = cached_artifact("json", args, [&](const fs::path& tmp) {
    std::vector<std::string> a = args;
    a.push_back("--json");
    a.push_back((tmp / "result.json").string());
    const CommandResult r = run_qloom(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0;
  });
  if (dir.empty()) return nullptr;
  return read_json_file(dir / "result.json");
}

}  // namespace qloom::test
