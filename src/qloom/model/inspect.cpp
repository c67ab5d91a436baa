#include "qloom/model/inspect.h"

#include <filesystem>
#include <sstream>

#include "qloom/core/dtype.h"
#include "qloom/core/format.h"
#include "qloom/io/model_dir.h"

namespace qloom::model {
namespace fs = std::filesystem;

ModelSummary summarize_config(const io::ModelDir& dir) {
  ModelSummary s;
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
  if (auto it = cfg.find("torch_dtype"); it != cfg.end() && it->is_string())
    s.torch_dtype = it->get<std::string>();
  else if (auto it2 = cfg.find("dtype"); it2 != cfg.end() && it2->is_string())
    s.torch_dtype = it2->get<std::string>();
  if (auto it = cfg.find("tie_word_embeddings"); it != cfg.end() && it->is_boolean())
    s.tie_word_embeddings = it->get<bool>();
  if (auto it = cfg.find("quantization_config"); it != cfg.end() && it->is_object()) {
    auto qm = it->find("quant_method");
    s.quant_method = (qm != it->end() && qm->is_string()) ? qm->get<std::string>() : "unknown";
  }
  return s;
}

ModelSummary summarize_model(const io::ModelDir& dir) {
  ModelSummary s = summarize_config(dir);

  const io::WeightIndex& w = dir.weights();
  for (size_t i = 0; i < w.num_shards(); ++i) {
    for (const io::TensorInfo& t : w.shard(i).tensors()) {
      s.parameters += t.numel();
      s.parameters_by_dtype[std::string(dtype_info(t.dtype).safetensors_name)] += t.numel();
      s.weights_bytes += t.nbytes();
      ++s.tensors;
    }
  }
  s.shards = w.shard_files();

  auto names = [&](const std::vector<fs::path>& files) {
    std::vector<std::string> out;
    for (const auto& f : files) out.push_back(f.filename().string());
    return out;
  };
  s.tokenizer_files = names(dir.tokenizer_files());
  s.other_files = names(dir.other_files());

  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.path(), ec)) {
    if (e.is_regular_file(ec)) s.size_bytes += e.file_size(ec);
  }
  return s;
}

nlohmann::ordered_json summary_to_json(const ModelSummary& s) {
  nlohmann::ordered_json j;
  auto opt = [](const std::optional<int64_t>& v) -> nlohmann::ordered_json {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  j["path"] = s.path;
  j["model_type"] = s.model_type;
  j["architectures"] = s.architectures;
  j["num_hidden_layers"] = opt(s.num_hidden_layers);
  j["hidden_size"] = opt(s.hidden_size);
  j["intermediate_size"] = opt(s.intermediate_size);
  j["num_attention_heads"] = opt(s.num_attention_heads);
  j["num_key_value_heads"] = opt(s.num_key_value_heads);
  j["head_dim"] = opt(s.head_dim);
  j["vocab_size"] = opt(s.vocab_size);
  j["max_position_embeddings"] = opt(s.max_position_embeddings);
  j["torch_dtype"] = s.torch_dtype;
  j["tie_word_embeddings"] = s.tie_word_embeddings;
  j["quant_method"] = s.quant_method.empty() ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(s.quant_method);
  j["parameters"] = s.parameters;
  j["parameters_by_dtype"] = s.parameters_by_dtype;
  j["tensors"] = s.tensors;
  j["weights_bytes"] = s.weights_bytes;
  j["size_bytes"] = s.size_bytes;
  j["shards"] = s.shards;
  j["tokenizer_files"] = s.tokenizer_files;
  j["other_files"] = s.other_files;
  return j;
}

std::string format_summary(const ModelSummary& s) {
  std::ostringstream o;
  auto val = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("?"); };
  auto row = [&](const char* key, const std::string& value) {
    o << "  " << key << std::string(12 - std::char_traits<char>::length(key), ' ') << value << "\n";
  };
  std::string arch = s.model_type.empty() ? "(no model_type)" : s.model_type;
  if (!s.architectures.empty()) {
    arch += " (";
    for (size_t i = 0; i < s.architectures.size(); ++i) arch += (i ? ", " : "") + s.architectures[i];
    arch += ")";
  }
  o << "model " << s.path << "\n";
  row("arch", arch);
  row("layers", val(s.num_hidden_layers) + "   hidden " + val(s.hidden_size) + "   ffn " +
                    val(s.intermediate_size) + "   heads " + val(s.num_attention_heads) + " / kv " +
                    val(s.num_key_value_heads) + (s.head_dim ? "   head_dim " + val(s.head_dim) : ""));
  row("vocab", val(s.vocab_size) + "   context " + val(s.max_position_embeddings) +
                   (s.tie_word_embeddings ? "   tied embeddings" : ""));
  if (!s.torch_dtype.empty()) row("dtype", s.torch_dtype);
  if (!s.quant_method.empty()) row("quantized", s.quant_method);
  std::string by;
  for (const auto& [dt, n] : s.parameters_by_dtype)
    by += (by.empty() ? "" : ", ") + dt + " " + format_count(n);
  row("parameters", format_count(s.parameters) + (by.empty() ? "" : " (" + by + ")"));
  std::string shards;
  for (const auto& f : s.shards) shards += (shards.empty() ? "" : ", ") + f;
  row("tensors", std::to_string(s.tensors) + " in " + std::to_string(s.shards.size()) +
                     (s.shards.size() == 1 ? " shard: " : " shards: ") + shards);
  row("size", format_bytes(s.size_bytes) + " on disk (weights " + format_bytes(s.weights_bytes) + ")");
  std::string tok;
  for (const auto& f : s.tokenizer_files) tok += (tok.empty() ? "" : ", ") + f;
  row("tokenizer", tok.empty() ? "none found" : tok);
  if (!s.other_files.empty()) {
    std::string other;
    for (const auto& f : s.other_files) other += (other.empty() ? "" : ", ") + f;
    row("other", other);
  }
  return o.str();
}

}  // namespace qloom::model
