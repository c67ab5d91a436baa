#include "qloom/io/hub_select.h"

#include "qloom/io/model_dir.h"

namespace qloom::io {

bool wanted_for_quantization(const std::string& name, std::optional<uint64_t> size) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') return false;
  if (is_safetensors_weight_file(name)) return true;
  if (name == "config.json" || name == "generation_config.json" || is_tokenizer_file(name)) return true;
  if (is_pickle_weight_file(name) || is_other_weight_file(name)) return false;
  return !size || *size <= kMaxOtherFileBytes;
}

}  // namespace qloom::io
