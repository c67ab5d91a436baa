#include "qloom/cli/model_spec.h"

#include <iostream>

#include "qloom/io/model_dir.h"
#include "qloom/model/inspect.h"
#include "qloom/model/model_arg.h"

namespace qloom::cli {
namespace {

constexpr const char* kNote =
    "not downloaded (a hub id: inspect reads config.json only; quantize fetches the rest)";

}  // namespace

std::string resolve_model_arg(const std::string& spec, io::HubFetch fetch) {
  return model::resolve_model_arg(spec, fetch, &std::cerr).string();
}

std::string format_config_only(const io::ModelDir& dir) {
  const std::string full = model::format_summary(model::summarize_config(dir));
  // Keep the config rows (everything before "parameters"), then the note.
  const size_t cut = full.find("\n  parameters");
  std::string out = cut == std::string::npos ? full : full.substr(0, cut + 1);
  out += "  weights     ";
  out += kNote;
  out += "\n";
  return out;
}

nlohmann::ordered_json config_only_json(const io::ModelDir& dir) {
  nlohmann::ordered_json j = model::summary_to_json(model::summarize_config(dir));
  for (const char* k : {"parameters", "parameters_by_dtype", "tensors", "weights_bytes", "size_bytes",
                        "shards", "tokenizer_files", "other_files"})
    j.erase(k);
  j["config_only"] = true;
  j["weights"] = kNote;
  return j;
}

}  // namespace qloom::cli
