// GSM8K as lm-evaluation-harness's "gsm8k" task (lm_eval/tasks/gsm8k/gsm8k.yaml,
// version 3.0, checked against EleutherAI/lm-evaluation-harness HEAD 4e7e0d4):
//   doc_to_text "Question: {{question}}\nAnswer:", doc_to_target "{{answer}}",
//   target_delimiter " ", fewshot_delimiter "\n\n", num_fewshot 5 from the
//   train split drawn by ContextSampler: random.Random(1234).sample(train, 5)
//   per test question, one shared generator advanced in question order
//   (fewshot_random_seed default 1234, lm_eval/defaults.py).
//   Prompt = concat over shots of text + " " + target + "\n\n", then the
//   question's text ("Question: ...\nAnswer:").
//   generate_until until ["Question:", "</s>", "<|im_end|>"] plus the
//   tokenizer's EOS string, greedy, max_gen_toks 256; the prompt is encoded
//   with the tokenizer's default special tokens (BOS) and left-truncated to
//   max_length - max_gen_toks tokens (HFLM.generate_until); the continuation
//   is decoded with skip_special_tokens and cut at the first stop string.
//   Filters: strict-match regex "#### (\-?[0-9\.\,]+)", first match;
//   flexible-extract regex "(-?[$0-9.,]{2,})|(-?[0-9]+)", last match
//   (group_select -1), first non-empty group; both .strip()ped, "[invalid]"
//   when nothing matches. exact_match: on prediction and reference, remove in
//   order "," then "$" then "(?s).*#### " then "\.$", lowercase, compare.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qloom/engine/model.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/datasets.h"

namespace qloom::eval {

struct Gsm8kConfig {
  int num_fewshot = 5;
  uint64_t fewshot_seed = 1234;
  int64_t max_gen_toks = 256;
};

// Prompts for the first n test docs (n <= test.size()).
std::vector<std::string> build_gsm8k_prompts(const std::vector<Gsm8kDoc>& test,
                                             const std::vector<Gsm8kDoc>& train, size_t n,
                                             const Gsm8kConfig& cfg = {});

std::string gsm8k_extract_strict(const std::string& response);
std::string gsm8k_extract_flexible(const std::string& response);
// The exact_match normalisation (regexes_to_ignore + ignore_case).
std::string gsm8k_normalize(const std::string& s);
bool gsm8k_exact_match(const std::string& prediction, const std::string& reference);

// Cuts `text` at the earliest occurrence of any non-empty stop string.
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stops);

// Greedy generation with the KV cache: prefill `prompt`, then one token per
// step until an EOS id, a stop string in the decoded continuation, or
// max_new tokens. Returns the decoded continuation cut at the first stop.
struct GenerateOptions {
  int64_t max_new = 256;
  std::vector<std::string> stops;
  std::vector<int32_t> eos_ids;
};
std::string generate_greedy(engine::Model& model, const engine::ForwardHooks* hooks,
                            const text::Tokenizer& tok, const std::vector<int32_t>& prompt,
                            const GenerateOptions& opt);

struct Gsm8kItem {
  std::string response, strict, flexible;
  bool strict_ok = false, flexible_ok = false;
};
struct Gsm8kResult {
  std::vector<Gsm8kItem> items;
  int64_t n() const { return int64_t(items.size()); }
  double accuracy_strict() const;
  double accuracy_flexible() const;
};

// Runs the first `n` test questions. on_item(done) as in run_perplexity.
// Generates the answer to one prompt's token ids (in-process: generate_greedy;
// over a server: openai_client.h).
using Generator = std::function<std::string(const std::vector<int32_t>& prompt, const GenerateOptions& gen)>;

// `max_length`: the model's positions (the prompt is left-truncated to
// max_length - max_gen_toks); `config_eos_ids`: config.json's eos ids, added
// to the tokenizer's as stops.
Gsm8kResult run_gsm8k(const Generator& generate, const text::Tokenizer& tok, const std::vector<Gsm8kDoc>& test,
                      const std::vector<Gsm8kDoc>& train, size_t n, const Gsm8kConfig& cfg, int64_t max_length,
                      const std::vector<int64_t>& config_eos_ids, const std::function<bool(int64_t)>& on_item = {});

Gsm8kResult run_gsm8k(engine::Model& model, const engine::ForwardHooks* hooks,
                      const text::Tokenizer& tok, const std::vector<Gsm8kDoc>& test,
                      const std::vector<Gsm8kDoc>& train, size_t n, const Gsm8kConfig& cfg,
                      const std::function<bool(int64_t done)>& on_item = {});

}  // namespace qloom::eval
