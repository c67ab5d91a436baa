// DType: every element format qloom reads, computes or writes, with a traits
// table (name, bits, kind). The bit-exact conversions live in float_codec.h;
// this header is the one place that says what formats exist.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace qloom {

enum class DType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8_E4M3,  // OCP E4M3 "FN": no inf, max 448, NaN = 0x7F / 0xFF
  kF8_E5M2,  // OCP E5M2: IEEE-like, has inf and NaN
  kF6_E2M3,  // OCP MX FP6, no inf/NaN, max 7.5
  kF6_E3M2,  // OCP MX FP6, no inf/NaN, max 28
  kF4_E2M1,  // OCP MX FP4, no inf/NaN, max 6
  kE8M0,     // OCP MX shared scale: 2^(code-127), 0xFF = NaN
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kBool,
  kI4,  // signed 4-bit integer codes (stored packed; see int4_pack.h)
  kU4,  // unsigned 4-bit integer codes
};

inline constexpr int kNumDTypes = static_cast<int>(DType::kU4) + 1;

enum class DTypeKind : uint8_t { kFloat, kSignedInt, kUnsignedInt, kBool, kScale };

struct DTypeInfo {
  DType dtype;
  std::string_view name;              // qloom's display name ("bf16", "fp8_e4m3", ...)
  std::string_view safetensors_name;  // the safetensors header string, empty if none
  int bits;                           // storage bits per element
  DTypeKind kind;
};

const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
inline int dtype_bits(DType t) { return dtype_info(t).bits; }
inline bool dtype_is_float(DType t) { return dtype_info(t).kind == DTypeKind::kFloat; }

// Parses a safetensors header dtype string ("BF16", "F8_E4M3", "F4", ...).
// Returns nullopt for unknown strings.
std::optional<DType> dtype_from_safetensors(std::string_view s);
// Parses qloom's display name or a common alias ("bfloat16", "float8_e4m3fn").
std::optional<DType> dtype_from_name(std::string_view s);

// Bytes needed to store `numel` elements packed densely (sub-byte formats pack
// LSB-first). Returns nullopt when the bit count is not a whole number of bytes
// or on overflow.
std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t numel);

}  // namespace qloom
