// Writing safetensors files, sharded the way HuggingFace transformers shards
// them (model-00001-of-0000N.safetensors + model.safetensors.index.json).
//
// The full tensor list is known up front, so every shard's header is fixed at
// construction and tensor bytes stream straight to disk with large writes:
// nothing is held in memory beyond one I/O buffer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qloom/core/dtype.h"

namespace qloom::io {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;  // [] is a scalar

  // Product of the shape; throws kUsage naming the tensor on overflow.
  uint64_t numel() const;
  // Storage bytes (sub-byte dtypes packed); throws kUsage naming the tensor
  // when the size overflows or is not a whole number of bytes.
  uint64_t nbytes() const;
};

struct WriterOptions {
  // A new shard starts when the next tensor would push the current shard's
  // tensor bytes above this; a larger tensor gets a shard of its own.
  uint64_t max_shard_bytes = 5'000'000'000ULL;
  // Written as "__metadata__" in every shard header (omitted when empty).
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  // File names: <base>.safetensors, or <base>-00001-of-0000N.safetensors plus
  // <base>.safetensors.index.json.
  std::string base_name = "model";
};

class SafetensorsWriter {
 public:
  // `dir` must exist (normally AtomicDir::staging()). `specs` is the write
  // order. Throws kUsage naming the tensor for an empty, repeated or
  // non-UTF-8 name, a dtype with no safetensors name (i4/u4: pack first) or a
  // size that cannot be stored. Creates no file yet.
  SafetensorsWriter(std::filesystem::path dir, std::vector<TensorSpec> specs,
                    WriterOptions opts = {});
  SafetensorsWriter(SafetensorsWriter&&) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) noexcept;
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  // Without finish(): closes the files as they are (incomplete); the
  // AtomicDir holding them then discards them.
  ~SafetensorsWriter();

  // Writes the next tensor whole. `name` must be the next spec in order and
  // `bytes` exactly its nbytes() (kUsage error naming the tensor otherwise;
  // nothing is written then).
  void write(std::string_view name, std::span<const std::byte> bytes);

  // Streaming: begin(next name), append() any number of chunks, end(). More
  // bytes than nbytes() are refused on the append that would exceed it;
  // end() refuses fewer.
  void begin(std::string_view name);
  void append(std::span<const std::byte> bytes);
  void end();

  // Checks every tensor was written, flushes and closes the shards, writes
  // the index when sharded. I/O failures throw kIo naming the file.
  void finish();

  // Every file this writer creates, relative to dir: the shards in order,
  // then the index when sharded.
  const std::vector<std::string>& files() const;
  // Just the shards, in order.
  const std::vector<std::string>& shard_files() const;
  size_t num_shards() const;
  // Shard (index into shard_files()) that spec number i goes to.
  size_t shard_of_spec(size_t i) const;
  // Sum of all tensor bytes (the index's total_size).
  uint64_t total_bytes() const;
  // Name of the tensor expected next (empty when all were written).
  std::string next_tensor() const;
  const std::filesystem::path& dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes one plain (not sharded, not atomic) safetensors file: tensors in the
// given order, each span exactly its spec's nbytes(). Handy for tests, fuzz
// seeds and small tools.
void write_safetensors_file(
    const std::filesystem::path& file,
    const std::vector<std::pair<TensorSpec, std::span<const std::byte>>>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace qloom::io
