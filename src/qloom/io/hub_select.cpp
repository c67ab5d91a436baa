#include "qloom/io/hub_select.h"

#include <array>
#include <string_view>

namespace qloom::io {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

bool wanted_for_quantization(const std::string& name, std::optional<uint64_t> size) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') return false;
  if (ends_with(name, ".safetensors") || ends_with(name, ".safetensors.index.json")) return true;
  static constexpr std::array<std::string_view, 13> kAlways = {
      "config.json", "generation_config.json", "tokenizer.json", "tokenizer.model",
      "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
      "added_tokens.json", "vocab.txt", "spiece.model", "chat_template.jinja", "chat_template.json"};
  for (std::string_view a : kAlways)
    if (name == a) return true;
  static constexpr std::array<std::string_view, 13> kSkipped = {
      ".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".h5",
      ".msgpack", ".gguf", ".onnx", ".ot", ".tflite", ".keras"};
  std::string_view base = name;
  if (ends_with(base, ".index.json")) base = base.substr(0, base.size() - 11);
  for (std::string_view ext : kSkipped)
    if (ends_with(base, ext)) return false;
  return !size || *size <= kMaxOtherFileBytes;
}

}  // namespace qloom::io
