// qloom::Error — the one exception type the library throws for anything a user
// can cause or fix. Every error names the file at fault, the item inside it
// (tensor, JSON field, flag) when there is one, and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace qloom {

enum class ErrorKind {
  kInvalidInput,  // malformed file or value: truncated, bad JSON, unknown dtype...
  kNotFound,      // a file, tensor or directory that must exist does not
  kUnsupported,   // well-formed but outside what qloom handles (architecture, dtype op)
  kUsage,         // wrong command line / API arguments
  kIo,            // the environment failed us: disk full, permission, fsync
  kInternal,      // a bug in qloom
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  // `file`: path (or other source) at fault, may be empty.
  // `item`: tensor name, JSON field or flag inside it, may be empty.
  // `message`: what is wrong. `remedy`: what the user should do, may be empty.
  Error(ErrorKind kind, std::string file, std::string item, std::string message,
        std::string remedy = {});

  ErrorKind kind() const { return kind_; }
  const std::string& file() const { return file_; }
  const std::string& item() const { return item_; }
  const std::string& message() const { return message_; }
  const std::string& remedy() const { return remedy_; }

  // Process exit code for the CLI: 2 for anything the input or the command line
  // caused (including unreadable paths), 3 for environment failures while
  // writing (disk full), 1 for internal errors.
  int exit_code() const;

 private:
  ErrorKind kind_;
  std::string file_, item_, message_, remedy_;
};

// Shorthands that read well at throw sites.
[[noreturn]] void throw_invalid(const std::string& file, const std::string& item,
                                const std::string& message, const std::string& remedy = {});
[[noreturn]] void throw_not_found(const std::string& file, const std::string& item,
                                  const std::string& message, const std::string& remedy = {});
// Throws kIo (or kInvalidInput for EACCES/ENOENT/ENOTDIR on reads) from errno.
[[noreturn]] void throw_errno(int err, const std::string& file, const std::string& what_failed,
                              bool writing);

}  // namespace qloom
