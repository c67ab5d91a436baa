#include "qloom/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <utility>

#include "qloom/core/error.h"

namespace qloom::io {

MappedFile MappedFile::open(const std::filesystem::path& path) {
  int fd;
  do {
    // O_NONBLOCK: opening a FIFO must not hang; it is rejected below.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_errno(errno, path.string(), "open", /*writing=*/false);

  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno(err, path.string(), "stat", false);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_invalid(path.string(), "",
                  S_ISDIR(st.st_mode) ? "is a directory, expected a file"
                                      : "is not a regular file",
                  "pass the path of a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > static_cast<uint64_t>(std::numeric_limits<size_t>::max())) {
    ::close(fd);
    throw_invalid(path.string(), "", "file is too large to map on this platform");
  }

  MappedFile mf;
  mf.path_ = path;
  mf.size_ = size;
  if (size > 0) {
    void* addr = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw_errno(err, path.string(), "mmap", false);
    }
    mf.addr_ = addr;
  }
  ::close(fd);  // the mapping keeps the file referenced
  return mf;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() noexcept {
  if (addr_ != nullptr) ::munmap(addr_, static_cast<size_t>(size_));
  addr_ = nullptr;
  size_ = 0;
}

void MappedFile::advise(Access access) const {
  if (addr_ == nullptr) return;
  int advice = MADV_NORMAL;
  if (access == Access::kSequential) advice = MADV_SEQUENTIAL;
  else if (access == Access::kRandom) advice = MADV_RANDOM;
  (void)::madvise(addr_, static_cast<size_t>(size_), advice);
}

void MappedFile::prefetch(uint64_t offset, uint64_t length) const {
  if (addr_ == nullptr || offset >= size_ || length == 0) return;
  if (length > size_ - offset) length = size_ - offset;
  // madvise wants a page-aligned start.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset - offset % page;
  (void)::madvise(static_cast<char*>(addr_) + start, static_cast<size_t>(offset + length - start),
                  MADV_WILLNEED);
}

void MappedFile::release(uint64_t offset, uint64_t length) const {
  if (addr_ == nullptr || offset >= size_ || length == 0) return;
  if (length > size_ - offset) length = size_ - offset;
  // Only whole pages inside the range: a neighbour sharing a page keeps it.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = (offset + page - 1) / page * page;
  const uint64_t end = (offset + length) / page * page;
  if (end <= start) return;
  (void)::madvise(static_cast<char*>(addr_) + start, static_cast<size_t>(end - start), MADV_DONTNEED);
}

}  // namespace qloom::io
