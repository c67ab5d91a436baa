// EvalReport: the outcome of one `qloom eval` run, rendered as
//  - the headline (ppl: "PPL = x.xxxx +/- y.yyyy"; kld: llama-perplexity's
//    KL-divergence statistics block),
//  - an lm-eval style markdown table "| Task | Metric | Value | Stderr |",
//  - one JSON object: task, model, dataset, seq_len, limit, and per task
//      ppl:   windows, tokens_scored, ppl, ppl_stderr
//      kld:   kld_mean, kld_median, kld_p99, top1_agreement (fraction 0..1),
//             ppl_source, ppl_quantized, ppl_ratio (+ windows, tokens_scored)
//      gsm8k: n, accuracy_strict, accuracy_flexible (fractions 0..1)
//      hellaswag, arc_easy, arc_challenge, piqa, winogrande, mmlu (multiple
//             choice): n, n_total, num_fewshot, acc, acc_stderr, and where
//             lm-eval reports it acc_norm, acc_norm_stderr (fractions 0..1);
//             with --source also source_acc[_norm], delta_acc[_norm] and
//             their paired stderr
//    plus protocol, source, seconds, limited_by and notes.
// The per-sample scores (EvalReport::samples) are not part of the JSON (they
// can be large); callers that pair two runs (agent/eval_phase.h) read them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/eval/kld.h"
#include "qloom/eval/multiple_choice.h"
#include "qloom/eval/perplexity.h"

namespace qloom::eval {

// Per-sample scores of one run, in sample order, so two runs on the same
// samples (a source and its quantized model) can be paired.
struct SampleScores {
  // ppl: the NLL of every scored token (tokens_scored values; exp(mean) is
  // the ppl). kld: the quantized (evaluated) model's NLLs of the same tokens.
  std::vector<double> token_nll;
  // kld only: the source model's NLLs of the same tokens.
  std::vector<double> source_token_nll;
  // gsm8k: per question (n values), 1 when that filter's answer is correct.
  std::vector<uint8_t> strict_correct, flexible_correct;
  // multiple choice: per document (n values), 1 when acc / acc_norm is right,
  // and every option's log-likelihood (what --log_samples writes).
  std::vector<uint8_t> acc_correct, acc_norm_correct;
  std::vector<McItem> mc_items;
};

struct EvalReport {
  std::string task;  // "ppl", "kld", "gsm8k", or a multiple-choice task
  std::string model, source, dataset, protocol;
  // Who computed the scores: "qloom" (the engine in-process) or, over
  // --server, the server's kind ("qloom", "vllm", "sglang",
  // "openai-compatible") with its URL and served model name.
  std::string backend = "qloom";
  std::string server, served_model;
  // How the evaluated model computed: "simulate" (Quark's arithmetic),
  // "native", either with "+bf16" (--compute bf16); empty over --server.
  std::string runtime;
  int64_t seq_len = 0;                // 0 for gsm8k
  std::optional<int64_t> limit;       // --limit as given
  std::vector<std::string> notes;     // what was limited and why
  double seconds = 0;

  // ppl
  int64_t windows = 0, windows_total = 0, tokens_scored = 0;
  double ppl = 0, ppl_stderr = 0;
  // kld
  KldSummary kld;
  // gsm8k and multiple choice
  int64_t n = 0, n_total = 0;
  double accuracy_strict = 0, accuracy_flexible = 0;
  // multiple choice
  int num_fewshot = 0;
  bool has_acc_norm = false;
  double acc = 0, acc_stderr = 0, acc_norm = 0, acc_norm_stderr = 0;
  // multiple choice with --source: the source model on the same documents,
  // and the paired difference (evaluated - source) with the standard error
  // of the per-document differences, sd(d) / sqrt(n).
  bool paired = false;
  double source_acc = 0, source_acc_norm = 0;
  double delta_acc = 0, delta_acc_stderr = 0, delta_acc_norm = 0, delta_acc_norm_stderr = 0;
  bool is_multiple_choice() const { return !task.empty() && task != "ppl" && task != "kld" && task != "gsm8k"; }

  SampleScores samples;
};

// "PPL = 12.3456 +/- 0.1234"
std::string ppl_line(double ppl, double stderr_);
// The llama-perplexity style statistics of a kld run.
std::string kld_block(const KldSummary& s);
std::string render_table(const EvalReport& r);
nlohmann::json report_to_json(const EvalReport& r);
// Writes report_to_json(r).dump(2) atomically; throws kIo on failure.
void write_report_json(const EvalReport& r, const std::filesystem::path& path);
// Multiple choice: one JSON object per document, as lm-eval's --log_samples
// keeps them: {"doc_id", "gold", "lls": [...], "is_greedy": [...], "tokens":
// [continuation tokens scored per option], "acc", "acc_norm"}; written atomically. Throws kUsage for another task.
void write_mc_samples(const EvalReport& r, const std::filesystem::path& path);

}  // namespace qloom::eval
