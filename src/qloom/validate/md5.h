// MD5 of byte ranges and files (OpenSSL EVP), as lowercase hex. Used to prove
// byte identity, not for security.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace qloom::validate {

// MD5 of `bytes`; "d41d8cd98f00b204e9800998ecf8427e" for an empty span.
// Throws qloom::Error (kInternal) if OpenSSL refuses MD5 (a FIPS-only build).
std::string md5_hex(std::span<const std::byte> bytes);

// The same digest for bytes inside a read-only memory map (a tensor of a
// safetensors shard): hashed in 32 MiB pieces, asking the kernel to read the
// next piece ahead and to drop the pages of each piece once hashed, so
// hashing a multi-GB tensor streams through the file instead of keeping it
// resident. `bytes` must lie in a MAP_PRIVATE read-only mapping that nothing
// writes through (io::MappedFile's maps qualify): dropped pages are simply
// read again from the file when touched later. Thread-safe.
std::string md5_hex_mapped(std::span<const std::byte> bytes);

// MD5 of a whole file, read through a read-only memory map. Throws
// qloom::Error naming the file when it cannot be opened.
std::string md5_file_hex(const std::filesystem::path& file);

}  // namespace qloom::validate
