// Reading safetensors files: a strict header parser (the fuzz target's entry
// point) and SafetensorsFile, a memory-mapped file with zero-copy tensor views.
//
// File layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON
// (an object starting at the first byte; may be padded with trailing JSON
// whitespace, normally spaces; never NUL bytes), then the data area. Every
// tensor entry is {"dtype": str, "shape": [uint...], "data_offsets": [b, e]}
// with offsets relative to the data area; the optional "__metadata__" entry is
// a string -> string map. The tensors must tile the data area exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/io/mapped_file.h"

namespace qloom::io {

// The most header bytes a file may claim (the same limit as the reference
// implementation): bigger claims are corrupt files, not models.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  uint64_t data_begin = 0;  // offsets relative to the data area
  uint64_t data_end = 0;

  // Product of the shape (1 for a scalar, shape []). The parser guarantees it
  // does not overflow for every TensorInfo it returns.
  uint64_t numel() const;
  uint64_t nbytes() const { return data_end - data_begin; }
};

struct SafetensorsHeader {
  uint64_t header_len = 0;            // N, the JSON byte count
  std::vector<TensorInfo> tensors;    // sorted by data_begin (ties: by name)
  std::map<std::string, std::string> metadata;
  uint64_t data_size = 0;             // file size - 8 - N

  uint64_t data_offset() const { return 8 + header_len; }  // data area start in the file
};

// Validates and parses the header of a whole safetensors file held in
// `file_bytes`. Pure: touches only the header bytes plus the file size. Every
// failure throws qloom::Error (kInvalidInput) with file = file_label, item =
// the tensor name or JSON field at fault, and a remedy. Never reads out of
// bounds, whatever the input.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes,
                                           const std::string& file_label);

// A tensor's bytes inside a mapped file (or any buffer). Nothing is copied;
// the view is valid as long as the SafetensorsFile it came from is alive.
struct TensorView {
  const TensorInfo* info = nullptr;
  std::span<const std::byte> data;

  DType dtype() const { return info->dtype; }
  const std::vector<uint64_t>& shape() const { return info->shape; }
  const std::string& name() const { return info->name; }
  uint64_t numel() const { return info->numel(); }
  uint64_t nbytes() const { return data.size(); }
};

// A validated, memory-mapped safetensors file. Move-only. Thread-safe for
// concurrent reads.
class SafetensorsFile {
 public:
  // Maps and validates the file. Throws qloom::Error naming the file.
  static SafetensorsFile open(const std::filesystem::path& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  // In file (data) order, i.e. sorted by data_begin.
  const std::vector<TensorInfo>& tensors() const;
  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }

  // `info` must come from this file's tensors()/find().
  TensorView view(const TensorInfo& info) const;
  // Throws kNotFound naming the tensor and the file when absent.
  TensorView view(std::string_view name) const;

  const std::map<std::string, std::string>& metadata() const;
  uint64_t file_size() const;
  uint64_t header_len() const;
  // Byte offset in the file where the data area starts (8 + header_len).
  uint64_t data_offset() const { return 8 + header_len(); }
  const std::filesystem::path& path() const;
  // The underlying map, e.g. for MappedFile::advise / prefetch.
  const MappedFile& mapped() const;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::io
