// WeightIndex: the safetensors weights of a HuggingFace model directory, one
// file or several shards joined by model.safetensors.index.json, validated as a
// whole and addressable by tensor name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/io/safetensors_reader.h"

namespace qloom::io {

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr const char* kSafetensorsSingleName = "model.safetensors";

class WeightIndex {
 public:
  // Finds and opens the weights of `model_dir`:
  //   1. model.safetensors.index.json when present ("weight_map": tensor ->
  //      shard file, optional "metadata"): every shard it names is opened;
  //   2. else model.safetensors;
  //   3. else the only *.safetensors file at the top level.
  // All shard headers are validated when opening. Index rules: shard names are
  // relative paths that stay inside the model directory (no absolute paths, no
  // "..", no symlink resolving outside it — except into the "blobs" folder of
  // a HuggingFace cache snapshot); every shard exists; every tensor of the
  // index is in its shard; every tensor of a shard is listed, exactly once.
  // Throws qloom::Error naming the index or shard and the tensor at fault.
  static WeightIndex open(const std::filesystem::path& model_dir);

  WeightIndex(WeightIndex&&) noexcept;
  WeightIndex& operator=(WeightIndex&&) noexcept;
  WeightIndex(const WeightIndex&) = delete;
  WeightIndex& operator=(const WeightIndex&) = delete;
  ~WeightIndex();

  // Shard file names relative to the model directory, sorted. shard(i)
  // follows the same order.
  const std::vector<std::string>& shard_files() const;
  size_t num_shards() const;
  const SafetensorsFile& shard(size_t i) const;

  // All tensor names, sorted.
  std::vector<std::string> tensor_names() const;
  size_t num_tensors() const;
  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  // Index into shard_files() of the shard holding `name`; nullopt when absent.
  std::optional<size_t> shard_of(std::string_view name) const;
  // Drops the tensor's pages from this process's resident set once it has
  // been consumed (MappedFile::release); views of it stay valid and re-read
  // from the page cache. No-op for unknown names.
  void release(std::string_view name) const;
  // Throws kNotFound naming the tensor and the model directory when absent.
  TensorView view(std::string_view name) const;

  uint64_t total_bytes() const;   // sum of tensor data bytes
  uint64_t size_on_disk() const;  // sum of shard file sizes (headers included)
  bool is_sharded() const;        // true when the index file was used

  const std::filesystem::path& dir() const;
  // The index's "metadata" object (null JSON when unsharded or absent).
  const nlohmann::json& index_metadata() const;

 private:
  struct Impl;
  explicit WeightIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::io
