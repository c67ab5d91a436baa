// Writing GGUF v3 files (the layout io/gguf.h describes): typed metadata
// key/values (arrays included), tensor infos, `general.alignment` (32 unless
// set otherwise), zero padding, then the tensor data streamed one tensor at a
// time in declaration order — the writer never holds more than the header.
//
//   GgufWriter w;
//   w.add_string("general.architecture", "llama");
//   w.add_tensor("token_embd.weight", GgmlType::kQ8_0, {576, 49152});   // ggml ne order
//   w.begin(out_file);                 // header + padding, into a hidden staging file
//   w.write_tensor(bytes);             // once per tensor, exactly its nbytes
//   w.commit();                        // fsync, rename onto out_file
//
// The staging file lives in a hidden directory beside the target named as
// AtomicDir names its staging directories, so SIGINT / SIGTERM / SIGHUP and
// the next AtomicDir's sweep remove it; destroying an uncommitted writer
// removes it too. A reader sees either no file or the complete one.
// Keys and tensor names must be non-empty, valid UTF-8 and unique; `ne` has 1
// to 4 dimensions, ne[0] a multiple of the type's block size. Violations are
// kUsage naming the key / tensor; write failures are kIo naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/io/gguf.h"

namespace qloom::io {

// Value constructors (type set, payload in the matching field).
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_u64(uint64_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_string(std::string v);
GgufValue gguf_scalar(GgufValueType type, uint64_t u, int64_t i, double f);  // any numeric/bool type
// An array whose elements all have `elem_type` (checked: kUsage otherwise).
GgufValue gguf_array(GgufValueType elem_type, std::vector<GgufValue> items);
GgufValue gguf_string_array(const std::vector<std::string>& items);
GgufValue gguf_i32_array(const std::vector<int32_t>& items);
GgufValue gguf_f32_array(const std::vector<float>& items);

// Bytes a tensor of `type` with ggml dims `ne` occupies (kUsage when ne[0] is
// not a multiple of the block size).
uint64_t gguf_tensor_nbytes(GgmlType type, const std::vector<uint64_t>& ne, std::string_view name);

class GgufWriter {
 public:
  GgufWriter();
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, in file order. `general.alignment` (a u32 power of two) sets the
  // data alignment; without it the writer adds none and uses 32 (the
  // default readers assume).
  void add(std::string key, GgufValue value);
  void add_string(std::string key, std::string v) { add(std::move(key), gguf_string(std::move(v))); }
  void add_u32(std::string key, uint32_t v) { add(std::move(key), gguf_u32(v)); }
  void add_f32(std::string key, float v) { add(std::move(key), gguf_f32(v)); }
  void add_bool(std::string key, bool v) { add(std::move(key), gguf_bool(v)); }

  // Declares a tensor (before begin()); data follows in declaration order.
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne);

  // Opens the staging file and writes the header and its padding. `out_file`
  // must not be inside an existing file's path; an existing out_file is
  // replaced at commit() only when `overwrite`, else begin() refuses (kUsage).
  void begin(const std::filesystem::path& out_file, bool overwrite = false);
  // The next declared tensor's bytes, exactly its nbytes, plus padding.
  void write_tensor(std::span<const std::byte> bytes);
  // Every tensor written: flush, fsync, rename onto out_file, fsync the dir.
  void commit();

  uint32_t alignment() const;
  uint64_t tensors_declared() const;
  uint64_t bytes_written() const;  // so far, header included

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::io
