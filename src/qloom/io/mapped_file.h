// MappedFile: a read-only memory map of a whole file. Move-only; unmaps on
// destruction. Empty files are fine (bytes() is an empty span, nothing is
// mapped).
//
// The map is MAP_PRIVATE + PROT_READ: qloom never writes through it. If another
// process truncates the file while it is mapped, touching the lost pages
// raises SIGBUS; qloom does not defend against concurrent modification of its
// inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace qloom::io {

class MappedFile {
 public:
  enum class Access {
    kNormal,      // kernel default read-ahead
    kSequential,  // read once front to back (quantizing tensor after tensor)
    kRandom,      // scattered small reads (inspecting a few tensors)
  };

  // Maps `path` read-only. Throws qloom::Error via throw_errno naming the path
  // (not found, permission denied, ...), or kInvalidInput when the path is
  // not a regular file (a directory, a FIFO, a device).
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(addr_), static_cast<size_t>(size_)};
  }
  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Hints to the kernel; failures are ignored (they are only hints).
  void advise(Access access) const;
  // Asks the kernel to start reading [offset, offset+length) in the
  // background (MADV_WILLNEED). Out-of-range parts are clipped.
  void prefetch(uint64_t offset, uint64_t length) const;
  // Tells the kernel this process is done with the whole pages inside
  // [offset, offset+length) (MADV_DONTNEED): they leave its resident set and
  // are read again from the page cache if touched later. Streaming a model
  // tensor by tensor this way keeps RSS at about one tensor, not the model.
  void release(uint64_t offset, uint64_t length) const;

 private:
  void reset() noexcept;

  void* addr_ = nullptr;
  uint64_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace qloom::io
