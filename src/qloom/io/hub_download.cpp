#include "qloom/io/hub_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "qloom/core/format.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_strings.h"

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

constexpr int kAttempts = 3;

bool all_hex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The digest an etag promises: LFS sha256, git blob sha1, or none.
class Verifier {
 public:
  Verifier(const std::string& etag, std::optional<uint64_t> size) : size_(size) {
    if (etag.size() == 64 && all_hex(etag)) md_ = EVP_sha256();
    else if (etag.size() == 40 && all_hex(etag) && size) md_ = EVP_sha1(), git_ = true;
    expected_ = etag;
    reset();
  }
  void reset() {
    if (!md_) return;
    ctx_.reset(EVP_MD_CTX_new());
    EVP_DigestInit_ex(ctx_.get(), md_, nullptr);
    if (git_) {
      const std::string prefix = cat({"blob ", std::to_string(*size_), std::string_view("\0", 1)});
      EVP_DigestUpdate(ctx_.get(), prefix.data(), prefix.size());
    }
  }
  void update(const void* p, size_t n) {
    if (md_) EVP_DigestUpdate(ctx_.get(), p, n);
  }
  // "" when the digest matches (or there is none to check), else the actual hex digest.
  std::string mismatch() {
    if (!md_) return {};
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx_.get(), d, &n);
    static const char* hex = "0123456789abcdef";
    std::string got;
    for (unsigned i = 0; i < n; ++i) {
      got += hex[d[i] >> 4];
      got += hex[d[i] & 15];
    }
    return got == expected_ ? std::string() : got;
  }
  const char* name() const { return git_ ? "git sha1" : "sha256"; }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  const EVP_MD* md_ = nullptr;
  bool git_ = false;
  std::optional<uint64_t> size_;
  std::string expected_;
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void write_failure(const fs::path& p, const std::string& file, int err) {
  const bool space = err == ENOSPC || err == EDQUOT;
  throw HubError(space ? HubFailure::kDiskSpace : HubFailure::kCacheWrite, p.string(), file,
                 cat({"writing the download failed: ", std::strerror(err)}),
                 space ? "free disk space (the partial file is kept and resumed next run) or point "
                         "HF_HUB_CACHE at a larger disk"
                       : "make the hub cache writable, or point HF_HUB_CACHE elsewhere");
}

// Hashes the first `n` bytes of fd into v.
bool hash_prefix(int fd, uint64_t n, Verifier& v) {
  std::vector<char> buf(1 << 20);
  uint64_t off = 0;
  while (off < n) {
    const ssize_t got = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), n - off), off);
    if (got <= 0) return false;
    v.update(buf.data(), static_cast<size_t>(got));
    off += static_cast<uint64_t>(got);
  }
  return true;
}

// The server sent more than it announced (or, with no size announced, more
// than kMaxHubTextFileBytes): the bytes are discarded.
[[noreturn]] void too_many_bytes(const fs::path& part, const HubId& id, const HubFileMeta& meta) {
  ::unlink(part.c_str());
  const uint64_t limit = hub_download_limit(meta);
  const std::string bound = meta.size ? cat({"the ", std::to_string(limit), " bytes announced"})
                                      : cat({"the ", format_bytes(limit), " limit for a text file of unknown size"});
  throw HubError(HubFailure::kBadResponse, id.display(), meta.name,
                 cat({"the server sent more than ", bound, "; the download was discarded"}),
                 "check HF_ENDPOINT (and any proxy in between); run the command again");
}

}  // namespace

uint64_t incomplete_bytes(const HubCache& cache, const std::string& etag) {
  struct stat st {};
  return ::stat(cache.incomplete(etag).c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool fetch_blob(HttpClient& http, const HubSettings& s, const HubId& id, const HubCache& cache,
                const HubFileMeta& meta, HubProgress& progress, const std::function<bool()>& cancel) {
  const fs::path blob = cache.blob(meta.etag), part = cache.incomplete(meta.etag);
  std::error_code ec;
  if (!fs::exists(blob, ec)) {
    HubFileLock lock(cache.lock_file(meta.etag));
    if (!fs::exists(blob, ec)) {
      fs::create_directories(blob.parent_path(), ec);
      Fd fd(::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
      if (fd.get() < 0) write_failure(part, meta.name, errno);
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) write_failure(part, meta.name, errno);
      uint64_t offset = static_cast<uint64_t>(st.st_size);
      Verifier verify(meta.etag, meta.size);
      if (offset > hub_download_limit(meta) || !hash_prefix(fd.get(), offset, verify)) {
        if (::ftruncate(fd.get(), 0) != 0) write_failure(part, meta.name, errno);
        offset = 0;
        verify.reset();
      }
      progress.start(meta.name, meta.size.value_or(0), offset);
      const uint64_t limit = hub_download_limit(meta);
      int write_errno = 0;
      bool overflow = false;
      for (int attempt = 0;; ++attempt) {
        if (meta.size && offset == *meta.size && offset > 0) break;
        const uint64_t before = offset;
        const BodyStart on_start = [&](long status, const HttpResult&) {
          if (status == 200 && offset > 0) {  // the server ignored Range: start over
            if (::ftruncate(fd.get(), 0) != 0) return write_errno = errno, false;
            progress.rewind(meta.name, offset);
            offset = 0;
            verify.reset();
          }
          return true;
        };
        const BodySink sink = [&](const char* p, size_t n) {
          if (n > limit - offset) return overflow = true, false;  // never more than announced
          size_t done = 0;
          while (done < n) {
            const ssize_t w = ::pwrite(fd.get(), p + done, n - done, static_cast<off_t>(offset + done));
            if (w < 0) {
              if (errno == EINTR) continue;
              write_errno = errno;
              return false;
            }
            done += static_cast<size_t>(w);
          }
          verify.update(p, n);
          offset += n;
          progress.advance(meta.name, n);
          return true;
        };
        const HttpResult r = http.download(meta.url, offset, on_start, sink, cancel);
        if (write_errno) write_failure(part, meta.name, write_errno);
        if (overflow) too_many_bytes(part, id, meta);
        if (cancel && cancel()) {
          if (offset == 0) ::unlink(part.c_str());  // nothing worth resuming
          return false;
        }
        if (r.transport_ok && (r.status == 200 || r.status == 206)) break;
        if (r.transport_ok && r.status == 416 && before > 0 && attempt + 1 < kAttempts) {
          if (::ftruncate(fd.get(), 0) != 0) write_failure(part, meta.name, errno);
          progress.rewind(meta.name, offset);
          offset = 0;
          verify.reset();
          continue;
        }
        if (r.transport_ok || (!r.interrupted && offset == before)) throw_hub_http_error(r, s, id, meta.name);
        if (attempt + 1 < kAttempts && offset > before) continue;
        throw HubError(HubFailure::kInterrupted, id.display(), meta.name,
                       cat({"the download was interrupted after ", format_bytes(offset),
                            meta.size ? cat({" of ", format_bytes(*meta.size)}) : std::string(),
                            " (", r.error, ")"}),
                       cat({"run the command again: it resumes from ", part.string()}));
      }
      if (meta.size && offset != *meta.size) {
        ::unlink(part.c_str());
        throw HubError(HubFailure::kChecksum, id.display(), meta.name,
                       cat({"received ", std::to_string(offset), " bytes, the hub announced ",
                            std::to_string(*meta.size), "; the download was discarded"}),
                       "run the command again; if it persists the server is serving bad data");
      }
      if (const std::string got = verify.mismatch(); !got.empty()) {
        ::unlink(part.c_str());
        throw HubError(HubFailure::kChecksum, id.display(), meta.name,
                       cat({verify.name(), " of the downloaded bytes is ", got, ", the hub says ",
                            meta.etag, "; the download was discarded"}),
                       "run the command again; if it persists the server is serving bad data");
      }
      if (::fdatasync(fd.get()) != 0) write_failure(part, meta.name, errno);
      if (::rename(part.c_str(), blob.c_str()) != 0) write_failure(blob, meta.name, errno);
      progress.done(meta.name);
    }
  }
  cache.link(meta.commit, meta.name, meta.etag);
  return true;
}

}  // namespace qloom::io
