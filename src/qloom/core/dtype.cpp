#include "qloom/core/dtype.h"

#include <array>

namespace qloom {
namespace {

constexpr std::array<DTypeInfo, kNumDTypes> kTable = {{
    {DType::kF64, "f64", "F64", 64, DTypeKind::kFloat},
    {DType::kF32, "f32", "F32", 32, DTypeKind::kFloat},
    {DType::kF16, "f16", "F16", 16, DTypeKind::kFloat},
    {DType::kBF16, "bf16", "BF16", 16, DTypeKind::kFloat},
    {DType::kF8_E4M3, "fp8_e4m3", "F8_E4M3", 8, DTypeKind::kFloat},
    {DType::kF8_E5M2, "fp8_e5m2", "F8_E5M2", 8, DTypeKind::kFloat},
    {DType::kF6_E2M3, "fp6_e2m3", "F6_E2M3", 6, DTypeKind::kFloat},
    {DType::kF6_E3M2, "fp6_e3m2", "F6_E3M2", 6, DTypeKind::kFloat},
    {DType::kF4_E2M1, "fp4_e2m1", "F4", 4, DTypeKind::kFloat},
    {DType::kE8M0, "e8m0", "F8_E8M0", 8, DTypeKind::kScale},
    {DType::kI8, "i8", "I8", 8, DTypeKind::kSignedInt},
    {DType::kU8, "u8", "U8", 8, DTypeKind::kUnsignedInt},
    {DType::kI16, "i16", "I16", 16, DTypeKind::kSignedInt},
    {DType::kU16, "u16", "U16", 16, DTypeKind::kUnsignedInt},
    {DType::kI32, "i32", "I32", 32, DTypeKind::kSignedInt},
    {DType::kU32, "u32", "U32", 32, DTypeKind::kUnsignedInt},
    {DType::kI64, "i64", "I64", 64, DTypeKind::kSignedInt},
    {DType::kU64, "u64", "U64", 64, DTypeKind::kUnsignedInt},
    {DType::kBool, "bool", "BOOL", 8, DTypeKind::kBool},
    {DType::kI4, "i4", "", 4, DTypeKind::kSignedInt},
    {DType::kU4, "u4", "", 4, DTypeKind::kUnsignedInt},
}};

static_assert([] {
  for (int i = 0; i < kNumDTypes; ++i)
    if (static_cast<int>(kTable[i].dtype) != i) return false;
  return true;
}(), "kTable must be in DType order");

struct Alias {
  std::string_view name;
  DType dtype;
};
constexpr Alias kAliases[] = {
    {"float64", DType::kF64},        {"float32", DType::kF32},
    {"float", DType::kF32},          {"float16", DType::kF16},
    {"half", DType::kF16},           {"bfloat16", DType::kBF16},
    {"float8_e4m3fn", DType::kF8_E4M3}, {"fp8", DType::kF8_E4M3},
    {"float8_e5m2", DType::kF8_E5M2},   {"float8_e8m0fnu", DType::kE8M0},
    {"fp4", DType::kF4_E2M1},        {"int8", DType::kI8},
    {"uint8", DType::kU8},           {"int16", DType::kI16},
    {"uint16", DType::kU16},         {"int32", DType::kI32},
    {"uint32", DType::kU32},         {"int64", DType::kI64},
    {"uint64", DType::kU64},         {"int4", DType::kI4},
    {"uint4", DType::kU4},
};

}  // namespace

const DTypeInfo& dtype_info(DType t) { return kTable[static_cast<int>(t)]; }

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  for (const auto& info : kTable)
    if (!info.safetensors_name.empty() && info.safetensors_name == s) return info.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view s) {
  for (const auto& info : kTable)
    if (info.name == s) return info.dtype;
  for (const auto& a : kAliases)
    if (a.name == s) return a.dtype;
  return dtype_from_safetensors(s);
}

std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t numel) {
  const uint64_t bits = static_cast<uint64_t>(dtype_bits(t));
  if (numel != 0 && bits > UINT64_MAX / numel) return std::nullopt;
  const uint64_t total = bits * numel;
  if (total % 8 != 0) return std::nullopt;
  return total / 8;
}

}  // namespace qloom
