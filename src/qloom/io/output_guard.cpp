#include "qloom/io/output_guard.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"

namespace qloom::io {
namespace {

namespace fs = std::filesystem;

constexpr uintmax_t kMaxConfigBytes = 16u << 20;

[[noreturn]] void refuse(const fs::path& out, const std::string& why) {
  throw Error(ErrorKind::kUsage, out.string(), "--output_dir",
              "--overwrite refuses to replace " + out.string() + ": " + why,
              "choose another --output_dir, or empty or remove the directory yourself");
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) c = fs::absolute(p).lexically_normal();
  return c.has_filename() || c == c.root_path() ? c : c.parent_path();
}

// True when `dir` is `p` or one of its ancestors (both canonical).
bool contains(const fs::path& dir, const fs::path& p) {
  const fs::path rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// A HuggingFace model config: a JSON object naming its model_type or architectures.
bool hf_config_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(p, ec)) || fs::file_size(p, ec) > kMaxConfigBytes) return false;
  std::ifstream in(p, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const auto t = j.find("model_type"), a = j.find("architectures");
  return (t != j.end() && t->is_string()) || (a != j.end() && a->is_array());
}

// "" when `dir` holds a checkpoint (see the header), else what is in the way.
std::string not_a_checkpoint(const fs::path& dir, bool top) {
  bool config = false, gguf = false, other = false;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const fs::file_status st = e.symlink_status(ec);
    if (fs::is_directory(st)) {
      if (!top || (name != "hf_format" && name != "compressed-tensors"))
        return "it holds the directory \"" + name + "\", which qloom does not write";
      if (std::string why = not_a_checkpoint(e.path(), false); !why.empty()) return name + "/: " + why;
      config = true;  // a multi-format output's subdirectory
      continue;
    }
    if (!fs::is_regular_file(st)) return "\"" + name + "\" is not a regular file";
    if (name == "config.json") config = hf_config_file(e.path());
    else if (e.path().extension() == ".gguf") gguf = true;
    else other = true;
  }
  if (ec) return "it cannot be listed (" + ec.message() + ")";
  if (config) return "";
  if (gguf && !other) return "";
  return "it is not empty and holds no model checkpoint (a config.json with model_type, or only *.gguf files)";
}

}  // namespace

void check_replaceable_output(const fs::path& out_dir) {
  const fs::path out = canonical_or_self(out_dir);
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(out_dir, ec))) return;  // nothing to replace, or not a directory
  if (out == out.root_path()) refuse(out_dir, "it is the root directory");
  if (contains(out, canonical_or_self(fs::current_path(ec))))
    refuse(out_dir, "it is or contains the current directory");
  if (const char* home = std::getenv("HOME"); home && *home && contains(out, canonical_or_self(home)))
    refuse(out_dir, "it is or contains the home directory " + std::string(home));
  if (fs::is_empty(out_dir, ec) && !ec) return;
  if (std::string why = not_a_checkpoint(out_dir, true); !why.empty()) refuse(out_dir, why);
}

}  // namespace qloom::io
