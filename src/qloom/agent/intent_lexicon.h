// Word tables of the intent parser (internal to agent/intent): hardware names
// and seed 001's recommendation table, metrics, data set names, precision
// words. Every lookup takes a Token::norm (lowercase, '-' -> '_').
#pragma once

#include <initializer_list>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace qloom::agent::detail {

bool in(std::string_view w, std::initializer_list<std::string_view> set);

// std::regex_match / regex_search on text of at most 256 chars; false beyond
// (libstdc++'s recursive matcher must never see an unbounded prompt token).
template <class... A>
bool rx_match(const std::string& s, A&&... a) {
  return s.size() <= 256 && std::regex_match(s, std::forward<A>(a)...);
}
template <class... A>
bool rx_search(const std::string& s, A&&... a) {
  return s.size() <= 256 && std::regex_search(s, std::forward<A>(a)...);
}

// Scheme / metric / generic words that are never half of a Hugging Face id
// ("fp8/int8" is two words, not an org and a repo).
bool is_vocabulary_word(std::string_view norm);

// "bf16", "fp16", "full" (precision), "unquantized", ...: what "keep X in ..."
// means by leaving X unquantized.
bool is_high_precision_word(std::string_view norm);

// A target accelerator: "mi300x", "8xh100", "h100s", "cpu", ... -> canonical
// name and the seed 001 recommendation-table row it selects ("" = not in the
// table), with a note for hardware the table does not cover.
struct HardwareDef {
  std::string name;
  std::string row;
  std::string note;
};
bool find_hardware(std::string_view norm, HardwareDef& out);

// Seed 001 Step 2 "Priority | Recommended Scheme | Algorithm", with the
// choice qloom makes where the row offers two ("awq or gptq" -> gptq for the
// symmetric int4_wo_32) and its AMD row split per chip: MI300X fp8, MI355X
// mxfp4; plus NVIDIA Blackwell -> nvfp4.
struct Recommendation {
  std::string row;
  std::string scheme;
  std::string algo;
  std::string reason;
};
const Recommendation* find_recommendation(std::string_view row);

// Headline metrics (seed 000 §5.2): "gsm8k" (default), "ppl" on wikitext2,
// "kld", "mmlu", ... from one-token spellings.
struct MetricDef {
  std::string name;
  std::string dataset;
  bool higher_is_better = true;
};
bool find_metric(std::string_view norm, MetricDef& out);

// Calibration data set (quark-cli --dataset) spelled by `norm`, or "".
std::string calib_dataset_name(std::string_view norm);
// Text evaluation data set ("wikitext2", "tinystories") spelled by `norm`, or "".
std::string eval_text_dataset_name(std::string_view norm);
// A path naming a data file (.jsonl .json .txt .csv .parquet), not a model dir.
bool is_data_file(std::string_view path);

// Families whose names people use without the Hub org ("Llama-3.1-8B").
bool is_model_family_word(std::string_view norm);

}  // namespace qloom::agent::detail
