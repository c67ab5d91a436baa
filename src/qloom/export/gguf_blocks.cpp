#include "qloom/export/gguf_blocks.h"

#include <cmath>
#include <cstring>
#include <string>

#include "qloom/core/error.h"
#include "qloom/io/gguf_dequant_blocks.h"
#include "qloom/io/gguf_quant.h"

namespace qloom::exporter {
namespace {

using quant::QDtype;
using quant::QScheme;

constexpr uint64_t kBlock = 32;

uint64_t scale_index(const quant::QuantizedTensor& qt, uint64_t row, uint64_t col) {
  switch (qt.spec.qscheme) {
    case QScheme::kPerTensor: return 0;
    case QScheme::kPerChannel: return row;
    case QScheme::kPerGroup: {
      const uint64_t g = static_cast<uint64_t>(qt.spec.group_size);
      return row * (qt.shape[1] / g) + col / g;
    }
  }
  return 0;
}

// fp16 bits of `v` (a block's d or m), counting an inexact conversion.
uint16_t to_f16(float v, const std::string& name, uint64_t& inexact) {
  const uint16_t h = io::f32_to_f16_bits(v);
  const float back = io::gguf_detail::f16_bits_to_f32(h);
  if (!std::isfinite(back))
    throw Error(ErrorKind::kUnsupported, "", name,
                "a scale of " + std::to_string(v) + " does not fit a GGUF block's fp16 scale",
                "export this tensor as F16 / BF16 (it cannot be carried)");
  if (back != v) ++inexact;
  return h;
}

void put16(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

[[noreturn]] void bad_code(const std::string& name, int code) {
  throw Error(ErrorKind::kInvalidInput, "", name, "code " + std::to_string(code) + " is outside the format's range",
              "re-export the Quark checkpoint with qloom quantize");
}

// One 32-element block of row `row` starting at column `col` into `out`.
void block_q4_0(const quant::QuantizedTensor& qt, uint64_t row, uint64_t col, uint8_t* out, const std::string& name,
                CarryStats& st) {
  const uint8_t* codes = qt.codes.data() + row * qt.shape[1] + col;
  put16(out, to_f16(qt.scales[scale_index(qt, row, col)], name, st.inexact_scale));
  for (uint64_t j = 0; j < 16; ++j) {
    const int lo = static_cast<int8_t>(codes[j]) + 8, hi = static_cast<int8_t>(codes[j + 16]) + 8;
    if (lo < 0 || lo > 15) bad_code(name, lo - 8);
    if (hi < 0 || hi > 15) bad_code(name, hi - 8);
    out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void block_q4_1(const quant::QuantizedTensor& qt, uint64_t row, uint64_t col, uint8_t* out, const std::string& name,
                CarryStats& st) {
  const uint8_t* codes = qt.codes.data() + row * qt.shape[1] + col;
  const uint64_t si = scale_index(qt, row, col);
  const float s = qt.scales[si];
  const int32_t zp = qt.zero_points.empty() ? 0 : qt.zero_points[si];
  put16(out, to_f16(s, name, st.inexact_scale));
  // -(s * zp) in float: exact whenever it fits fp16's 11 bits.
  const float m = -(s * static_cast<float>(zp));
  put16(out + 2, to_f16(m, name, st.inexact_min));
  for (uint64_t j = 0; j < 16; ++j) {
    if (codes[j] > 15) bad_code(name, codes[j]);
    if (codes[j + 16] > 15) bad_code(name, codes[j + 16]);
    out[4 + j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
  }
}

void block_q8_0(const quant::QuantizedTensor& qt, uint64_t row, uint64_t col, uint8_t* out, const std::string& name,
                CarryStats& st) {
  const uint8_t* codes = qt.codes.data() + row * qt.shape[1] + col;
  put16(out, to_f16(qt.scales[scale_index(qt, row, col)], name, st.inexact_scale));
  std::memcpy(out + 2, codes, kBlock);
}

}  // namespace

std::optional<io::GgmlType> carry_type(const quant::QuantSpec& spec, uint64_t in_features) {
  if (in_features % kBlock != 0 || spec.scale_format != quant::ScaleFormat::kFloat) return std::nullopt;
  if (spec.qscheme == QScheme::kPerGroup && (spec.group_size <= 0 || spec.group_size % kBlock != 0)) return std::nullopt;
  if (spec.dtype == QDtype::kInt4 && spec.symmetric) return io::GgmlType::kQ4_0;
  if (spec.dtype == QDtype::kUInt4) return io::GgmlType::kQ4_1;
  if (spec.dtype == QDtype::kInt8 && spec.symmetric) return io::GgmlType::kQ8_0;
  return std::nullopt;
}

std::vector<std::byte> carry_blocks(const quant::QuantizedTensor& qt, io::GgmlType type,
                                    std::span<const uint64_t> row_map, const std::string& name, CarryStats& stats) {
  if (qt.shape.size() != 2 || carry_type(qt.spec, qt.shape[1]) != type)
    throw Error(ErrorKind::kInternal, "", name, "carry_blocks called for a tensor its type cannot carry");
  const uint64_t rows = qt.shape[0], cols = qt.shape[1];
  if (!row_map.empty() && row_map.size() != rows) throw Error(ErrorKind::kInternal, "", name, "row map size");
  const uint32_t bb = io::ggml_type_info(type).block_bytes;
  std::vector<std::byte> out(rows * (cols / kBlock) * bb);
  auto* o = reinterpret_cast<uint8_t*>(out.data());
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t src = row_map.empty() ? r : row_map[r];
    for (uint64_t c = 0; c < cols; c += kBlock, o += bb) {
      if (type == io::GgmlType::kQ4_0) block_q4_0(qt, src, c, o, name, stats);
      else if (type == io::GgmlType::kQ4_1) block_q4_1(qt, src, c, o, name, stats);
      else block_q8_0(qt, src, c, o, name, stats);
      ++stats.blocks;
    }
  }
  return out;
}

std::vector<uint64_t> llama_qk_row_map(uint64_t rows, uint64_t heads) {
  if (heads == 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
    throw Error(ErrorKind::kInvalidInput, "", "", std::to_string(rows) + " rows do not split into " +
                                                      std::to_string(heads) + " heads of an even size");
  const uint64_t hd = rows / heads;
  std::vector<uint64_t> map(rows);
  for (uint64_t h = 0; h < heads; ++h)
    for (uint64_t l = 0; l < hd; ++l) map[h * hd + l] = h * hd + (l % 2) * (hd / 2) + l / 2;
  return map;
}

}  // namespace qloom::exporter
