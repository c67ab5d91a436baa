// GGUF dequantization: the plain formats, the 32-element block formats and the
// dispatch. The 256-element K-quant formats are in gguf_dequant_k.cpp. Block
// layouts (little-endian, fp16 scales):
//   Q4_0  d, qs[16]            y = d * (nibble - 8)
//   Q4_1  d, m, qs[16]         y = d * nibble + m
//   Q5_0  d, qh u32, qs[16]    y = d * ((nibble | bit << 4) - 16)
//   Q5_1  d, m, qh u32, qs[16] y = d * (nibble | bit << 4) + m
//   Q8_0  d, qs int8[32]       y = q * d
// Element j < 16 takes the low nibble of qs[j], element j >= 16 the high
// nibble of qs[j - 16]; its fifth bit is bit j of qh.
#include "qloom/io/gguf_dequant.h"

#include <cstring>
#include <string>

#include "qloom/core/error.h"
#include "qloom/io/gguf_dequant_blocks.h"

namespace qloom::io {
namespace gguf_detail {

void dequant_f32(const uint8_t* src, float* dst, uint64_t nblocks) {
  std::memcpy(dst, src, nblocks * sizeof(float));
}

void dequant_f16(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t i = 0; i < nblocks; ++i) dst[i] = f16_at(src + 2 * i);
}

void dequant_bf16(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t i = 0; i < nblocks; ++i) {
    const uint32_t h = static_cast<uint32_t>(src[2 * i] | (src[2 * i + 1] << 8));
    dst[i] = std::bit_cast<float>(h << 16);
  }
}

namespace {
// The 4-bit code of element j (0..31) of a 32-element block.
inline uint32_t nibble(const uint8_t* qs, int j) {
  return j < 16 ? (qs[j] & 0x0Fu) : (qs[j - 16] >> 4);
}
inline uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
}  // namespace

void dequant_q4_0(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 18, dst += 32) {
    const float d = f16_at(src);
    for (int j = 0; j < 32; ++j)
      dst[j] = d * static_cast<float>(static_cast<int>(nibble(src + 2, j)) - 8);
  }
}

void dequant_q4_1(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 20, dst += 32) {
    const float d = f16_at(src);
    const float m = f16_at(src + 2);
    for (int j = 0; j < 32; ++j) {
      const float dq = d * static_cast<float>(nibble(src + 4, j));
      dst[j] = dq + m;
    }
  }
}

void dequant_q5_0(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 22, dst += 32) {
    const float d = f16_at(src);
    const uint32_t qh = le32(src + 2);
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(nibble(src + 6, j) | (((qh >> j) & 1u) << 4)) - 16;
      dst[j] = d * static_cast<float>(q);
    }
  }
}

void dequant_q5_1(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 24, dst += 32) {
    const float d = f16_at(src);
    const float m = f16_at(src + 2);
    const uint32_t qh = le32(src + 4);
    for (int j = 0; j < 32; ++j) {
      const uint32_t q = nibble(src + 8, j) | (((qh >> j) & 1u) << 4);
      const float dq = d * static_cast<float>(q);
      dst[j] = dq + m;
    }
  }
}

void dequant_q8_0(const uint8_t* src, float* dst, uint64_t nblocks) {
  for (uint64_t b = 0; b < nblocks; ++b, src += 34, dst += 32) {
    const float d = f16_at(src);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
  }
}

}  // namespace gguf_detail

namespace {

using RowFn = void (*)(const uint8_t*, float*, uint64_t);

RowFn row_decoder(GgmlType type) {
  using namespace gguf_detail;
  switch (type) {
    case GgmlType::kF32: return dequant_f32;
    case GgmlType::kF16: return dequant_f16;
    case GgmlType::kBF16: return dequant_bf16;
    case GgmlType::kQ4_0: return dequant_q4_0;
    case GgmlType::kQ4_1: return dequant_q4_1;
    case GgmlType::kQ5_0: return dequant_q5_0;
    case GgmlType::kQ5_1: return dequant_q5_1;
    case GgmlType::kQ8_0: return dequant_q8_0;
    case GgmlType::kQ2_K: return dequant_q2_k;
    case GgmlType::kQ3_K: return dequant_q3_k;
    case GgmlType::kQ4_K: return dequant_q4_k;
    case GgmlType::kQ5_K: return dequant_q5_k;
    case GgmlType::kQ6_K: return dequant_q6_k;
    default: return nullptr;
  }
}

std::string supported_list() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
}

void dequantize_checked(GgmlType type, std::span<const std::byte> src, std::span<float> dst,
                        const std::string& file, const std::string& item) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  const RowFn fn = row_decoder(type);
  if (fn == nullptr)
    throw Error(ErrorKind::kUnsupported, file, item,
                "qloom cannot dequantize ggml type " + std::string(info.name),
                "qloom decodes " + supported_list() +
                    "; re-quantize the model to one of them with llama.cpp's llama-quantize");
  const uint64_t n = dst.size();
  if (n % info.block_elems != 0)
    throw Error(ErrorKind::kUsage, file, item,
                std::to_string(n) + " elements are not a whole number of " +
                    std::string(info.name) + " blocks of " + std::to_string(info.block_elems));
  const uint64_t blocks = n / info.block_elems;
  if (src.size() / info.block_bytes != blocks || src.size() % info.block_bytes != 0)
    throw Error(ErrorKind::kUsage, file, item,
                std::to_string(src.size()) + " bytes given for " + std::to_string(n) + " " +
                    std::string(info.name) + " elements, which take " +
                    std::to_string(blocks * info.block_bytes) + " bytes");
  if (blocks == 0) return;
  fn(reinterpret_cast<const uint8_t*>(src.data()), dst.data(), blocks);
}

}  // namespace

void gguf_dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  dequantize_checked(type, src, dst, "", std::string(ggml_type_info(type).name));
}

std::vector<float> gguf_dequantize_tensor(const GgufFile& file, const GgufTensorInfo& info) {
  const auto bytes = file.tensor_bytes(info);
  if (row_decoder(info.type) == nullptr)  // before allocating the output
    dequantize_checked(info.type, bytes, {}, file.path().string(), info.name);
  std::vector<float> out(static_cast<size_t>(info.numel()));
  dequantize_checked(info.type, bytes, out, file.path().string(), info.name);
  return out;
}

}  // namespace qloom::io
