#include "qloom/core/error.h"

#include <cerrno>
#include <cstring>

namespace qloom {
namespace {

std::string format_what(const std::string& file, const std::string& item,
                        const std::string& message, const std::string& remedy) {
  std::string out;
  if (!file.empty()) out += file + ": ";
  if (!item.empty()) out += item + ": ";
  out += message;
  if (!remedy.empty()) out += " — " + remedy;
  return out;
}

}  // namespace

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput: return "invalid input";
    case ErrorKind::kNotFound: return "not found";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

Error::Error(ErrorKind kind, std::string file, std::string item, std::string message,
             std::string remedy)
    : std::runtime_error(format_what(file, item, message, remedy)),
      kind_(kind),
      file_(std::move(file)),
      item_(std::move(item)),
      message_(std::move(message)),
      remedy_(std::move(remedy)) {}

int Error::exit_code() const {
  switch (kind_) {
    case ErrorKind::kInternal: return 1;
    case ErrorKind::kIo: return 3;
    default: return 2;
  }
}

void throw_invalid(const std::string& file, const std::string& item, const std::string& message,
                   const std::string& remedy) {
  throw Error(ErrorKind::kInvalidInput, file, item, message, remedy);
}

void throw_not_found(const std::string& file, const std::string& item,
                     const std::string& message, const std::string& remedy) {
  throw Error(ErrorKind::kNotFound, file, item, message, remedy);
}

void throw_errno(int err, const std::string& file, const std::string& what_failed, bool writing) {
  std::string msg = what_failed + " failed: " + std::strerror(err);
  if (writing) {
    std::string remedy;
    if (err == ENOSPC || err == EDQUOT) remedy = "free disk space or choose another output directory";
    else if (err == EACCES || err == EPERM || err == EROFS) remedy = "choose a writable output directory";
    throw Error(ErrorKind::kIo, file, "", msg, remedy);
  }
  if (err == ENOENT || err == ENOTDIR)
    throw Error(ErrorKind::kNotFound, file, "", msg, "check the path");
  if (err == EACCES || err == EPERM)
    throw Error(ErrorKind::kInvalidInput, file, "", msg, "make the path readable by this user");
  throw Error(ErrorKind::kInvalidInput, file, "", msg, "check that the path is a readable file");
}

}  // namespace qloom
