// Internal to the Quark tensor layout code (quark_tensors.cpp packs,
// quark_unpack.cpp reads back): the validated layout of one quantized weight
// and the small helpers both halves use. Not an API: include it only from
// export/quark_*.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/core/int4_pack.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::exporter::quark_layout {

// The validated layout of one quantized weight.
struct WeightLayout {
  uint64_t out = 0, in = 0;
  DType weight_dtype = DType::kU8;
  std::vector<uint64_t> weight_shape;
  DType scale_dtype = DType::kF32;
  std::vector<uint64_t> scale_shape;
  std::optional<DType> zp_dtype;
  std::vector<uint64_t> zp_shape;
  bool transposed = false;  // per-group integer formats store [in, out]
};

// `reading`: describe a stored tensor (Quark's exporter pads an int4 output
// dimension that is not a multiple of 8; its importer cannot reload that, so
// qloom reads such files but does not write them).
WeightLayout weight_layout(const std::string& module, const std::vector<uint64_t>& shape,
                           const quant::QuantSpec& spec, DType model_dtype, bool reading = false);

// Error(kUnsupported) naming `item`.
[[noreturn]] void unsupported(const std::string& item, const std::string& msg,
                              const std::string& remedy = "exclude this layer or choose another scheme");
uint64_t numel_of(const std::vector<uint64_t>& s);
bool is_4bit_int(quant::QDtype d);
bool is_8bit_int(quant::QDtype d);
bool is_fp8(quant::QDtype d);
bool is_fp6(quant::QDtype d);
std::string role_prefix(ActivationRole r);
uint32_t get_u32(std::span<const std::byte> d, size_t i);
bool is_float_scale_dtype(DType dt);
// Element i of a little-endian F32 / BF16 / F16 buffer (0 for other dtypes).
float decode_float(std::span<const std::byte> d, DType dt, size_t i);
// Inverse of the padded 4-bit packing: [rows, cols] codes from
// [rows, ceil(cols/8)] words; the padding nibbles are dropped.
std::vector<uint8_t> unpack4_padded(const int32_t* words, size_t rows, size_t cols, bool is_signed,
                                    PackOrder order);

template <class T>
std::vector<T> transpose(const T* src, size_t rows, size_t cols) {
  std::vector<T> out(rows * cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = src[r * cols + c];
  return out;
}

}  // namespace qloom::exporter::quark_layout
