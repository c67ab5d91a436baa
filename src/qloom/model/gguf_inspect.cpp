#include "qloom/model/gguf_inspect.h"

#include <map>

#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/io/gguf.h"
#include "qloom/model/gguf_config.h"
#include "qloom/model/gguf_counts.h"

namespace qloom::model {

nlohmann::ordered_json gguf_summary_json(const std::filesystem::path& gguf) {
  const io::GgufFile f = io::GgufFile::open(gguf);
  check_gguf_counts(f);  // a corrupt count is an error, not "not convertible"
  nlohmann::ordered_json j;
  j["path"] = gguf.string();
  j["format"] = "gguf";
  j["gguf_version"] = f.version();
  j["architecture"] = f.get_string_opt("general.architecture").value_or("");
  j["name"] = f.get_string_opt("general.name").value_or("");
  try {
    const GgufModelInfo info = read_gguf_model_info(f);
    j["model_type"] = info.model_type;
    for (const char* k : {"num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
                          "rms_norm_eps", "rope_parameters", "tie_word_embeddings"})
      if (info.config.contains(k)) j[k] = info.config[k];
    j["convertible"] = true;
  } catch (const Error& e) {
    j["convertible"] = false;
    j["not_convertible_because"] = e.item().empty() ? e.message() : e.item() + ": " + e.message();
  }
  j["tokenizer"] = f.get_string_opt("tokenizer.ggml.model").value_or("");
  j["tokenizer_pre"] = f.get_string_opt("tokenizer.ggml.pre").value_or("");
  if (const io::GgufValue* t = f.find("tokenizer.ggml.tokens")) j["tokens"] = t->array.size();
  j["chat_template"] = f.has("tokenizer.chat_template");
  std::map<std::string, uint64_t> types;
  uint64_t params = 0, bytes = 0;
  for (const auto& t : f.tensors()) {
    ++types[std::string(io::ggml_type_info(t.type).name)];
    params += t.numel();
    bytes += t.nbytes;
  }
  j["tensors"] = f.tensors().size();
  j["tensor_types"] = types;
  j["parameters"] = params;
  j["tensor_bytes"] = bytes;
  j["file_bytes"] = f.mapped().size();
  j["metadata_keys"] = f.header().kv.size();
  return j;
}

std::string format_gguf_summary(const nlohmann::ordered_json& s) {
  auto row = [](const std::string& k, const std::string& v) {
    std::string out = "  " + k;
    out.resize(std::max<size_t>(out.size() + 1, 26), ' ');
    return out + v + "\n";
  };
  auto text = [](const nlohmann::ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::string out = s["path"].get<std::string>() + " (GGUF v" + text(s["gguf_version"]) + ")\n";
  out += row("architecture", text(s["architecture"]) + (s["name"] != "" ? "  (" + text(s["name"]) + ")" : ""));
  if (s["convertible"] == true) {
    out += row("converts to", text(s["model_type"]));
    for (const char* k : {"num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings",
                          "rms_norm_eps", "rope_parameters", "tie_word_embeddings"})
      if (s.contains(k)) out += row(k, text(s[k]));
  } else {
    out += row("converts to", "not convertible: " + text(s["not_convertible_because"]));
  }
  out += row("tokenizer", text(s["tokenizer"]) + (s["tokenizer_pre"] != "" ? " (pre " + text(s["tokenizer_pre"]) + ")" : "") +
                              (s.contains("tokens") ? ", " + format_count(s["tokens"].get<uint64_t>()) + " tokens" : "") +
                              (s["chat_template"] == true ? ", chat template" : ""));
  std::string types;
  for (const auto& [t, n] : s["tensor_types"].items()) types += (types.empty() ? "" : ", ") + t + " x" + text(n);
  out += row("tensors", format_count(s["tensors"].get<uint64_t>()) + " (" + types + ")");
  out += row("parameters", format_count(s["parameters"].get<uint64_t>()));
  out += row("size", format_bytes(s["file_bytes"].get<uint64_t>()) + " (tensor data " +
                         format_bytes(s["tensor_bytes"].get<uint64_t>()) + ")");
  return out;
}

}  // namespace qloom::model
