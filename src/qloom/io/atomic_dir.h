// Publishing output directories and files atomically: a reader (or a crash)
// sees either nothing or the complete result, never a half-written model.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace qloom::io {

// Build a directory under a hidden staging name beside `target`, then publish
// it with one rename. Move-only.
//
//   AtomicDir out(target, overwrite);
//   write files under out.staging() ...
//   out.commit();   // fsync everything, rename staging -> target
//
// Destroying an AtomicDir that was not committed removes the staging
// directory (best effort). SIGINT / SIGTERM / SIGHUP remove it too
// (io/staging_cleanup.h). If the process dies otherwise (SIGKILL, a crash),
// the staging directory stays behind under its hidden name
// ".<target>.qloom-partial-<pid>-<n>" — it never looks like a finished
// model — until the next AtomicDir in the same parent directory sweeps the
// staging directories of dead pids (swept()).
class AtomicDir {
 public:
  // Refuses (kUsage, naming target) when `target` exists and !overwrite, or
  // when it exists and is not a directory. Creates missing parent directories
  // and the staging directory. Throws kIo on filesystem failures.
  explicit AtomicDir(std::filesystem::path target, bool overwrite = false);

  AtomicDir(AtomicDir&& other) noexcept;
  AtomicDir& operator=(AtomicDir&& other) noexcept;
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;
  ~AtomicDir();

  const std::filesystem::path& staging() const { return staging_; }
  const std::filesystem::path& target() const { return target_; }
  bool committed() const { return committed_; }
  // Stale staging directories of dead processes the constructor removed.
  const std::vector<std::filesystem::path>& swept() const { return swept_; }

  // fsyncs every regular file and directory under staging, then renames
  // staging to target (without overwrite the rename refuses to replace a
  // target that appeared meanwhile; with overwrite an existing target is
  // swapped out and removed), then fsyncs the parent directory. Throws
  // qloom::Error (kIo / kUsage) and leaves the staging directory for the
  // destructor to remove on failure.
  void commit();

 private:
  void discard() noexcept;

  std::filesystem::path target_;
  std::filesystem::path parent_;
  std::filesystem::path staging_;
  std::vector<std::filesystem::path> swept_;
  bool overwrite_ = false;
  bool committed_ = false;
  int slot_ = -1;  // staging_cleanup.h registration
};

// Writes `content` to `p` atomically: a hidden temporary file beside it,
// fsync, rename over `p`, fsync of the directory. Replaces an existing file.
// Throws kIo via throw_errno(..., writing=true).
void write_file_atomic(const std::filesystem::path& p, std::string_view content);

// fsync() of one file or directory; throws kIo naming `p` on failure.
void fsync_path(const std::filesystem::path& p);

}  // namespace qloom::io
