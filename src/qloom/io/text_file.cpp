#include "qloom/io/text_file.h"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

#include "qloom/core/error.h"

namespace qloom::io {

std::string read_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw_not_found(path.string(), "", "file does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_errno(errno, path.string(), "open", false);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw_errno(errno, path.string(), "read", false);
  return ss.str();
}

}  // namespace qloom::io
