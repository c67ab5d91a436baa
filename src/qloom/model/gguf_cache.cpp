// The GGUF conversion cache (gguf_convert.h): where it lives, and its key.
//
// The key is the sha256 of the whole file (and the converter version), so a
// GGUF edited in place is never served its stale conversion. Hashing a
// multi-GB file costs seconds, so the key is remembered per file in
// <root>/index/<sha256 of the absolute path>.json with the file's size,
// mtime_ns, ctime_ns, inode, device and a sampled hash (the header's first
// MiB plus 64 slices of 64 KiB across the file); any difference, or no
// record, means a full hash. ctime cannot be set back by a user (utime sets
// mtime only), so an in-place write is always seen.
#include <sys/stat.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <ostream>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/gguf.h"
#include "qloom/model/gguf_convert.h"

namespace qloom::model {
namespace fs = std::filesystem;
namespace {

// Bumped whenever the converted output would change: part of the cache key.
constexpr const char* kConverterVersion = "qloom-gguf-convert-2";
constexpr uint64_t kHeadSample = 1u << 20, kSlice = 64u << 10, kSlices = 64, kChunk = 4u << 20;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || !EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr))
      throw Error(ErrorKind::kInternal, "", "", "sha256 init failed");
  }
  void add(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  void add(const std::string& s) { add(s.data(), s.size()); }
  std::string hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx_.get(), d, &n);
    static const char* k = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) out += k[d[i] >> 4], out += k[d[i] & 15];
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

// Adds `n` bytes of `in` from `offset` to `h`; throws on a short read.
void hash_range(std::ifstream& in, const fs::path& p, uint64_t offset, uint64_t n, Sha256& h) {
  std::vector<char> buf(static_cast<size_t>(std::min(n, kChunk)));
  in.seekg(static_cast<std::streamoff>(offset));
  while (n > 0) {
    const auto want = static_cast<std::streamsize>(std::min<uint64_t>(n, buf.size()));
    in.read(buf.data(), want);
    if (in.gcount() != want) throw_errno(EIO, p.string(), "reading (the file changed while it was hashed?)", false);
    h.add(buf.data(), static_cast<size_t>(want));
    n -= static_cast<uint64_t>(want);
  }
}

struct Stamp {
  uint64_t size = 0, mtime_ns = 0, ctime_ns = 0, inode = 0, dev = 0;
  std::string sampled;

  nlohmann::json json() const {
    return {{"size", size}, {"mtime_ns", mtime_ns}, {"ctime_ns", ctime_ns}, {"inode", inode}, {"dev", dev},
            {"sampled_sha256", sampled}};
  }
};

Stamp stamp_of(const fs::path& p, std::ifstream& in) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) throw_errno(errno, p.string(), "stat", false);
  Stamp s;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = uint64_t(st.st_mtim.tv_sec) * 1000000000u + uint64_t(st.st_mtim.tv_nsec);
  s.ctime_ns = uint64_t(st.st_ctim.tv_sec) * 1000000000u + uint64_t(st.st_ctim.tv_nsec);
  s.inode = st.st_ino;
  s.dev = st.st_dev;
  Sha256 h;
  h.add(std::to_string(s.size));
  hash_range(in, p, 0, std::min(s.size, kHeadSample), h);
  if (s.size > kSlice)
    for (uint64_t i = 0; i < kSlices; ++i) hash_range(in, p, (s.size - kSlice) / (kSlices - 1) * i, kSlice, h);
  s.sampled = h.hex();
  return s;
}

std::string full_key(const fs::path& p, std::ifstream& in, uint64_t size) {
  Sha256 h;
  hash_range(in, p, 0, size, h);
  h.add("\n");
  h.add(kConverterVersion);
  return h.hex();
}

fs::path index_file(const fs::path& gguf) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(gguf), ec);
  if (ec) abs = fs::absolute(gguf);
  Sha256 h;
  h.add(abs.string());
  return gguf_cache_root() / "index" / (h.hex() + ".json");
}

// The key the index remembers for this exact stamp, or "".
std::string remembered_key(const fs::path& index, const Stamp& now) {
  std::ifstream f(index);
  if (!f) return {};
  const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("key") || !j["key"].is_string() || !j.contains("stamp") ||
      j["stamp"] != now.json())
    return {};
  const std::string key = j["key"];
  return key.size() == 64 && key.find_first_not_of("0123456789abcdef") == std::string::npos ? key : "";
}

void remember_key(const fs::path& index, const fs::path& gguf, const Stamp& s, const std::string& key) {
  try {
    fs::create_directories(index.parent_path());
    io::write_file_atomic(index, nlohmann::json{{"path", fs::absolute(gguf).string()}, {"stamp", s.json()},
                                                {"key", key}}.dump(1) + "\n");
  } catch (const std::exception&) {
    // Best effort: without the record the next use hashes the file again.
  }
}

fs::path env_path(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return {};
  const std::string s = v;
  const char* home = std::getenv("HOME");
  if (s[0] == '~' && (s.size() == 1 || s[1] == '/') && home && *home) return std::string(home) + s.substr(1);
  return s;
}

}  // namespace

fs::path gguf_cache_root() {
  if (fs::path p = env_path("QLOOM_GGUF_CACHE"); !p.empty()) return p;
  if (fs::path p = env_path("QLOOM_CACHE_DIR"); !p.empty()) return p / "gguf";
  if (fs::path p = env_path("XDG_CACHE_HOME"); !p.empty()) return p / "qloom" / "gguf";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "qloom" / "gguf";
  throw Error(ErrorKind::kUsage, "", "HOME", "no cache directory: HOME and XDG_CACHE_HOME are unset",
              "set QLOOM_GGUF_CACHE, QLOOM_CACHE_DIR or XDG_CACHE_HOME to a writable directory");
}

std::string gguf_cache_key(const fs::path& gguf, bool* hashed_whole_file) {
  std::ifstream in(gguf, std::ios::binary);
  if (!in) throw_errno(errno, gguf.string(), "opening", false);
  const Stamp s = stamp_of(gguf, in);
  const fs::path index = index_file(gguf);
  std::string key = remembered_key(index, s);
  if (hashed_whole_file) *hashed_whole_file = key.empty();
  if (!key.empty()) return key;
  key = full_key(gguf, in, s.size);
  remember_key(index, gguf, s, key);
  return key;
}

fs::path resolve_gguf_model(const fs::path& gguf, std::ostream* log) {
  (void)io::GgufFile::open(gguf);  // a clear error for a file that is no GGUF, before hashing it
  const fs::path dir = gguf_cache_root() / gguf_cache_key(gguf) / "model";
  std::error_code ec;
  if (fs::is_regular_file(dir / "config.json", ec)) {
    if (log) *log << "qloom: using the converted copy of " << gguf.string() << " at " << dir.string() << "\n";
    return dir;
  }
  if (log) *log << "qloom: converting " << gguf.string() << " to a HuggingFace bf16 copy at " << dir.string() << "\n";
  GgufConvertOptions o;
  if (log)
    o.progress = [log](const GgufConvertProgress& p) {
      if (p.index == p.total || p.index % 50 == 0)
        *log << "  [" << p.index << "/" << p.total << "] " << p.hf_name << "\n";
    };
  try {
    convert_gguf(gguf, dir, o);
  } catch (const Error& e) {
    // Another process may have published the same conversion meanwhile.
    if (fs::is_regular_file(dir / "config.json", ec)) return dir;
    throw;
  }
  return dir;
}

}  // namespace qloom::model
