// The agent's accuracy gate (seed 000 §5.3–5.4, mission.md §7): the relative
// gap between the source's and the quantized model's headline scores, the
// threshold it is judged against, and whether the sample size can tell.
//
// relative_gap = (source - quantized) / source for higher-is-better metrics
// (accuracy), (quantized - source) / source for lower-is-better ones
// (perplexity, KLD, loss); negative gaps become 0. A source score of 0 makes
// the ratio undefined: the gap is 0 when the quantized score is no worse,
// else 1 (the whole score lost), and the report says so.
//
// Scores are paired (both models on the same samples), so the gap's standard
// error comes from the per-sample differences: for accuracy
// se(gap) = sd(src_i - q_i) / sqrt(n) / mean(src); for perplexity, from
// per-token NLL differences d_t: ppl_q / ppl_s - 1 = exp(mean d) - 1 and
// se = exp(mean d) * sd(d) / sqrt(n) (delta method).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::agent {

enum class MetricDirection { kHigherIsBetter, kLowerIsBetter };

// ppl / perplexity / wikitext*_ppl / kld / loss / nll are lower-is-better;
// everything else (gsm8k, mmlu, accuracy, exact_match...) higher-is-better.
MetricDirection metric_direction(std::string_view metric_name);

// As the file comment says; never negative, never NaN (non-finite scores
// throw Error kInvalidInput naming the score).
double relative_gap(double source, double quantized, MetricDirection direction);

// The threshold: `caller` when given, else <workspace>/eval_gap_threshold.txt
// (one float on the first line; malformed -> Error kInvalidInput naming the
// file), else 0.03.
struct Threshold {
  double value = 0.03;
  std::string source;  // "caller" | "eval_gap_threshold.txt" | "default"
};
Threshold resolve_threshold(std::optional<double> caller, const std::filesystem::path& workspace);

// Mean and sample standard deviation (n - 1; 0 for fewer than two values).
struct MeanSd {
  double mean = 0, sd = 0;
};
MeanSd mean_sd(const std::vector<double>& v);

struct GapEstimate {
  std::string metric_name;
  MetricDirection direction = MetricDirection::kHigherIsBetter;
  size_t n = 0;  // paired samples (questions, or scored tokens for ppl)
  double source_score = 0, quantized_score = 0;
  double source_stderr = 0, quantized_stderr = 0;
  double relative_gap = 0, gap_stderr = 0;
  std::string note;  // e.g. the zero-source rule applied
};

// Per-question scores in [0, 1] (1 = correct), same length and order.
// Throws Error kUsage for different lengths or no samples.
GapEstimate paired_accuracy_gap(std::string metric_name, const std::vector<double>& source,
                                const std::vector<double>& quantized);
// Per-token negative log-likelihoods of the same tokens; scores are ppl.
GapEstimate paired_ppl_gap(std::string metric_name, const std::vector<double>& source_nll,
                           const std::vector<double>& quantized_nll);

// kPass: gap + z·se <= threshold; kFail: gap - z·se > threshold; otherwise
// the sample size cannot tell (kUnresolved), e.g. a 3% threshold judged on 40
// gsm8k problems; also kUnresolved when a higher-is-better source and the
// quantized model both score 0 (nothing to lose, nothing learned). z = 1.96.
enum class GateVerdict { kPass, kFail, kUnresolved };
GateVerdict judge(const GapEstimate& g, double threshold, double z = 1.96);
const char* verdict_name(GateVerdict v);  // "pass" | "fail" | "unresolved"

// eval_report.json: the seed's keys first and exactly as it names them
// (metric_name, dataset, backend, source_score, quantized_score,
// relative_gap), then n, limit (null when unlimited), source_stderr,
// quantized_stderr, gap_stderr.
nlohmann::ordered_json eval_report_json(const GapEstimate& g, const std::string& dataset,
                                        const std::string& backend, std::optional<size_t> limit);

}  // namespace qloom::agent
