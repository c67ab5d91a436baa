#include "qloom/validate/md5.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include <openssl/evp.h>

#include "qloom/core/error.h"
#include "qloom/io/mapped_file.h"

namespace qloom::validate {

namespace {

[[noreturn]] void md5_unavailable(const char* what) {
  throw Error(ErrorKind::kInternal, "", "MD5", std::string("OpenSSL ") + what + " failed",
              "use an OpenSSL build whose default provider offers MD5");
}

class Md5 {
 public:
  Md5() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_) md5_unavailable("EVP_MD_CTX_new");
    if (EVP_DigestInit_ex(ctx_.get(), EVP_md5(), nullptr) != 1) md5_unavailable("MD5 init");
  }
  void update(std::span<const std::byte> b) {
    if (!b.empty() && EVP_DigestUpdate(ctx_.get(), b.data(), b.size()) != 1)
      md5_unavailable("MD5 update");
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), digest, &len) != 1) md5_unavailable("MD5 final");
    static const char* kHex = "0123456789abcdef";
    std::string out;
    out.reserve(2 * len);
    for (unsigned int i = 0; i < len; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

constexpr size_t kPiece = size_t{32} << 20;

// The whole pages inside [p, p + n), as an address range; empty when none.
std::pair<uintptr_t, size_t> whole_pages(const std::byte* p, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = (a + page - 1) / page * page;
  const uintptr_t end = (a + n) / page * page;
  return end > begin ? std::pair{begin, static_cast<size_t>(end - begin)} : std::pair{begin, size_t{0}};
}

void advise(const std::byte* p, size_t n, int advice) {
  const auto [addr, len] = whole_pages(p, n);
  if (len) (void)::madvise(reinterpret_cast<void*>(addr), len, advice);  // hints only
}

}  // namespace

std::string md5_hex(std::span<const std::byte> bytes) {
  Md5 m;
  m.update(bytes);
  return m.hex();
}

std::string md5_hex_mapped(std::span<const std::byte> bytes) {
  Md5 m;
  for (size_t off = 0; off < bytes.size(); off += kPiece) {
    const size_t n = std::min(kPiece, bytes.size() - off);
    if (off + n < bytes.size())
      advise(bytes.data() + off + n, std::min(kPiece, bytes.size() - off - n), MADV_WILLNEED);
    m.update(bytes.subspan(off, n));
    // Only pages wholly inside this tensor's piece are dropped; pages shared
    // with a neighbouring tensor stay (another thread may be hashing it).
    advise(bytes.data() + off, n, MADV_DONTNEED);
  }
  return m.hex();
}

std::string md5_file_hex(const std::filesystem::path& file) {
  const io::MappedFile m = io::MappedFile::open(file);
  m.advise(io::MappedFile::Access::kSequential);
  return md5_hex_mapped(m.bytes());
}

}  // namespace qloom::validate
