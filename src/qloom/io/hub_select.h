// Which files of a hub repo qloom downloads for a model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace qloom::io {

// Files larger than this that are neither weights nor tokenizer/config files
// (images, datasets, ...) are left on the hub.
inline constexpr uint64_t kMaxOtherFileBytes = 16ull << 20;

// What quantization needs: top-level files only (no '/' in the name), never
// pickle checkpoints (*.bin, *.pt, *.pth, *.ckpt, *.pkl, *.pickle and their
// *.index.json) nor other frameworks' weights (*.h5, *.msgpack, *.gguf,
// *.onnx, *.ot, *.tflite, *.keras); always *.safetensors,
// *.safetensors.index.json, config.json, generation_config.json and the
// tokenizer files ModelDir knows, whatever their size; any other top-level file when its size is
// unknown or at most kMaxOtherFileBytes. Hidden files (.gitattributes) are
// skipped.
bool wanted_for_quantization(const std::string& name, std::optional<uint64_t> size);

}  // namespace qloom::io
