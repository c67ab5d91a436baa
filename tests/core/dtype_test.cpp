// Tests of the DType traits table, name parsing and storage sizes (dtype.h).
#include "qloom/core/dtype.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

namespace qloom {
namespace {

TEST(DType, TableIsInEnumOrderWithExpectedTraits) {
  struct Row {
    DType t;
    const char* name;
    const char* st;
    int bits;
    DTypeKind kind;
  };
  const Row rows[] = {
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
  };
  ASSERT_EQ(static_cast<int>(std::size(rows)), kNumDTypes);
  for (const Row& r : rows) {
    const DTypeInfo& info = dtype_info(r.t);
    EXPECT_EQ(info.dtype, r.t);
    EXPECT_EQ(info.name, r.name);
    EXPECT_EQ(info.safetensors_name, r.st);
    EXPECT_EQ(info.bits, r.bits) << r.name;
    EXPECT_EQ(info.kind, r.kind) << r.name;
    EXPECT_EQ(dtype_name(r.t), r.name);
    EXPECT_EQ(dtype_bits(r.t), r.bits);
    EXPECT_EQ(dtype_is_float(r.t), r.kind == DTypeKind::kFloat) << r.name;
  }
}

TEST(DType, NamesAreUnique) {
  std::set<std::string> names, st;
  for (int i = 0; i < kNumDTypes; ++i) {
    const DTypeInfo& info = dtype_info(static_cast<DType>(i));
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    if (!info.safetensors_name.empty()) {
      EXPECT_TRUE(st.insert(std::string(info.safetensors_name)).second) << info.safetensors_name;
    }
  }
}

TEST(DType, SafetensorsNamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    const auto st = dtype_info(t).safetensors_name;
    if (st.empty()) continue;
    EXPECT_EQ(dtype_from_safetensors(st), t) << st;
  }
  EXPECT_EQ(dtype_from_safetensors("bf16"), std::nullopt);  // case-sensitive
  EXPECT_EQ(dtype_from_safetensors(""), std::nullopt);      // i4/u4 have no name
  EXPECT_EQ(dtype_from_safetensors("F8_E4M3FN"), std::nullopt);
  EXPECT_EQ(dtype_from_safetensors("Q4_K"), std::nullopt);
}

TEST(DType, DisplayNamesAndAliases) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_EQ(dtype_from_name("bfloat16"), DType::kBF16);
  EXPECT_EQ(dtype_from_name("float16"), DType::kF16);
  EXPECT_EQ(dtype_from_name("half"), DType::kF16);
  EXPECT_EQ(dtype_from_name("float"), DType::kF32);
  EXPECT_EQ(dtype_from_name("float32"), DType::kF32);
  EXPECT_EQ(dtype_from_name("float64"), DType::kF64);
  EXPECT_EQ(dtype_from_name("float8_e4m3fn"), DType::kF8_E4M3);
  EXPECT_EQ(dtype_from_name("fp8"), DType::kF8_E4M3);
  EXPECT_EQ(dtype_from_name("float8_e5m2"), DType::kF8_E5M2);
  EXPECT_EQ(dtype_from_name("float8_e8m0fnu"), DType::kE8M0);
  EXPECT_EQ(dtype_from_name("fp4"), DType::kF4_E2M1);
  EXPECT_EQ(dtype_from_name("int4"), DType::kI4);
  EXPECT_EQ(dtype_from_name("uint4"), DType::kU4);
  EXPECT_EQ(dtype_from_name("int64"), DType::kI64);
  EXPECT_EQ(dtype_from_name("uint8"), DType::kU8);
  // Falls back to safetensors names.
  EXPECT_EQ(dtype_from_name("BF16"), DType::kBF16);
  EXPECT_EQ(dtype_from_name("F4"), DType::kF4_E2M1);
  EXPECT_EQ(dtype_from_name("F8_E8M0"), DType::kE8M0);
  EXPECT_EQ(dtype_from_name(""), std::nullopt);
  EXPECT_EQ(dtype_from_name("int3"), std::nullopt);
  EXPECT_EQ(dtype_from_name("Bfloat16"), std::nullopt);
}

TEST(DType, StorageBytes) {
  EXPECT_EQ(dtype_storage_bytes(DType::kF32, 0), 0u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF32, 10), 40u);
  EXPECT_EQ(dtype_storage_bytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF64, 2), 16u);
  EXPECT_EQ(dtype_storage_bytes(DType::kBool, 5), 5u);
  EXPECT_EQ(dtype_storage_bytes(DType::kE8M0, 7), 7u);
  // Sub-byte: only whole bytes.
  EXPECT_EQ(dtype_storage_bytes(DType::kF4_E2M1, 2), 1u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF4_E2M1, 64), 32u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF4_E2M1, 3), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kI4, 1), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kU4, 8), 4u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF6_E2M3, 4), 3u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF6_E3M2, 32), 24u);
  EXPECT_EQ(dtype_storage_bytes(DType::kF6_E2M3, 2), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kF6_E2M3, 0), 0u);
  // Overflow of bits * numel.
  EXPECT_EQ(dtype_storage_bytes(DType::kF64, UINT64_MAX), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kF32, UINT64_MAX / 16), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kU8, UINT64_MAX / 8), UINT64_MAX / 8);
  EXPECT_EQ(dtype_storage_bytes(DType::kU8, UINT64_MAX / 8 + 1), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kF4_E2M1, UINT64_MAX / 4 - 1), (UINT64_MAX / 4 - 1) / 2);
}

}  // namespace
}  // namespace qloom
