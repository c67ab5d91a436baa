// Reading a whole text file (tokenizer.json, a data set, a report).
#pragma once

#include <filesystem>
#include <string>

namespace qloom::io {

// The file's bytes. Throws qloom::Error: kNotFound when it does not exist;
// otherwise from errno (throw_errno) when it cannot be opened or read.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace qloom::io
