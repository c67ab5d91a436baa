// Small formatting helpers for human-readable output (tables, progress lines).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qloom {

// 260032 -> "260,032".
std::string format_count(uint64_t n);
// Bytes with a binary-prefixed unit: 524960 -> "512.7 KiB", 1.5e9 -> "1.40 GiB".
std::string format_bytes(uint64_t n);
// A tensor shape: {576, 64} -> "[576, 64]" (compact: "[576,64]", as
// llama-quantize's progress lines print it).
std::string format_shape(const std::vector<uint64_t>& shape, bool compact = false);
// One number through a printf format: format_printf("%.4f", 0.5) -> "0.5000".
std::string format_printf(const char* printf_format, double v);
// Fixed-point with `decimals` digits: format_fixed(2.345, 1) -> "2.3".
std::string format_fixed(double v, int decimals);
// Seconds as "0.42 s", "3.1 s", "2m05s", "1h02m".
std::string format_duration(double seconds);

}  // namespace qloom
