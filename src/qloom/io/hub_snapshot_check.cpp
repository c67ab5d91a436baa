#include "qloom/io/hub_snapshot_check.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "qloom/io/hub_select.h"

namespace qloom::io {
namespace fs = std::filesystem;
namespace {

std::optional<nlohmann::json> read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace

std::string missing_from_snapshot(const HubCache& cache, const std::string& commit, HubFetch fetch) {
  if (!cache.has_file(commit, "config.json")) return "config.json";
  if (fetch == HubFetch::kConfigOnly) return {};
  const fs::path snap = cache.snapshot(commit);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(snap, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 23 || name.substr(name.size() - 23) != ".safetensors.index.json") continue;
    if (!cache.has_file(commit, name)) return name;
    const auto index = read_json(entry.path());
    if (!index || !index->contains("weight_map") || !(*index)["weight_map"].is_object()) continue;
    for (const auto& [tensor, shard] : (*index)["weight_map"].items())
      if (shard.is_string() && !cache.has_file(commit, shard.get<std::string>()))
        return shard.get<std::string>();
  }
  // huggingface_hub's tree listing: {"format_version": 1, "files": {name: {"size": n, ...}}}
  if (const auto tree = read_json(cache.repo_dir() / "trees" / (commit + ".json"));
      tree && tree->contains("files") && (*tree)["files"].is_object()) {
    for (const auto& [name, info] : (*tree)["files"].items()) {
      std::optional<uint64_t> size;
      if (info.is_object() && info.contains("size") && info["size"].is_number_unsigned())
        size = info["size"].get<uint64_t>();
      if (wanted_for_quantization(name, size) && !cache.has_file(commit, name)) return name;
    }
  }
  return {};
}

}  // namespace qloom::io
