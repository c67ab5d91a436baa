#include "qloom/agent/intent_lexicon.h"

#include <regex>

namespace qloom::agent::detail {

bool in(std::string_view w, std::initializer_list<std::string_view> set) {
  for (std::string_view s : set)
    if (w == s) return true;
  return false;
}

bool is_vocabulary_word(std::string_view n) {
  return in(n, {"fp8", "int8", "int4", "uint4", "w8a8", "w4a16", "w4a8", "mxfp4", "fp4", "ptpc", "ptpc_fp8", "awq",
                "gptq", "smoothquant", "nvfp4", "mxfp6", "amdfp4", "gptaq", "qronos", "quarot", "rotation", "bf16", "fp16", "fp32", "and", "or", "ppl", "perplexity", "gsm8k", "mmlu",
                "accuracy", "tokens", "s", "sec", "kv", "kv_cache", "weights", "activations", "cpu", "gpu"});
}

bool is_high_precision_word(std::string_view n) {
  return in(n, {"bf16", "fp16", "fp32", "bfloat16", "float16", "float32", "half", "full", "high", "original",
                "unquantized", "unquantised", "untouched", "intact", "alone", "excluded", "unchanged", "native",
                "higher", "16_bit", "dense", "as_is"});
}

bool find_hardware(std::string_view norm, HardwareDef& out) {
  static const std::regex re(
      R"(^(?:\d+_?x_?)?(?:amd_|nvidia_|instinct_)?(mi\d{3}[a-z]?|g?[hab]\d{3}|l40s|blackwell|cpu|cpus|x86|x86_64)s?$)");
  std::smatch m;
  const std::string s(norm);
  if (!rx_match(s, m, re)) return false;
  std::string name = m[1].str();
  if (name == "cpus" || name == "x86" || name == "x86_64") name = "cpu";
  if (name == "mi300" || name == "mi300a") name = "mi300x";
  if (name == "mi355" || name == "mi350") name += "x";
  out = {name, "", ""};
  if (in(name, {"mi300x", "mi325x"})) {
    out.row = "amd_mi300x";  // CDNA3: fp8 in hardware, no fp4/fp6
  } else if (in(name, {"mi350x", "mi355x"})) {
    out.row = "amd_mi355x";  // CDNA4: OCP MX fp4/fp6 in hardware
  } else if (in(name, {"h100", "h200", "gh200"})) {
    out.row = "nvidia_h100";
  } else if (in(name, {"b100", "b200", "b300", "gb200", "gb300", "blackwell"})) {
    out.row = "nvidia_blackwell";  // NVFP4 in hardware
  } else if (name == "cpu") {
    out.row = "cpu_deployment";
  } else if (in(name, {"mi250", "mi250x", "mi210", "mi100", "a100", "a10", "v100"})) {
    out.note = name;
    out.note += " is not in the recommendation table and has no native FP8 support; consider a weight-only "
                "int4/uint4 scheme";
  } else {
    out.note = name;
    out.note += " is not in the recommendation table; the default scheme applies";
  }
  return true;
}

const Recommendation* find_recommendation(std::string_view row) {
  // Seed 001's table, with its "AMD MI300X/MI355X: fp8 or amdfp4" row split by
  // what each chip runs natively (issue 17): MI300X fp8 (ptpc_fp8 for per-token
  // accuracy), MI355X OCP MXFP4 (mxfp4_fp8, W4A8, where activations need 8
  // bits), NVIDIA Blackwell NVFP4.
  static const std::vector<Recommendation> table = {
      {"best_accuracy", "fp8", "", "seed 001 recommendation table: best accuracy -> fp8 (or ptpc_fp8)"},
      {"smallest_model", "int4_wo_32", "gptq", "seed 001 recommendation table: smallest model -> int4_wo_32 + awq or gptq"},
      {"cpu_deployment", "int8", "", "seed 001 recommendation table: CPU deployment -> int8"},
      {"amd_mi300x", "fp8", "", "recommendation table: AMD MI300X/MI325X -> fp8 (or ptpc_fp8)"},
      {"amd_mi355x", "mxfp4", "", "recommendation table: AMD MI350X/MI355X -> mxfp4 (or mxfp4_fp8, W4A8)"},
      {"nvidia_h100", "fp8", "", "seed 001 recommendation table: NVIDIA H100 -> fp8"},
      {"nvidia_blackwell", "nvfp4", "", "recommendation table: NVIDIA Blackwell -> nvfp4"},
      {"gguf_export", "uint4_wo_32", "awq", "seed 001 recommendation table: GGUF export -> uint4_wo_32 + awq"},
  };
  for (const auto& r : table)
    if (r.row == row) return &r;
  return nullptr;
}

bool find_metric(std::string_view n, MetricDef& out) {
  if (in(n, {"gsm8k", "gsm_8k", "gsm"})) out = {"gsm8k", "gsm8k", true};
  else if (in(n, {"ppl", "perplexity", "perplexities", "wikitext_ppl", "word_perplexity"})) out = {"ppl", "wikitext2", false};
  else if (in(n, {"kld", "kl_divergence", "kl", "kldiv"})) out = {"kld", "wikitext2", false};
  else if (in(n, {"mmlu"})) out = {"mmlu", "mmlu", true};
  else if (in(n, {"hellaswag"})) out = {"hellaswag", "hellaswag", true};
  else if (in(n, {"arc", "arc_challenge", "arc_c"})) out = {"arc_challenge", "arc_challenge", true};
  else if (in(n, {"arc_easy", "arc_e"})) out = {"arc_easy", "arc_easy", true};
  else if (in(n, {"winogrande"})) out = {"winogrande", "winogrande", true};
  else if (in(n, {"piqa"})) out = {"piqa", "piqa", true};
  else if (in(n, {"truthfulqa"})) out = {"truthfulqa", "truthfulqa", true};
  else return false;
  return true;
}

std::string calib_dataset_name(std::string_view n) {
  if (in(n, {"pileval", "pile_val", "pile", "pile_val_backup"})) return "pileval";
  if (in(n, {"c4"})) return "c4";
  if (in(n, {"wikitext", "wikitext2", "wikitext_2", "wikitext_2_raw_v1", "wiki"})) return "wikitext2";
  if (in(n, {"ultrachat", "ultrachat_200k"})) return "ultrachat_200k";
  if (in(n, {"cnn_dailymail", "cnn"})) return "cnn_dailymail";
  return {};
}

std::string eval_text_dataset_name(std::string_view n) {
  if (in(n, {"wikitext", "wikitext2", "wikitext_2", "wikitext_2_raw_v1", "wikitext_2_raw", "wiki"})) return "wikitext2";
  if (in(n, {"tinystories", "tiny_stories"})) return "tinystories";
  return {};
}

bool is_data_file(std::string_view path) {
  for (std::string_view ext : {".jsonl", ".json", ".txt", ".csv", ".parquet", ".raw"})
    if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  return false;
}

bool is_model_family_word(std::string_view n) {
  static const std::regex re(
      R"(^(llama|meta_llama|qwen|mistral|mixtral|gemma|phi|deepseek|opt|falcon|olmo|granite|gpt_oss|smollm|tinyllama)[0-9a-z_.]*$)");
  const std::string s(n);
  return rx_match(s, re);
}

}  // namespace qloom::agent::detail
