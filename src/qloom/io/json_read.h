// Strict JSON intake for the files qloom reads (safetensors headers, shard
// indexes, config.json). Errors become qloom::Error naming the file, with the
// parser's line/column/byte position, instead of nlohmann exceptions.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qloom::io {

struct JsonReadOptions {
  // nlohmann keeps the last of two equal keys silently; with this set a
  // repeated key in any object is an error naming the key.
  bool reject_duplicate_keys = true;
  // Containers nested deeper than this are an error (guards against inputs
  // made only of brackets). The root object is depth 1.
  int max_depth = 64;
  // Remedy attached to every parse error.
  std::string remedy = "the file is corrupt; re-download or regenerate it";
};

// Returns true when `text` is well-formed UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF). On failure stores the offset of the
// first offending byte in *bad_offset when given.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

// Parses one JSON value from `text`; whitespace may follow it, nothing else.
// Throws qloom::Error (kInvalidInput) with file = file_label.
nlohmann::json parse_json_text(std::string_view text, const std::string& file_label,
                               const JsonReadOptions& opts = {});

// Reads and parses a JSON file. Missing/unreadable files throw via throw_errno.
nlohmann::json read_json_file(const std::filesystem::path& file, const JsonReadOptions& opts = {});

}  // namespace qloom::io
