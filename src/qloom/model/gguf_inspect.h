// `qloom inspect FILE.gguf`: the GGUF's metadata summary — format version,
// architecture, the HF config qloom would convert it to (or why it would
// refuse), tokenizer, tensor counts by ggml type, sizes. Reads the header
// only; no tensor data is touched.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace qloom::model {

nlohmann::ordered_json gguf_summary_json(const std::filesystem::path& gguf);
std::string format_gguf_summary(const nlohmann::ordered_json& summary);

}  // namespace qloom::model
