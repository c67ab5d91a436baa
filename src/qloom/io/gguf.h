// Reading GGUF files (llama.cpp's model format): a strict parser of the
// header, the metadata key/values and the tensor infos (the fuzz target's
// entry point), and GgufFile, a memory-mapped file with zero-copy tensor
// bytes. Dequantization of the block formats lives in gguf_dequant.h.
//
// File layout (little-endian, GGUF version 2 and 3): magic "GGUF", uint32
// version, uint64 tensor_count, uint64 metadata_kv_count; then the metadata
// KVs (gguf string key, uint32 value type, value); then tensor_count tensor
// infos (gguf string name, uint32 n_dims <= 4, n_dims x uint64 ne, uint32
// ggml type, uint64 offset relative to the data section); then padding to
// `general.alignment` (default 32); then the data section. A gguf string is a
// uint64 byte length followed by that many bytes (UTF-8, no terminator).
// Each tensor's offset is a multiple of the alignment and its bytes lie inside
// the data section; tensors do not overlap (gaps and trailing bytes are
// allowed, as ggml pads). Metadata keys and tensor names are non-empty, valid
// UTF-8 and unique; string values are kept as their bytes, unchecked. Every
// ne[i] and their product are below 2^63 (ggml's ne is int64). A file whose
// tensors hold no bytes may end before its data section.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/io/mapped_file.h"

namespace qloom::io {

// Bounds a well-formed file never exceeds; bigger claims are corrupt files.
inline constexpr uint64_t kMaxGgufStringBytes = 1ULL << 30;   // one string
inline constexpr uint64_t kMaxGgufArrayElements = 1ULL << 28; // one array
inline constexpr uint32_t kMaxGgufDims = 4;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
// Arrays of arrays nest at most this deep (1 = an array of scalars).
inline constexpr uint32_t kMaxGgufArrayDepth = 8;
// Metadata values in one header, array elements included (a large
// tokenizer holds ~1.5M). Bounds the parser's memory (~100 bytes a value)
// whatever the counts in the file claim.
inline constexpr uint64_t kMaxGgufValues = 1ULL << 23;

// ggml tensor types, numbered as in ggml.h (the numbers are on disk).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // "F32", "Q4_K", ... as ggml names them
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  bool can_dequantize;    // gguf_dequant.h handles it
};

// nullptr for a number ggml does not define (the parser rejects those).
const GgmlTypeInfo* ggml_type_info(uint32_t type);
const GgmlTypeInfo& ggml_type_info(GgmlType type);

// Metadata value types, numbered as on disk.
enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6,
  kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars keep their on-disk type; an array holds
// elements of one type (arrays of arrays are allowed by the format and kept).
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t u = 0;       // kU8..kU64, kBool (0/1)
  int64_t i = 0;        // kI8..kI64
  double f = 0;         // kF32, kF64
  std::string s;        // kString
  GgufValueType elem_type = GgufValueType::kU8;  // kArray
  std::vector<GgufValue> array;                  // kArray

  bool is_integer() const;  // any of the eight integer types
  bool is_float() const { return type == GgufValueType::kF32 || type == GgufValueType::kF64; }
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the contiguous (fastest) dimension
  uint64_t offset = 0;       // relative to the data section
  uint64_t nbytes = 0;       // numel / block_elems * block_bytes

  uint64_t numel() const;                // product of ne (overflow-checked by the parser)
  std::vector<uint64_t> shape() const;   // row-major (PyTorch / safetensors) order: ne reversed
};

struct GgufHeader {
  uint32_t version = 0;
  std::vector<std::pair<std::string, GgufValue>> kv;  // file order; keys unique
  std::vector<GgufTensorInfo> tensors;                // file order; names unique
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;  // file offset of the data section
  uint64_t data_size = 0;    // file size - data_offset
};

// Validates and parses the header of a whole GGUF file held in `file_bytes`.
// Pure: reads only the header bytes, checks every tensor's extent against the
// file size. Every failure throws qloom::Error (kInvalidInput; kUnsupported
// for a version other than 2/3) with file = file_label, item = the metadata
// key or tensor name at fault (or the header field: "magic", "version",
// "tensor_count", ...), and a remedy. Never reads out of bounds, never
// allocates by an unchecked count, whatever the input.
GgufHeader parse_gguf_header(std::span<const std::byte> file_bytes, const std::string& file_label);

// A validated, memory-mapped GGUF file. Move-only. Thread-safe for concurrent
// reads. Opening touches only the header pages: intake can read the metadata
// of a multi-GB file without reading its tensor data.
class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::filesystem::path& path() const;
  const GgufHeader& header() const;
  uint32_t version() const { return header().version; }
  const std::vector<GgufTensorInfo>& tensors() const { return header().tensors; }

  // Metadata lookups. find() returns nullptr when absent. The typed getters
  // throw kNotFound (absent) or kInvalidInput (wrong type, out of range)
  // naming the key and the file; the *_or variants return the fallback only
  // when the key is absent (a present key of the wrong type still throws).
  // get_string (and get_string_opt) also throw kInvalidInput naming the key
  // when the value is not valid UTF-8.
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;   // any integer type, >= 0
  int64_t get_int(std::string_view key) const;     // any integer type within int64
  double get_float(std::string_view key) const;    // kF32/kF64 (integers accepted)
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::optional<std::string> get_string_opt(std::string_view key) const;
  std::optional<uint64_t> get_uint_opt(std::string_view key) const;
  std::optional<double> get_float_opt(std::string_view key) const;

  // nullptr when absent.
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // The tensor's raw bytes inside the map (no copy). `info` must come from
  // this file.
  std::span<const std::byte> tensor_bytes(const GgufTensorInfo& info) const;
  const MappedFile& mapped() const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::io
