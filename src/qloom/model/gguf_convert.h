// GGUF -> HuggingFace model directory (`qloom convert`): config.json and
// generation_config.json (gguf_config.h), tokenizer.json +
// tokenizer_config.json (+ chat_template.jinja) (gguf_tokenizer.h), and the
// weights as safetensors: each tensor dequantized (io/gguf_dequant.h), its
// Q/K rows put back in HF order (gguf_tensors.h), rounded to bf16 (or kept
// f32). One tensor in memory at a time; everything is written into a hidden
// staging directory and renamed into place when complete (io/atomic_dir.h).
//
// Also the `.gguf`-wherever-a-model-dir-is resolver: a converted copy in a
// content-keyed cache, made once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"

namespace qloom::model {

struct GgufConvertProgress {
  size_t index = 0, total = 0;  // 1-based tensor number
  std::string gguf_name, hf_name, type_in, shape;
  double seconds = 0;           // since the start
};
using GgufProgressFn = std::function<void(const GgufConvertProgress&)>;

struct GgufConvertOptions {
  DType dtype = DType::kBF16;  // kBF16 or kF32
  GgufProgressFn progress;     // per tensor; may be empty
};

struct GgufConvertSummary {
  std::filesystem::path output_dir;
  std::string architecture, model_type;
  size_t tensors = 0;
  std::map<std::string, size_t> types_in;  // ggml type name -> tensor count
  uint64_t bytes_in = 0, bytes_out = 0;    // tensor data read / written
  double seconds = 0;
};

// Throws kUsage when output_dir exists and is not an empty directory, or is
// the GGUF's own directory; what the parts throw otherwise.
GgufConvertSummary convert_gguf(const std::filesystem::path& gguf, const std::filesystem::path& output_dir,
                                const GgufConvertOptions& opts = {});

// True for an existing regular file whose name ends in ".gguf".
bool is_gguf_file(const std::filesystem::path& p);

// config.json of a GGUF built in memory from its metadata (no tensor data read).
nlohmann::json gguf_config_json(const std::filesystem::path& gguf);

// The cache root: $QLOOM_GGUF_CACHE, else $QLOOM_CACHE_DIR/gguf, else
// $XDG_CACHE_HOME/qloom/gguf, else $HOME/.cache/qloom/gguf ("~/" expanded).
std::filesystem::path gguf_cache_root();

// The cache key of `gguf`: the sha256 of its whole content and the converter
// version. Remembered per path with the file's size, mtime, ctime, inode,
// device and a sampled hash (gguf_cache.cpp); when all still match, the
// remembered key is returned without reading the whole file, else the file
// is hashed again (*hashed_whole_file says which, when given).
std::string gguf_cache_key(const std::filesystem::path& gguf, bool* hashed_whole_file = nullptr);

// The converted (bf16) copy of `gguf` under gguf_cache_root()/<key>/model:
// converted on the first call (atomically; progress lines on `log` when
// given), reused after while the file's content is unchanged.
std::filesystem::path resolve_gguf_model(const std::filesystem::path& gguf, std::ostream* log = nullptr);

}  // namespace qloom::model
