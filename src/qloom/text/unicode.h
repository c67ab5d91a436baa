// UTF-8 helpers and the Unicode facts the tokenizer needs: Rust-compatible
// whitespace, lossy UTF-8 repair (as Rust's String::from_utf8_lossy), the
// GPT-2 byte<->char table, and normalization forms / lowercasing through ICU.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace qloom::text {

// Decodes the code point starting at s[i] (s must be valid UTF-8) and
// advances i past it.
char32_t next_codepoint(std::string_view s, size_t& i);
// Byte length of the UTF-8 sequence whose lead byte is `lead` (1 for invalid).
size_t utf8_len(unsigned char lead);
void append_utf8(std::string& out, char32_t cp);
// Number of code points in valid UTF-8.
size_t count_codepoints(std::string_view s);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_whitespace(char32_t cp);
// Rust's char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(char32_t cp);
// Regex \w as the Rust regex crate defines it (Alphabetic, marks, Nd, Pc,
// join controls): Oniguruma's own \w differs (it takes e.g. superscript digits).
bool is_word_char(char32_t cp);
// That class as an Oniguruma bracket expression, and Rust's \s.
inline constexpr const char* kRustWordClass =
    "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
inline constexpr const char* kRustNotWordOrSpaceClass =
    "[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}\\p{White_Space}]";

bool is_valid_utf8(std::string_view s);
// Invalid sequences become U+FFFD, one per maximal invalid subpart, exactly as
// Rust's String::from_utf8_lossy does.
std::string lossy_utf8(std::string_view bytes);

// GPT-2 byte-level alphabet: byte -> its printable stand-in (UTF-8), and back
// (-1 for a code point that is not one of the 256 stand-ins).
const std::array<std::string, 256>& byte_level_chars();
int byte_level_byte(char32_t cp);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// Unicode normalization through ICU (libicuuc, loaded at first use). Throws
// qloom::Error kUnsupported when ICU cannot be loaded.
std::string unicode_normalize(std::string_view s, NormalForm form);
// Rust's per-char char::to_lowercase (full mappings, no context rules).
std::string unicode_lowercase(std::string_view s);

}  // namespace qloom::text
