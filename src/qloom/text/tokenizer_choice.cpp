#include "qloom/text/tokenizer_choice.h"

#include <algorithm>
#include <array>

#include "qloom/core/error.h"
#include "qloom/io/text_file.h"
#include "qloom/text/json_util.h"

namespace qloom::text {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// transformers 5.25: the model types of TOKENIZER_MAPPING_NAMES whose class is
// a generic backend (TokenizersBackend, MistralCommonBackend,
// PreTrainedTokenizerFast, PythonBackend), plus those of
// MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS that register another class.
constexpr std::array<std::string_view, 90> kLlamaOverriddenModelTypes = {
    "EvollaModel", "arctic", "aria", "beam", "bigbird_pegasus", "canary", "chatlm", "cohere_asr",
    "ernie4_5", "ernie4_5_moe", "flex_olmo", "fuyu", "glm", "glm4", "glm4_moe", "glm4_moe_lite",
    "glm4v", "glm4v_moe", "glm_image", "glmasr", "got_ocr2", "gpt_bigcode", "gradium_phonon_tts",
    "granite", "granitemoe", "granitemoehybrid", "granitemoeshared", "h2ovl_chat", "hyperclovax",
    "hyperclovax_vision_v2", "hyperclovax_vlm", "internlm2", "internlm3", "iquestcoder", "jamba",
    "kimi_k25", "kimi_linear", "kosmos-2", "llava", "llava_next", "mimo_v2_flash", "minicpm3",
    "minicpm_ocr", "minicpmv", "minicpmv4_6", "minicpmv4_7", "minimax_m2", "ministral",
    "ministral3", "mistral", "mistral3", "mistral_large4", "mixtral", "modernbert",
    "modernbert-decoder", "molmo", "molmo2", "nemo_speechlm", "nemotron", "nvfp4", "nystromformer",
    "olmo2", "olmo3", "olmo_hybrid", "omniasr", "opencua", "openvla", "paddleocr_vl", "pegasus_x",
    "persimmon", "phi3", "phi3_v", "phimoe", "pix2struct", "pixtral", "pocket_tts", "qwen2",
    "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen4_exp", "siglip2", "smolvlm", "stablelm",
    "step3_vl", "umt5", "vipllava", "voxtral", "voxtral_realtime", "xlm-roberta-xl",
};

json read_json_object(const fs::path& file) {
  const json j = json_util::parse_document(io::read_text_file(file), file.string());
  if (!j.is_object()) throw_invalid(file.string(), "", "expected a JSON object");
  return j;
}

// A string field, "" when absent or null; kInvalidInput when of another type.
std::string string_field(const json& j, const char* key, const fs::path& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) throw_invalid(file.string(), key, "expected a string");
  return it->get<std::string>();
}

bool bool_field(const json& j, const char* key, bool dflt, const fs::path& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) throw_invalid(file.string(), key, "expected true or false");
  return it->get<bool>();
}

std::string without_fast(std::string name) {
  constexpr std::string_view kFast = "Fast";
  if (name.size() > kFast.size() && name.ends_with(kFast)) name.resize(name.size() - kFast.size());
  return name;
}

// The hub class and model type: tokenizer_config.json's class, else
// config.json's; model_type from config.json ("" without one).
std::pair<std::string, std::string> hub_class_and_model_type(const fs::path& dir, const json& tok_cfg) {
  const fs::path tok_cfg_file = dir / "tokenizer_config.json";
  std::string hub = string_field(tok_cfg, "tokenizer_class", tok_cfg_file);
  std::string model_type;
  const fs::path cfg_file = dir / "config.json";
  std::error_code ec;
  if (fs::is_regular_file(cfg_file, ec)) {
    const json cfg = read_json_object(cfg_file);
    if (hub.empty()) hub = string_field(cfg, "tokenizer_class", cfg_file);
    model_type = string_field(cfg, "model_type", cfg_file);
  }
  return {without_fast(hub), model_type};
}

bool is_llama_overridden(std::string_view model_type) {
  return std::binary_search(kLlamaOverriddenModelTypes.begin(), kLlamaOverriddenModelTypes.end(),
                            model_type);
}

TokenizerChoice as_written(bool has_json, const fs::path& dir, std::string hub, std::string why) {
  TokenizerChoice c;
  c.kind = has_json ? TokenizerKind::kTokenizerJson : TokenizerKind::kSentencePiece;
  c.file = dir / (has_json ? "tokenizer.json" : "tokenizer.model");
  c.hf_class = std::move(hub);
  c.why = std::move(why);
  return c;
}

}  // namespace

std::span<const std::string_view> llama_overridden_model_types() { return kLlamaOverriddenModelTypes; }

json read_tokenizer_config(const fs::path& dir) {
  const fs::path file = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return json::object();
  return read_json_object(file);
}

TokenizerChoice choose_tokenizer(const fs::path& dir, const json& tok_cfg, const std::string* json_text) {
  std::error_code ec;
  const bool has_json = json_text != nullptr;
  const bool has_model = fs::is_regular_file(dir / "tokenizer.model", ec);
  if (!has_json && !has_model) {
    throw_not_found(dir.string(), "tokenizer.json",
                    "the model directory has neither tokenizer.json nor tokenizer.model",
                    "copy the tokenizer files (tokenizer.json or tokenizer.model) of the model into it");
  }
  if (!has_model) return as_written(true, dir, "", "no tokenizer.model");
  auto [hub, model_type] = hub_class_and_model_type(dir, tok_cfg);
  if (hub != "LlamaTokenizer") {
    return as_written(has_json, dir, hub,
                      hub.empty() ? "no tokenizer_class: transformers 5 loads it with TokenizersBackend"
                                  : "tokenizer_class " + hub + " is not the LlamaTokenizer that qloom follows");
  }
  if (tok_cfg.contains("auto_map")) {
    return as_written(has_json, dir, hub, "tokenizer_config.json names remote code (auto_map)");
  }
  if (has_json && json_text->find("\"ByteLevel\"") != std::string::npos) {
    return as_written(true, dir, hub, "tokenizer.json is ByteLevel: transformers 5 loads it with TokenizersBackend");
  }
  if (is_llama_overridden(model_type)) {
    return as_written(has_json, dir, hub,
                      "model_type " + model_type + ": transformers 5 loads it with its registered tokenizer");
  }
  const fs::path tok_cfg_file = dir / "tokenizer_config.json";
  TokenizerChoice c;
  c.kind = TokenizerKind::kLlamaPipeline;
  c.file = dir / (has_json ? "tokenizer.json" : "tokenizer.model");
  c.hf_class = hub;
  c.legacy = bool_field(tok_cfg, "legacy", false, tok_cfg_file);
  c.add_prefix_space = bool_field(tok_cfg, "add_prefix_space", true, tok_cfg_file);
  c.why = "tokenizer.model present, tokenizer_class LlamaTokenizer";
  return c;
}

const char* tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kTokenizerJson: return "tokenizer_json";
    case TokenizerKind::kLlamaPipeline: return "llama_pipeline";
    case TokenizerKind::kSentencePiece: return "sentencepiece";
  }
  return "?";
}

std::string describe_choice(const TokenizerChoice& c, const std::vector<std::string>& replaced) {
  const std::string file = c.file.filename().string();
  if (c.kind == TokenizerKind::kTokenizerJson) {
    return c.why == "no tokenizer.model" ? file : file + " as written (" + c.why + ")";
  }
  if (c.kind == TokenizerKind::kSentencePiece) return "sentencepiece " + file + " (" + c.why + ")";
  std::string scheme = !c.add_prefix_space ? "add_prefix_space false: Metaspace prepend never"
                       : c.legacy          ? "legacy true: Metaspace prepend always"
                                           : "legacy false: Metaspace prepend first";
  std::string out = "transformers 5 LlamaTokenizer over " + file + "'s vocabulary (as AutoTokenizer: " +
                    c.why + "; no normalizer, " + scheme + ")";
  if (file != "tokenizer.json") return out;
  if (replaced.empty()) return out + "; tokenizer.json's own pipeline encodes the same";
  std::string list;
  for (const auto& r : replaced) list += (list.empty() ? "" : ", ") + r;
  return out + "; tokenizer.json's encoding differs, its " + list + " not applied";
}

}  // namespace qloom::text
