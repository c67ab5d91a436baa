#include "qloom/io/data_files.h"

#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>

#include "qloom/core/error.h"

// Set for this file by CMakeLists.txt: the tree the library was built from
// and in (the uninstalled fallback).
#ifndef QLOOM_SOURCE_TREE_DIR
#define QLOOM_SOURCE_TREE_DIR ""
#endif
#ifndef QLOOM_BUILD_TREE_DIR
#define QLOOM_BUILD_TREE_DIR ""
#endif

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

fs::path canonical_or_normal(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

// `p` is `dir` or lies under it.
bool inside(const fs::path& p, const fs::path& dir) {
  const fs::path rel = canonical_or_normal(p).lexically_relative(canonical_or_normal(dir));
  return !rel.empty() && *rel.begin() != "..";
}

std::string join(const std::vector<fs::path>& paths) {
  std::string s;
  for (const fs::path& p : paths) {
    if (!s.empty()) s += ", ";
    s += p.string();
  }
  return s;
}

std::mutex g_base_mutex;
fs::path g_base;  // set_bundle_base()

}  // namespace

void set_bundle_base(const fs::path& share_qloom_dir) {
  const std::lock_guard<std::mutex> lock(g_base_mutex);
  g_base = share_qloom_dir;
}

fs::path bundle_base() {
  const std::lock_guard<std::mutex> lock(g_base_mutex);
  return g_base;
}

std::vector<fs::path> bundle_roots_for(BundleKind kind, const fs::path& exe, std::string_view env_data_dir,
                                       const fs::path& build_dir, const fs::path& source_dir) {
  const char* sub = kind == BundleKind::kData ? "data" : "models";
  std::vector<fs::path> roots;
  if (kind == BundleKind::kData && !env_data_dir.empty()) roots.emplace_back(env_data_dir);
  if (!exe.empty()) roots.push_back((exe.parent_path() / ".." / "share" / "qloom" / sub).lexically_normal());
  if (!exe.empty() && !build_dir.empty() && !source_dir.empty() && inside(exe, build_dir))
    roots.push_back(source_dir / sub);
  return roots;
}

std::vector<fs::path> bundle_roots(BundleKind kind) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) exe.clear();
  const char* env = std::getenv("QLOOM_DATA_DIR");
  std::vector<fs::path> roots =
      bundle_roots_for(kind, exe, env != nullptr ? env : "", QLOOM_BUILD_TREE_DIR, QLOOM_SOURCE_TREE_DIR);
  if (const fs::path base = bundle_base(); !base.empty()) {
    const bool env_first = kind == BundleKind::kData && env != nullptr && *env != '\0';
    roots.insert(roots.begin() + (env_first ? 1 : 0), base / (kind == BundleKind::kData ? "data" : "models"));
  }
  return roots;
}

std::vector<fs::path> bundled_data_candidates(std::string_view relative) {
  std::vector<fs::path> out;
  for (const fs::path& root : bundle_roots(BundleKind::kData)) out.push_back(root / relative);
  return out;
}

std::optional<fs::path> find_bundled_data(std::string_view relative) {
  for (const fs::path& p : bundled_data_candidates(relative)) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}

fs::path require_bundled_data(std::string_view relative, std::string_view what) {
  if (auto p = find_bundled_data(relative)) return *p;
  std::string msg = "the bundled data file for ";
  msg += what;
  msg += " is missing (looked in: ";
  msg += join(bundled_data_candidates(relative));
  msg += ")";
  throw Error(ErrorKind::kNotFound, std::string(relative), "", msg,
              "reinstall qloom (cmake --install puts the data under <prefix>/share/qloom/data), pass the file with "
              "--dataset PATH, or set QLOOM_DATA_DIR to a folder holding " + std::string(relative));
}

std::optional<fs::path> find_bundled_model(std::string_view name, std::vector<fs::path>* tried) {
  for (const fs::path& root : bundle_roots(BundleKind::kModels)) {
    const fs::path p = root / name;
    if (tried != nullptr) tried->push_back(p);
    std::error_code ec;
    if (fs::is_directory(p, ec)) return p;
  }
  return std::nullopt;
}

}  // namespace qloom::io
