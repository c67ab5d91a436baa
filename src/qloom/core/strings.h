// Small string helpers shared by every area (one definition, so that no file
// keeps a private copy).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace qloom {

// Line-oriented whitespace: what a text file's line or field is trimmed of.
inline constexpr std::string_view kLineSpace = " \t\r\n";
// Every byte std::isspace accepts in the C locale.
inline constexpr std::string_view kAsciiSpace = " \t\n\v\f\r";

// `s` without the leading and trailing bytes that are in `chars`.
std::string trim(std::string_view s, std::string_view chars = kLineSpace);

// `s` with A-Z lowered (std::tolower in the C locale); other bytes as they are.
std::string lower_ascii(std::string_view s);

// Decimal text of an unsigned count or offset (error messages).
inline std::string to_decimal(uint64_t v) { return std::to_string(v); }

// A hash for std::unordered_map<std::string, V, TransparentStringHash, std::equal_to<>>,
// so that lookups take a std::string_view without building a std::string.
struct TransparentStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace qloom
