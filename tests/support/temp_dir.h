// TempDir: a fresh, empty directory for one test, removed with everything in
// it when the TempDir goes out of scope. Permissions are restored before
// removal, so tests may chmod things inside.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace qloom::test {

class TempDir {
 public:
  // Created under $TMPDIR (or /tmp) as qloom-test-<prefix>-XXXXXX.
  explicit TempDir(std::string_view prefix = "t");
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& rel) const { return path_ / rel; }

  // Writes `content` to path()/rel (parents created); returns the full path.
  std::filesystem::path write(const std::filesystem::path& rel, std::string_view content) const;
  std::filesystem::path write(const std::filesystem::path& rel,
                              const std::vector<uint8_t>& content) const;
  // Creates path()/rel as a directory (parents too); returns the full path.
  std::filesystem::path mkdir(const std::filesystem::path& rel) const;

 private:
  std::filesystem::path path_;
};

// Reads a whole file into a string (empty when it cannot be read).
std::string read_file(const std::filesystem::path& p);

// True when the process can read files whatever their mode (root, or
// CAP_DAC_OVERRIDE): tests of permission errors skip themselves then.
bool permissions_are_bypassed();

}  // namespace qloom::test
