#include "qloom/agent/quantized_dir_repair.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/text_file.h"

namespace qloom::agent {
namespace fs = std::filesystem;

namespace {

nlohmann::ordered_json read_json_or_null(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return nullptr;
  try {
    auto j = nlohmann::ordered_json::parse(io::read_text_file(p), nullptr, false);
    return j.is_discarded() ? nlohmann::ordered_json(nullptr) : j;
  } catch (const Error&) {
    return nullptr;
  }
}

void copy_bytes(const fs::path& from, const fs::path& to) {
  io::write_file_atomic(to, io::read_text_file(from));
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (!fs::is_regular_file(b, ec) || fs::file_size(a, ec) != fs::file_size(b, ec)) return false;
  return io::read_text_file(a) == io::read_text_file(b);
}

// config.json = source config + the quantized config's quantization_config.
void write_source_config(const fs::path& source, const fs::path& quantized, const nlohmann::ordered_json& old) {
  auto cfg = read_json_or_null(source / "config.json");
  if (!cfg.is_object())
    throw Error(ErrorKind::kInvalidInput, (source / "config.json").string(), "", "the source config is not a JSON object",
                "repair the source model's config.json");
  if (old.is_object() && old.contains("quantization_config")) cfg["quantization_config"] = old["quantization_config"];
  io::write_file_atomic(quantized / "config.json", cfg.dump(2) + "\n");
}

std::vector<std::string> top_level_files(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool weight_like(const std::string& n) {
  return io::is_safetensors_weight_file(n) || io::is_pickle_weight_file(n) || io::is_other_weight_file(n) ||
         n == "model.safetensors.index.json" || n == "pytorch_model.bin.index.json";
}

}  // namespace

std::vector<std::string> repair_config(const fs::path& source, const fs::path& quantized) {
  const auto cfg = read_json_or_null(quantized / "config.json");
  if (cfg.is_object() && cfg.contains("model_type") && cfg.contains("architectures")) return {};
  write_source_config(source, quantized, cfg);
  return {std::string(cfg.is_null() ? "config.json was missing or not JSON" : "config.json lacked model_type/architectures") +
          ": the source's config.json copied" + (cfg.is_object() && cfg.contains("quantization_config") ? " (quantization_config kept)" : "")};
}

std::vector<std::string> repair_tokenizer(const fs::path& source, const fs::path& quantized) {
  for (const auto& n : top_level_files(quantized))
    if (n == "tokenizer.json" || n == "tokenizer_config.json" || n == "tokenizer.model" || n == "vocab.json") return {};
  std::vector<std::string> done;
  for (const auto& n : top_level_files(source))
    if (io::is_tokenizer_file(n)) {
      copy_bytes(source / n, quantized / n);
      done.push_back(n + " copied from the source (no tokenizer file in the quantized dir)");
    }
  return done;
}

std::vector<std::string> repair_auxiliary(const fs::path& source, const fs::path& quantized) {
  std::vector<std::string> done;
  for (const auto& n : top_level_files(source)) {
    if (n == "config.json" || weight_like(n)) continue;
    if (same_bytes(source / n, quantized / n)) continue;
    const bool existed = fs::exists(quantized / n);
    copy_bytes(source / n, quantized / n);
    done.push_back(n + (existed ? " differed from the source: replaced" : " was missing: copied from the source"));
  }
  return done;
}

std::vector<std::string> repair_config_mismatch(const fs::path& source, const fs::path& quantized) {
  auto q = read_json_or_null(quantized / "config.json");
  auto s = read_json_or_null(source / "config.json");
  if (q.is_object() && s.is_object()) {
    auto stripped = q;
    stripped.erase("quantization_config");
    if (nlohmann::json(stripped) == nlohmann::json(s)) return {};
  }
  write_source_config(source, quantized, q);
  return {"config.json business fields differed from the source: rewritten from the source, quantization_config kept"};
}

}  // namespace qloom::agent
