#include "qloom/cli/model_spec.h"

#include <unistd.h>

#include <iostream>

#include "qloom/io/model_dir.h"
#include "qloom/model/inspect.h"

namespace qloom::cli {
namespace {

// The ModelSummary fields that come from config.json alone.
model::ModelSummary config_summary(const io::ModelDir& dir) {
  model::ModelSummary s;
  s.path = dir.path().string();
  s.model_type = dir.model_type();
  s.architectures = dir.architectures();
  s.num_hidden_layers = dir.config_int("num_hidden_layers");
  s.hidden_size = dir.config_int("hidden_size");
  s.intermediate_size = dir.config_int("intermediate_size");
  s.num_attention_heads = dir.config_int("num_attention_heads");
  s.num_key_value_heads = dir.config_int("num_key_value_heads");
  s.head_dim = dir.config_int("head_dim");
  s.vocab_size = dir.config_int("vocab_size");
  s.max_position_embeddings = dir.config_int("max_position_embeddings");
  const auto& cfg = dir.config();
  for (const char* key : {"torch_dtype", "dtype"})
    if (auto it = cfg.find(key); s.torch_dtype.empty() && it != cfg.end() && it->is_string())
      s.torch_dtype = it->get<std::string>();
  if (auto it = cfg.find("tie_word_embeddings"); it != cfg.end() && it->is_boolean())
    s.tie_word_embeddings = it->get<bool>();
  if (auto it = cfg.find("quantization_config"); it != cfg.end() && it->is_object()) {
    auto qm = it->find("quant_method");
    s.quant_method = (qm != it->end() && qm->is_string()) ? qm->get<std::string>() : "unknown";
  }
  return s;
}

constexpr const char* kNote =
    "not downloaded (a hub id: inspect reads config.json only; quantize fetches the rest)";

}  // namespace

std::string resolve_model_arg(const std::string& spec, io::HubFetch fetch) {
  io::HubResolveOptions o;
  o.fetch = fetch;
  o.log = &std::cerr;
  o.log_is_tty = ::isatty(STDERR_FILENO) == 1;
  return io::resolve_model_path(spec, o).string();
}

std::string format_config_only(const io::ModelDir& dir) {
  const std::string full = model::format_summary(config_summary(dir));
  // Keep the config rows (everything before "parameters"), then the note.
  const size_t cut = full.find("\n  parameters");
  std::string out = cut == std::string::npos ? full : full.substr(0, cut + 1);
  out += "  weights     ";
  out += kNote;
  out += "\n";
  return out;
}

nlohmann::ordered_json config_only_json(const io::ModelDir& dir) {
  nlohmann::ordered_json j = model::summary_to_json(config_summary(dir));
  for (const char* k : {"parameters", "parameters_by_dtype", "tensors", "weights_bytes", "size_bytes",
                        "shards", "tokenizer_files", "other_files"})
    j.erase(k);
  j["config_only"] = true;
  j["weights"] = kNote;
  return j;
}

}  // namespace qloom::cli
