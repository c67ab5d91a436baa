#include "support/temp_dir.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace qloom::test {
namespace fs = std::filesystem;

namespace {

void make_writable_recursive(const fs::path& p) {
  std::error_code ec;
  fs::permissions(p, fs::perms::owner_all, fs::perm_options::add, ec);
  if (fs::is_directory(fs::symlink_status(p, ec))) {
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
      make_writable_recursive(it->path());
  }
}

}  // namespace

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  fs::path root = (base && *base) ? fs::path(base) : fs::path("/tmp");
  std::string tmpl = (root / ("qloom-test-" + std::string(prefix) + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
  path_ = tmpl;
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

TempDir::~TempDir() {
  if (path_.empty()) return;
  make_writable_recursive(path_);
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path TempDir::write(const fs::path& rel, std::string_view content) const {
  const fs::path p = path_ / rel;
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
  return p;
}

fs::path TempDir::write(const fs::path& rel, const std::vector<uint8_t>& content) const {
  return write(rel, std::string_view(reinterpret_cast<const char*>(content.data()), content.size()));
}

fs::path TempDir::mkdir(const fs::path& rel) const {
  const fs::path p = path_ / rel;
  fs::create_directories(p);
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

bool permissions_are_bypassed() {
  if (::geteuid() == 0) return true;
  // Non-root with CAP_DAC_OVERRIDE: probe with an unreadable file.
  TempDir d("perm-probe");
  const fs::path f = d.write("probe", "x");
  ::chmod(f.c_str(), 0);
  const bool readable = ::access(f.c_str(), R_OK) == 0;
  ::chmod(f.c_str(), 0600);
  return readable;
}

}  // namespace qloom::test
