#include "qloom/model/gguf_config.h"

#include <optional>
#include <set>
#include <string_view>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "qloom/model/gguf_counts.h"

namespace qloom::model {
namespace {

using nlohmann::json;

// Every `<arch>.` key qloom understands for the dense decoders it maps.
const std::set<std::string, std::less<>> kKnownArchKeys = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "attention.causal",
    "rope.freq_base", "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.original_context_length", "rope.scaling.finetuned",
    "vocab_size", "expert_count", "expert_used_count"};

class Meta {
 public:
  explicit Meta(const io::GgufFile& f) : f_(f), file_(f.path().string()) {
    arch_ = f.get_string("general.architecture");
  }
  const std::string& arch() const { return arch_; }
  const std::string& file() const { return file_; }
  const io::GgufFile& gguf() const { return f_; }
  std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }
  bool has(std::string_view k) const { return f_.has(key(k)); }

  int64_t size(std::string_view k) const {
    const std::string name = key(k);
    if (!f_.has(name))
      throw_invalid(file_, name, "missing: the model's shape needs it",
                    "re-create the GGUF with a current llama.cpp convert_hf_to_gguf.py");
    return positive(name, f_.get_uint(name));
  }
  int64_t size_or(std::string_view k, int64_t fallback) const {
    return has(k) ? size(k) : fallback;
  }
  // A count that may also be stated per layer: every entry must agree.
  int64_t uniform_size(std::string_view k, std::optional<int64_t> fallback = std::nullopt) const {
    const std::string name = key(k);
    const io::GgufValue* v = f_.find(name);
    if (!v) return fallback ? *fallback : size(k);  // size() names the missing key
    if (v->type != io::GgufValueType::kArray) return size(k);
    const std::vector<int64_t> all = f_.get_int_array(name);
    if (all.empty()) throw_invalid(file_, name, "is an empty array");
    for (int64_t x : all)
      if (x != all.front())
        throw Error(ErrorKind::kUnsupported, file_, name,
                    "differs between layers; qloom converts models whose layers all have one shape");
    return positive(name, static_cast<uint64_t>(all.front()));
  }
  double number(std::string_view k) const {
    const std::string name = key(k);
    if (!f_.has(name)) throw_invalid(file_, name, "missing: the model's maths needs it");
    return f_.get_float(name);
  }

 private:
  int64_t positive(const std::string& name, uint64_t v) const {
    if (v == 0 || v > (1ULL << 40)) throw_invalid(file_, name, "is " + std::to_string(v) + ", not a plausible size");
    return static_cast<int64_t>(v);
  }
  const io::GgufFile& f_;
  std::string file_, arch_;
};

[[noreturn]] void refuse(const Meta& m, const std::string& item, const std::string& why) {
  throw Error(ErrorKind::kUnsupported, m.file(), item, why,
              "convert the original HuggingFace checkpoint instead of this GGUF");
}

void check_known_keys(const Meta& m) {
  const std::string prefix = m.arch() + ".";
  for (const auto& [k, v] : m.gguf().header().kv) {
    if (k.rfind(prefix, 0) != 0) continue;
    if (!kKnownArchKeys.count(std::string_view(k).substr(prefix.size())))
      refuse(m, k, "is a " + m.arch() + " hyper-parameter qloom does not map; converting without it could change the model's maths");
  }
  if (m.has("expert_count") && m.size_or("expert_count", 0) > 0)
    refuse(m, m.key("expert_count"), "a mixture-of-experts GGUF; qloom converts dense decoders only");
  if (m.has("attention.causal") && !m.gguf().get_bool(m.key("attention.causal")))
    refuse(m, m.key("attention.causal"), "is false: a non-causal model");
}

bool has_tensor_suffix(const io::GgufFile& f, std::string_view suffix) {
  for (const auto& t : f.tensors())
    if (t.name.size() > suffix.size() && t.name.rfind("blk.", 0) == 0 &&
        std::string_view(t.name).substr(t.name.size() - suffix.size()) == suffix)
      return true;
  return false;
}

json rope_parameters(const Meta& m) {
  json rope = {{"rope_theta", m.has("rope.freq_base") ? m.number("rope.freq_base") : 10000.0},
               {"rope_type", "default"}};
  if (m.gguf().find_tensor("rope_freqs.weight"))
    refuse(m, "rope_freqs.weight", "per-dimension RoPE frequency factors (llama3-style scaling) cannot be mapped back "
                                   "to transformers' rope_parameters exactly");
  const std::string type = m.has("rope.scaling.type") ? m.gguf().get_string(m.key("rope.scaling.type")) : "none";
  if (type == "none") {
    for (const char* k : {"rope.scaling.factor", "rope.scaling.original_context_length"})
      if (m.has(k) && m.number(k) != 0 && !(std::string_view(k) == "rope.scaling.factor" && m.number(k) == 1))
        refuse(m, m.key(k), "is set while rope.scaling.type is none");
    return rope;
  }
  if (type != "linear" && type != "yarn")
    refuse(m, m.key("rope.scaling.type"), "RoPE scaling '" + type + "' is not mapped (linear and yarn are)");
  rope["rope_type"] = type;
  rope["factor"] = m.number("rope.scaling.factor");
  if (type == "yarn") rope["original_max_position_embeddings"] = m.size("rope.scaling.original_context_length");
  return rope;
}

// Head size: stated (rope.dimension_count for llama, attention.key_length
// for qwen3) or hidden / heads; every other statement must agree with it.
int64_t head_dim(const Meta& m, int64_t hidden, int64_t heads) {
  const int64_t even = hidden % heads == 0 ? hidden / heads : 0;
  int64_t hd = even;
  if (m.arch() == "llama") hd = m.size_or("rope.dimension_count", even);
  if (m.arch() == "qwen3") hd = m.size_or("attention.key_length", even);
  if (hd == 0) throw_invalid(m.file(), m.key("attention.head_count"), "does not divide embedding_length and no head size is stated");
  for (const char* k : {"attention.key_length", "attention.value_length", "rope.dimension_count"})
    if (m.has(k) && m.size(k) != hd)
      refuse(m, m.key(k), "is " + std::to_string(m.size(k)) + " where the head size is " + std::to_string(hd) +
                              " (partial rotary or unequal key/value heads are not mapped)");
  if (m.arch() == "qwen2" && hd != even)
    refuse(m, m.key("attention.key_length"), "a qwen2 head size other than hidden / heads");
  if (hd % 2 != 0) throw_invalid(m.file(), m.key("rope.dimension_count"), "the head size must be even for RoPE");
  return hd;
}

int64_t vocab_size(const Meta& m) {
  if (m.has("vocab_size")) return m.size("vocab_size");
  const io::GgufValue* toks = m.gguf().find("tokenizer.ggml.tokens");
  if (!toks || toks->type != io::GgufValueType::kArray || toks->array.empty())
    throw_invalid(m.file(), m.key("vocab_size"), "missing, and there is no tokenizer.ggml.tokens to count");
  return static_cast<int64_t>(toks->array.size());
}

// tokenizer.ggml.<name>_token_id into the config, the class default when absent.
void token_id(const Meta& m, json& c, const char* gguf_name, const char* key, const json& fallback, bool always) {
  const std::string k = std::string("tokenizer.ggml.") + gguf_name + "_token_id";
  if (m.gguf().has(k))
    c[key] = m.gguf().get_uint(k);
  else if (always)
    c[key] = fallback;
}

std::string model_type_of(const Meta& m) {
  if (m.arch() == "llama") {
    // transformers reads a llama file whose general.name is exactly "mistral" as mistral.
    const auto name = m.gguf().get_string_opt("general.name");
    return name && *name == "mistral" ? "mistral" : "llama";
  }
  if (m.arch() == "qwen2" || m.arch() == "qwen3") return m.arch();
  throw Error(ErrorKind::kUnsupported, m.file(), "general.architecture",
              "GGUF architecture '" + m.arch() + "' is not converted (qloom maps llama, mistral, qwen2, qwen3)",
              "convert the original HuggingFace checkpoint instead of this GGUF");
}

void family_defaults(const Meta& m, GgufModelInfo& info, json& c) {
  const bool qkv_bias = has_tensor_suffix(m.gguf(), ".attn_q.bias");
  const bool mlp_bias = has_tensor_suffix(m.gguf(), ".ffn_up.bias");
  c["attention_dropout"] = 0.0;
  c["hidden_act"] = "silu";
  c["initializer_range"] = 0.02;
  c["use_cache"] = true;
  if (info.model_type == "llama") {
    c["attention_bias"] = qkv_bias;
    c["mlp_bias"] = mlp_bias;
    c["pretraining_tp"] = 1;
    c["head_dim"] = info.head_dim;
  } else if (info.model_type == "mistral") {
    if (qkv_bias || mlp_bias) refuse(m, "blk.0.attn_q.bias", "biases in a mistral model are not mapped");
    c["head_dim"] = info.head_dim;
    c["sliding_window"] = 4096;  // MistralConfig's default, as transformers writes it
  } else {
    if (mlp_bias) refuse(m, "blk.0.ffn_up.bias", "MLP biases are not mapped for " + info.model_type);
    if (info.model_type == "qwen3") {
      c["attention_bias"] = qkv_bias;
      c["head_dim"] = info.head_dim;
    } else if (!qkv_bias) {
      refuse(m, "blk.0.attn_q.bias", "missing: qwen2 attention has q/k/v biases");
    }
    c["layer_types"] = json::array();
    for (int64_t i = 0; i < info.layers; ++i) c["layer_types"].push_back("full_attention");
    c["max_window_layers"] = 28;
    c["sliding_window"] = nullptr;
    c["use_sliding_window"] = false;
  }
}

const char* hf_class(const std::string& model_type) {
  if (model_type == "llama") return "LlamaForCausalLM";
  if (model_type == "mistral") return "MistralForCausalLM";
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  return "Qwen3ForCausalLM";
}

}  // namespace

GgufModelInfo read_gguf_model_info(const io::GgufFile& file, const std::string& dtype) {
  const Meta m(file);
  GgufModelInfo info;
  info.gguf_arch = m.arch();
  info.model_type = model_type_of(m);
  info.hf_class = hf_class(info.model_type);
  info.permute_qk = m.arch() == "llama";
  check_known_keys(m);
  if (file.tensors().empty())
    throw_invalid(m.file(), "tensor_count", "the file holds no tensors (a vocabulary-only GGUF): nothing to convert",
                  "pass a GGUF with the model's weights");
  check_gguf_counts(file);
  info.layers = m.size("block_count");
  info.hidden = m.size("embedding_length");
  info.intermediate = m.uniform_size("feed_forward_length");
  info.heads = m.uniform_size("attention.head_count");
  info.kv_heads = m.uniform_size("attention.head_count_kv", info.heads);
  if (info.heads % info.kv_heads != 0)
    throw_invalid(m.file(), m.key("attention.head_count_kv"), "does not divide attention.head_count");
  info.head_dim = head_dim(m, info.hidden, info.heads);
  info.vocab = vocab_size(m);
  info.tied = file.find_tensor("output.weight") == nullptr;

  json c = json::object();
  if (const auto name = file.get_string_opt("general.name")) c["_model_name_or_path"] = *name;
  c["architectures"] = json::array({info.hf_class});
  c["dtype"] = dtype;
  c["model_type"] = info.model_type;
  c["hidden_size"] = info.hidden;
  c["intermediate_size"] = info.intermediate;
  c["max_position_embeddings"] = m.size("context_length");
  c["num_attention_heads"] = info.heads;
  c["num_hidden_layers"] = info.layers;
  c["num_key_value_heads"] = info.kv_heads;
  c["rms_norm_eps"] = m.number("attention.layer_norm_rms_epsilon");
  c["rope_parameters"] = rope_parameters(m);
  c["tie_word_embeddings"] = info.tied;
  c["vocab_size"] = info.vocab;
  const bool llama_ids = info.model_type == "llama" || info.model_type == "mistral";
  token_id(m, c, "bos", "bos_token_id", llama_ids ? json(1) : json(nullptr), true);
  token_id(m, c, "eos", "eos_token_id", llama_ids ? json(2) : json(nullptr), true);
  token_id(m, c, "padding", "pad_token_id", nullptr, true);
  token_id(m, c, "unknown", "unk_token_id", nullptr, false);
  family_defaults(m, info, c);
  info.config = std::move(c);
  return info;
}

nlohmann::json gguf_generation_config(const GgufModelInfo& info) {
  json g = {{"_from_model_config", true},
            {"output_attentions", false},
            {"output_hidden_states", false},
            {"use_cache", true}};
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (info.config.contains(k) && !info.config[k].is_null()) g[k] = info.config[k];
  return g;
}

}  // namespace qloom::model
