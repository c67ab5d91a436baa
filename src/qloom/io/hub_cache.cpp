#include "qloom/io/hub_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "qloom/io/atomic_dir.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_names.h"

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void cache_error(const fs::path& p, const std::string& what, int err) {
  std::string msg = what;
  msg += " failed: ";
  msg += std::strerror(err);
  throw HubError(HubFailure::kCacheWrite, p.string(), "", msg,
                 "make the hub cache writable, or point HF_HUB_CACHE at a writable directory");
}

void make_dirs(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) cache_error(p, "creating the directory", ec.value());
}

// A name beside `p` no other thread or process uses.
fs::path temp_beside(const fs::path& p) {
  static std::atomic<unsigned> counter{0};
  std::string name = ".";
  name += p.filename().string();
  name += ".qloom-tmp-";
  name += std::to_string(::getpid());
  name += '-';
  name += std::to_string(counter++);
  return p.parent_path() / name;
}

// Throws when a folder between the snapshot and `file` is a symlink: the
// link would then land wherever that symlink points.
void check_no_symlinked_parent(const fs::path& snapshot, const std::string& file) {
  std::error_code ec;
  fs::path p = snapshot;
  const fs::path rel(file);
  for (auto it = rel.begin(); it != rel.end() && std::next(it) != rel.end(); ++it) {
    p /= *it;
    if (fs::is_symlink(p, ec))
      throw HubError(HubFailure::kCacheWrite, p.string(), file,
                     "a folder of the snapshot is a symlink: the file would land outside the snapshot",
                     "remove " + snapshot.string() + " and run the command again");
  }
}

}  // namespace

HubCache::HubCache(fs::path root, const HubId& id) : root_(std::move(root)) {
  std::string folder = "models--";
  folder += id.org;
  folder += "--";
  folder += id.name;
  repo_dir_ = root_ / folder;
  locks_dir_ = root_ / ".locks" / folder;
}

fs::path HubCache::blob(const std::string& etag) const { return repo_dir_ / "blobs" / etag; }
fs::path HubCache::incomplete(const std::string& etag) const {
  return repo_dir_ / "blobs" / (etag + ".incomplete");
}
fs::path HubCache::lock_file(const std::string& etag) const { return locks_dir_ / (etag + ".lock"); }
fs::path HubCache::snapshot(const std::string& commit) const {
  return repo_dir_ / "snapshots" / commit;
}
fs::path HubCache::ref_file(const std::string& revision) const {
  return repo_dir_ / "refs" / revision;
}

std::optional<std::string> HubCache::cached_commit(const std::string& revision) const {
  std::error_code ec;
  if (is_commit_hash(revision) && fs::is_directory(snapshot(revision), ec)) return revision;
  std::ifstream f(ref_file(revision));
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string commit = ss.str();
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
    commit.pop_back();
  if (!is_commit_hash(commit)) return std::nullopt;  // not ours, or tampered with: ask the hub again
  return commit;
}

void HubCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return;
  check_hub_commit(commit, repo_dir_.string(), "commit");
  if (cached_commit(revision) == commit && !is_commit_hash(revision)) return;
  const fs::path p = ref_file(revision);
  make_dirs(p.parent_path());
  try {
    write_file_atomic(p, commit);
  } catch (const Error& e) {
    throw HubError(HubFailure::kCacheWrite, p.string(), "", e.message(), e.remedy());
  }
}

void HubCache::tag_root() const {
  std::error_code ec;
  const fs::path tag = root_ / "CACHEDIR.TAG";
  if (fs::exists(tag, ec)) return;
  fs::create_directories(root_, ec);
  std::ofstream f(tag);
  f << "Signature: 8a477f597d28d172789f06886806bc55\n"
       "# This file is a cache directory tag (huggingface_hub cache, written by qloom).\n"
       "# For information about cache directory tags, see:\n"
       "#\thttps://bford.info/cachedir/\n";
}

bool HubCache::has_file(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  return fs::is_regular_file(snapshot(commit) / file, ec);
}

void HubCache::link(const std::string& commit, const std::string& file, const std::string& etag) const {
  check_hub_commit(commit, repo_dir_.string(), "commit");
  check_hub_file_name(file, repo_dir_.string());
  check_hub_etag(etag, repo_dir_.string(), file);
  const fs::path dst = snapshot(commit) / file;
  check_no_symlinked_parent(snapshot(commit), file);
  make_dirs(dst.parent_path());
  std::string target;
  for (size_t n = std::count(file.begin(), file.end(), '/') + 2; n > 0; --n) target += "../";
  target += "blobs/";
  target += etag;
  const fs::path tmp = temp_beside(dst);
  if (::symlink(target.c_str(), tmp.c_str()) != 0) cache_error(tmp, "symlink", errno);
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    cache_error(dst, "rename", err);
  }
}

HubFileLock::HubFileLock(const fs::path& p) {
  make_dirs(p.parent_path());
  fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (fd_ < 0) cache_error(p, "opening the lock file", errno);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    cache_error(p, "flock", err);
  }
}

HubFileLock::~HubFileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace qloom::io
