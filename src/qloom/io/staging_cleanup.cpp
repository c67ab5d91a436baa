#include "qloom/io/staging_cleanup.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

constexpr int kSlots = 64;
constexpr int kMaxDepth = 16;

enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slot states");

struct Dirent64 {  // the kernel's linux_dirent64
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool dot_or_dotdot(const char* n) { return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0')); }

// Removes `name` in `dirfd` and, for a directory, everything under it, with
// async-signal-safe calls only. Symlinks are unlinked, never followed.
void remove_tree_at(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
  if (depth > kMaxDepth) return;
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (int pass = 0; pass < 4; ++pass) {  // re-read: removal while listing may skip entries
    bool any = false;
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
        off += d->d_reclen;
        if (dot_or_dotdot(d->d_name)) continue;
        any = true;
        remove_tree_at(fd, d->d_name, depth + 1);
      }
    }
    if (!any) break;
  }
  ::close(fd);
  (void)::unlinkat(dirfd, name, AT_REMOVEDIR);
}

extern "C" void qloom_staging_signal_handler(int sig) {
  const int saved = errno;
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == kLive) remove_tree_at(AT_FDCWD, s.path, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);  // pending until the handler returns, then the default action
  errno = saved;
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) continue;
      if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = qloom_staging_signal_handler;
      sigemptyset(&sa.sa_mask);
      for (int other : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, other);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool process_is_dead(long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

int register_staging_dir(const fs::path& dir) {
  const std::string p = dir.string();
  if (p.empty() || p.size() >= PATH_MAX) return -1;
  install_handlers();
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) continue;
    std::memcpy(g_slots[i].path, p.c_str(), p.size() + 1);
    g_slots[i].state.store(kLive, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_staging_dir(int slot) {
  if (slot >= 0 && slot < kSlots) g_slots[slot].state.store(kFree, std::memory_order_release);
}

long staging_name_pid(const std::string& name) {
  if (name.size() < 2 || name[0] != '.') return 0;
  for (const char* tag : {".qloom-partial-", ".qloom-old-"}) {
    const size_t at = name.rfind(tag);
    if (at == std::string::npos || at < 2) continue;  // ".<non-empty name><tag>"
    const std::string rest = name.substr(at + std::strlen(tag));
    const size_t dash = rest.find('-');
    if (dash == std::string::npos) return 0;
    const std::string pid = rest.substr(0, dash), n = rest.substr(dash + 1);
    if (!all_digits(pid) || !all_digits(n)) return 0;
    const long v = std::stol(pid);
    return v > 0 ? v : 0;
  }
  return 0;
}

std::vector<fs::path> sweep_stale_partials(const fs::path& parent) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = staging_name_pid(it->path().filename().string());
    if (pid == 0 || pid == static_cast<long>(::getpid())) continue;
    std::error_code sec;
    const auto st = it->symlink_status(sec);
    if (sec || !fs::is_directory(st)) continue;  // symlinks and files: not ours
    if (process_is_dead(pid)) stale.push_back(it->path());
  }
  std::vector<fs::path> removed;
  for (const fs::path& p : stale) {
    std::error_code rec;
    fs::remove_all(p, rec);
    if (!rec) removed.push_back(p);
  }
  return removed;
}

}  // namespace qloom::io
