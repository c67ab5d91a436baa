// SHA-256 as lowercase hex, for tests that pin a golden digest (token ids,
// file bytes) or key a cache by content.
#pragma once

#include <openssl/sha.h>

#include <cstddef>
#include <cstdio>
#include <string>

namespace qloom::test {

inline std::string sha256_hex(const void* data, size_t n) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, digest);
  std::string hex;
  for (unsigned char b : digest) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

inline std::string sha256_hex(const std::string& text) { return sha256_hex(text.data(), text.size()); }

}  // namespace qloom::test
