// HubCache: one model repo's folder in the huggingface_hub cache, laid out
// exactly as huggingface_hub lays it out, so either tool reuses the other's
// downloads:
//   <root>/models--<org>--<name>/blobs/<etag>            file contents
//   <root>/models--<org>--<name>/blobs/<etag>.incomplete  a download in progress
//   <root>/models--<org>--<name>/refs/<revision>          the commit hash, no newline
//   <root>/models--<org>--<name>/snapshots/<commit>/<file> -> ../../blobs/<etag>
//   <root>/.locks/models--<org>--<name>/<etag>.lock       flock()ed while downloading
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "qloom/io/hub_id.h"

namespace qloom::io {

class HubCache {
 public:
  HubCache(std::filesystem::path root, const HubId& id);

  const std::filesystem::path& root() const { return root_; }
  const std::filesystem::path& repo_dir() const { return repo_dir_; }
  std::filesystem::path blob(const std::string& etag) const;
  std::filesystem::path incomplete(const std::string& etag) const;
  std::filesystem::path lock_file(const std::string& etag) const;
  std::filesystem::path snapshot(const std::string& commit) const;
  std::filesystem::path ref_file(const std::string& revision) const;

  // The commit recorded for `revision`: the revision itself when it is a
  // commit hash with a snapshot folder, else the content of refs/<revision>.
  // nullopt when neither is cached.
  std::optional<std::string> cached_commit(const std::string& revision) const;

  // Records revision -> commit in refs/ (atomic replace; nothing written when
  // revision is the commit itself or the ref already says so). Throws
  // HubError(kCacheWrite).
  void write_ref(const std::string& revision, const std::string& commit) const;

  // Creates <root>/CACHEDIR.TAG (the cache directory tagging standard, as
  // huggingface_hub does) when missing, so backup tools skip the cache. Best effort.
  void tag_root() const;

  // True when snapshots/<commit>/<file> exists and resolves to a regular file
  // (a dangling link, i.e. a missing blob, is false).
  bool has_file(const std::string& commit, const std::string& file) const;

  // Points snapshots/<commit>/<file> at blobs/<etag> with a relative symlink
  // ("../../blobs/<etag>", one more "../" per '/' in file), replacing what is
  // there atomically. Throws HubError(kCacheWrite).
  void link(const std::string& commit, const std::string& file, const std::string& etag) const;

 private:
  std::filesystem::path root_, repo_dir_, locks_dir_;
};

// Holds an exclusive flock() on a lock file (created with its parents) for
// its lifetime; the same locking huggingface_hub's filelock uses, so the two
// never write one blob at once. Throws HubError(kCacheWrite).
class HubFileLock {
 public:
  explicit HubFileLock(const std::filesystem::path& p);
  HubFileLock(const HubFileLock&) = delete;
  HubFileLock& operator=(const HubFileLock&) = delete;
  ~HubFileLock();

 private:
  int fd_ = -1;
};

}  // namespace qloom::io
