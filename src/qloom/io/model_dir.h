// ModelDir: a HuggingFace model directory on disk — config.json, optional
// generation_config.json, the weights (WeightIndex) and the auxiliary files
// an exporter copies unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/io/weight_index.h"

namespace qloom::io {

// How ModelDir sorts a top-level file name (also what the hub downloader
// fetches): *.safetensors and their index; pickle checkpoints (*.bin, *.pt,
// *.pth, *.ckpt, *.pkl, *.pickle) and other frameworks' weights (*.h5,
// *.msgpack, *.gguf, *.onnx, *.ot, *.tflite, *.keras), each with their
// "*.index.json"; the tokenizer files listed at tokenizer_files().
bool is_safetensors_weight_file(std::string_view name);
bool is_pickle_weight_file(std::string_view name);
bool is_other_weight_file(std::string_view name);
bool is_tokenizer_file(std::string_view name);

class ModelDir {
 public:
  // Opens `dir`: it must be a readable directory holding config.json (a JSON
  // object); generation_config.json is parsed when present. With
  // open_weights the weights are opened and validated now; otherwise on the
  // first weights() call (intake reads the config only). Throws qloom::Error:
  // kNotFound (no such directory, no config.json), kInvalidInput (not a
  // directory, unreadable, malformed JSON naming the file and position).
  static ModelDir open(const std::filesystem::path& dir, bool open_weights = false);

  ModelDir(ModelDir&&) noexcept;
  ModelDir& operator=(ModelDir&&) noexcept;
  ModelDir(const ModelDir&) = delete;
  ModelDir& operator=(const ModelDir&) = delete;
  ~ModelDir();

  const std::filesystem::path& path() const;
  const nlohmann::json& config() const;
  const std::optional<nlohmann::json>& generation_config() const;

  // The safetensors weights; opened (and fully validated) on the first call.
  // Thread-safe. Throws what WeightIndex::open throws, on every call until
  // an open succeeds.
  const WeightIndex& weights() const;
  bool weights_opened() const;

  // Top-level regular files (symlinks followed) as bare file names relative to
  // path() (join with path() to open them), sorted. Subdirectories are not
  // listed.
  // *.safetensors and *.safetensors.index.json.
  const std::vector<std::filesystem::path>& weight_files() const;
  // tokenizer.json, tokenizer.model, tokenizer_config.json, special_tokens_map.json,
  // vocab.json, merges.txt, added_tokens.json, vocab.txt, spiece.model,
  // chat_template.jinja, chat_template.json — those present.
  const std::vector<std::filesystem::path>& tokenizer_files() const;
  // Pickle checkpoints: *.bin, *.pt, *.pth, *.ckpt, *.pkl, *.pickle and their
  // *.index.json. Listed, never read.
  const std::vector<std::filesystem::path>& pickle_weight_files() const;
  // Weights in other frameworks' formats (*.h5, *.msgpack, *.gguf, *.onnx,
  // *.ot, *.tflite, *.keras). Listed, never read, not copied.
  const std::vector<std::filesystem::path>& other_weight_files() const;
  // Every top-level file that is not a weight file of any kind: config.json,
  // generation_config.json, tokenizer files, README.md, LICENSE, ... — what an
  // exporter copies byte-identical.
  const std::vector<std::filesystem::path>& aux_files() const;
  // aux_files() minus config.json, generation_config.json and tokenizer files.
  const std::vector<std::filesystem::path>& other_files() const;

  // config["model_type"], or "" when absent / not a string.
  std::string model_type() const;
  // config["architectures"] (string entries), empty when absent.
  std::vector<std::string> architectures() const;
  // An integer config value: top level first, then "text_config" (multimodal
  // configs). nullopt when absent, not an integer, or out of int64 range.
  std::optional<int64_t> config_int(std::string_view key) const;
  // The same lookup for any JSON value; nullptr when absent.
  const nlohmann::json* config_value(std::string_view key) const;

 private:
  struct Impl;
  explicit ModelDir(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::io
