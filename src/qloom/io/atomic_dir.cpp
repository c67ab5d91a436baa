#include "qloom/io/atomic_dir.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/io/staging_cleanup.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace qloom::io {
namespace fs = std::filesystem;

namespace {

std::atomic<unsigned> g_counter{0};

std::string unique_suffix() {
  std::string s = std::to_string(static_cast<long>(::getpid()));
  s += '-';
  s += std::to_string(g_counter++);
  return s;
}

// ".<name>.qloom-<tag>-<pid>-<n>": hidden, next to `name`, never a finished
// output. (Built with append: gcc 12 misfires -Wrestrict on "." + string.)
std::string hidden_name(const fs::path& name, std::string_view tag) {
  std::string s = ".";
  s += name.filename().string();
  s += ".qloom-";
  s += tag;
  s += '-';
  s += unique_suffix();
  return s;
}

// Absolute, normalized, without a trailing separator.
fs::path clean_target(const fs::path& p) {
  if (p.empty())
    throw Error(ErrorKind::kUsage, "", "", "output directory path is empty",
                "pass a non-empty --output_dir");
  fs::path a = fs::absolute(p).lexically_normal();
  if (a.filename().empty()) a = a.parent_path();
  if (a.filename().empty() || a.filename() == "." || a.filename() == "..")
    throw Error(ErrorKind::kUsage, p.string(), "", "output directory has no usable name",
                "pass a directory path such as ./out/model-quantized");
  return a;
}

int open_retry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

void fsync_fd_or_throw(int fd, const fs::path& p) {
  if (::fsync(fd) != 0) {
    const int err = errno;
    // Some filesystems cannot fsync a directory; that is not a failure of ours.
    if (err != EINVAL && err != EROFS) {
      ::close(fd);
      throw_errno(err, p.string(), "fsync", /*writing=*/true);
    }
  }
}

void fsync_tree(const fs::path& dir) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) throw_errno(ec.value(), dir.string(), "listing the directory", true);
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw_errno(ec.value(), dir.string(), "listing the directory", true);
    const auto st = it->symlink_status(ec);
    if (ec) throw_errno(ec.value(), it->path().string(), "stat", true);
    if (fs::is_regular_file(st) || fs::is_directory(st)) fsync_path(it->path());
  }
  if (ec) throw_errno(ec.value(), dir.string(), "listing the directory", true);
  fsync_path(dir);
}

// rename(2) with flags where the kernel and filesystem support them. Returns
// 0 or the errno; EINVAL/ENOSYS mean "flags unsupported here".
int rename_with_flags(const fs::path& from, const fs::path& to, unsigned flags) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 28))
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) == 0) return 0;
  return errno;
#else
  (void)from;
  (void)to;
  (void)flags;
  return ENOSYS;
#endif
}

}  // namespace

void fsync_path(const fs::path& p) {
  const int fd = open_retry(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_errno(errno, p.string(), "open for fsync", true);
  fsync_fd_or_throw(fd, p);
  ::close(fd);
}

AtomicDir::AtomicDir(fs::path target, bool overwrite) : overwrite_(overwrite) {
  target_ = clean_target(target);
  parent_ = target_.parent_path();
  const std::string label = target.string();

  std::error_code ec;
  const auto st = fs::symlink_status(target_, ec);
  if (fs::exists(st)) {
    if (!overwrite)
      throw Error(ErrorKind::kUsage, label, "", "output directory already exists",
                  "choose another --output_dir or pass --overwrite");
    if (!fs::is_directory(st))
      throw Error(ErrorKind::kUsage, label, "",
                  "output path exists and is not a directory; --overwrite only replaces "
                  "directories",
                  "choose another --output_dir or remove the file yourself");
  }

  fs::create_directories(parent_, ec);
  if (ec) throw_errno(ec.value(), parent_.string(), "creating the output's parent directory", true);
  swept_ = sweep_stale_partials(parent_);  // litter of earlier runs killed by SIGKILL

  for (int attempt = 0;; ++attempt) {
    fs::path cand = parent_ / hidden_name(target_, "partial");
    if (::mkdir(cand.c_str(), 0755) == 0) {
      staging_ = std::move(cand);
      slot_ = register_staging_dir(staging_);  // removed on SIGINT / SIGTERM / SIGHUP
      break;
    }
    if (errno != EEXIST || attempt > 1000)
      throw_errno(errno, cand.string(), "creating the staging directory", true);
  }
}

AtomicDir::AtomicDir(AtomicDir&& other) noexcept
    : target_(std::move(other.target_)),
      parent_(std::move(other.parent_)),
      staging_(std::exchange(other.staging_, {})),
      swept_(std::move(other.swept_)),
      overwrite_(other.overwrite_),
      committed_(other.committed_),
      slot_(std::exchange(other.slot_, -1)) {}

AtomicDir& AtomicDir::operator=(AtomicDir&& other) noexcept {
  if (this != &other) {
    discard();
    target_ = std::move(other.target_);
    parent_ = std::move(other.parent_);
    staging_ = std::exchange(other.staging_, {});
    swept_ = std::move(other.swept_);
    overwrite_ = other.overwrite_;
    committed_ = other.committed_;
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

AtomicDir::~AtomicDir() { discard(); }

void AtomicDir::discard() noexcept {
  if (!committed_ && !staging_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
  unregister_staging_dir(std::exchange(slot_, -1));
  staging_.clear();
}

void AtomicDir::commit() {
  if (committed_)
    throw Error(ErrorKind::kInternal, target_.string(), "", "AtomicDir::commit() called twice");
  if (staging_.empty())
    throw Error(ErrorKind::kInternal, target_.string(), "", "AtomicDir used after move");

  fsync_tree(staging_);

  std::error_code ec;
  const bool target_exists = fs::exists(fs::symlink_status(target_, ec));
  if (target_exists && !overwrite_)
    throw Error(ErrorKind::kUsage, target_.string(), "",
                "output directory appeared while qloom was writing it",
                "choose another --output_dir or pass --overwrite");

  fs::path trash;  // where the replaced target ends up, removed at the end
  if (!target_exists) {
    int err = rename_with_flags(staging_, target_, RENAME_NOREPLACE);
    if (err == EINVAL || err == ENOSYS) {
      // Filesystem without renameat2 flags: plain rename (it would replace
      // only an empty directory, which we checked is absent).
      err = ::rename(staging_.c_str(), target_.c_str()) == 0 ? 0 : errno;
    }
    if (err == EEXIST || err == ENOTEMPTY)
      throw Error(ErrorKind::kUsage, target_.string(), "",
                  "output directory appeared while qloom was writing it",
                  "choose another --output_dir or pass --overwrite");
    if (err != 0) throw_errno(err, target_.string(), "renaming the staging directory", true);
  } else {
    if (!fs::is_directory(fs::symlink_status(target_, ec)))
      throw Error(ErrorKind::kUsage, target_.string(), "",
                  "output path exists and is not a directory; --overwrite only replaces "
                  "directories",
                  "choose another --output_dir or remove the file yourself");
    // Preferred: swap staging and target in one step, so target always exists.
    int err = rename_with_flags(staging_, target_, RENAME_EXCHANGE);
    if (err == 0) {
      trash = staging_;  // now holds the old target
    } else if (err == EINVAL || err == ENOSYS) {
      trash = parent_ / hidden_name(target_, "old");
      if (::rename(target_.c_str(), trash.c_str()) != 0)
        throw_errno(errno, target_.string(), "moving the old output directory aside", true);
      if (::rename(staging_.c_str(), target_.c_str()) != 0) {
        const int e2 = errno;
        (void)::rename(trash.c_str(), target_.c_str());  // put the old one back
        throw_errno(e2, target_.string(), "renaming the staging directory", true);
      }
    } else {
      throw_errno(err, target_.string(), "replacing the output directory", true);
    }
  }
  committed_ = true;
  // After the rename the recorded path is gone, or (exchange) holds the old
  // target, which is trash anyway: a signal until here removes nothing needed.
  unregister_staging_dir(std::exchange(slot_, -1));
  staging_.clear();
  fsync_path(parent_);
  if (!trash.empty()) fs::remove_all(trash, ec);  // best effort: the new target is in place
}

void write_file_atomic(const fs::path& p, std::string_view content) {
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const fs::path tmp = dir / hidden_name(p, "tmp");
  const int fd = open_retry(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno(errno, p.string(), "creating a temporary file", true);
  auto fail = [&](int err, const char* what) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_errno(err, p.string(), what, true);
  };
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(errno, "write");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) fail(errno, "fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, p.string(), "close", true);
  }
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_errno(err, p.string(), "rename", true);
  }
  fsync_path(dir);
}

}  // namespace qloom::io
