// Small formatting helpers for human-readable output (tables, progress lines).
#pragma once

#include <cstdint>
#include <string>

namespace qloom {

// 260032 -> "260,032".
std::string format_count(uint64_t n);
// Bytes with a binary-prefixed unit: 524960 -> "512.7 KiB", 1.5e9 -> "1.40 GiB".
std::string format_bytes(uint64_t n);
// Seconds as "0.42 s", "3.1 s", "2m05s", "1h02m".
std::string format_duration(double seconds);

}  // namespace qloom
