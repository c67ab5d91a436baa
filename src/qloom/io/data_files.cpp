#include "qloom/io/data_files.h"

#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "qloom/core/error.h"

#ifndef QLOOM_BUNDLED_DATA_DIR
#define QLOOM_BUNDLED_DATA_DIR ""
#endif

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> candidates(std::string_view relative) {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("QLOOM_DATA_DIR"); env != nullptr && *env != '\0') out.push_back(fs::path(env) / relative);
  if (*QLOOM_BUNDLED_DATA_DIR != '\0') out.push_back(fs::path(QLOOM_BUNDLED_DATA_DIR) / relative);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back(exe.parent_path() / ".." / "share" / "qloom" / "data" / relative);
  return out;
}

}  // namespace

std::optional<fs::path> find_bundled_data(std::string_view relative) {
  for (const fs::path& p : candidates(relative)) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}

fs::path require_bundled_data(std::string_view relative, std::string_view what) {
  if (auto p = find_bundled_data(relative)) return *p;
  std::string tried;
  for (const fs::path& p : candidates(relative)) {
    if (!tried.empty()) tried += ", ";
    tried += p.string();
  }
  std::string msg = "the bundled data file for ";
  msg += what;
  msg += " is missing (looked in: ";
  msg += tried;
  msg += ")";
  throw Error(ErrorKind::kNotFound, std::string(relative), "", msg,
              "pass the file with --dataset PATH, or set QLOOM_DATA_DIR to a folder holding " + std::string(relative));
}

}  // namespace qloom::io
