#include "qloom/agent/eval_gap.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>

#include "qloom/core/strings.h"
#include "qloom/core/error.h"

namespace qloom::agent {
namespace {

void require_finite(double v, const char* what) {
  if (!std::isfinite(v)) throw Error(ErrorKind::kInvalidInput, "", what, "score is not a finite number");
}

void check_pairs(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size())
    throw Error(ErrorKind::kUsage, "", "scores",
                "source and quantized were scored on different sample counts (" + std::to_string(a.size()) + " vs " +
                    std::to_string(b.size()) + ")",
                "score both models on the same samples");
  if (a.empty()) throw Error(ErrorKind::kUsage, "", "scores", "no samples were scored");
  for (double x : a) require_finite(x, "source score");
  for (double x : b) require_finite(x, "quantized score");
}

}  // namespace

MeanSd mean_sd(const std::vector<double>& v) {
  MeanSd r;
  if (v.empty()) return r;
  double s = 0;
  for (double x : v) s += x;
  r.mean = s / double(v.size());
  if (v.size() < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  r.sd = std::sqrt(ss / double(v.size() - 1));
  return r;
}

MetricDirection metric_direction(std::string_view metric_name) {
  const std::string m = lower_ascii(metric_name);
  for (const char* key : {"ppl", "perplexity", "kld", "kl_div", "loss", "nll"})
    if (m.find(key) != std::string::npos) return MetricDirection::kLowerIsBetter;
  return MetricDirection::kHigherIsBetter;
}

double relative_gap(double source, double quantized, MetricDirection direction) {
  require_finite(source, "source_score");
  require_finite(quantized, "quantized_score");
  const double loss = direction == MetricDirection::kHigherIsBetter ? source - quantized : quantized - source;
  if (loss <= 0) return 0.0;
  if (source == 0.0) return 1.0;
  return loss / std::fabs(source);
}

Threshold resolve_threshold(std::optional<double> caller, const std::filesystem::path& workspace) {
  if (caller) {
    if (!std::isfinite(*caller) || *caller < 0)
      throw Error(ErrorKind::kUsage, "", "acceptable_eval_gap", "must be a non-negative number",
                  "e.g. 0.03 for a 3% relative gap");
    return {*caller, "caller"};
  }
  const std::filesystem::path file = workspace / "eval_gap_threshold.txt";
  std::ifstream in(file);
  if (!in) return {0.03, "default"};
  std::string line;
  std::getline(in, line);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(line, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  while (used < line.size() && std::isspace(static_cast<unsigned char>(line[used]))) ++used;
  if (used == 0 || used != line.size() || !std::isfinite(v) || v < 0)
    throw Error(ErrorKind::kInvalidInput, file.string(), "line 1", "expected one non-negative float, got '" + line + "'",
                "write a single number such as 0.05");
  return {v, "eval_gap_threshold.txt"};
}

namespace {

// The statistics both paired estimates start from: mean and sd of each side
// and of the differences quantized - source, and sqrt(n).
struct Paired {
  MeanSd source, quantized, diff;
  double root_n = 1;
};
Paired paired_stats(const std::vector<double>& source, const std::vector<double>& quantized) {
  check_pairs(source, quantized);
  std::vector<double> d(source.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = quantized[i] - source[i];
  return {mean_sd(source), mean_sd(quantized), mean_sd(d), std::sqrt(double(source.size()))};
}

}  // namespace

GapEstimate paired_accuracy_gap(std::string metric_name, const std::vector<double>& source,
                                const std::vector<double>& quantized) {
  const Paired p = paired_stats(source, quantized);
  GapEstimate g;
  g.metric_name = std::move(metric_name);
  g.direction = MetricDirection::kHigherIsBetter;
  g.n = source.size();
  g.source_score = p.source.mean;
  g.quantized_score = p.quantized.mean;
  g.source_stderr = p.source.sd / p.root_n;
  g.quantized_stderr = p.quantized.sd / p.root_n;
  g.relative_gap = relative_gap(p.source.mean, p.quantized.mean, g.direction);
  if (p.source.mean == 0.0) {
    g.gap_stderr = 0;
    g.note = "source score is 0: the relative gap is undefined; reported as 0 when the quantized model is no worse, else 1";
  } else {
    g.gap_stderr = p.diff.sd / p.root_n / std::fabs(p.source.mean);
  }
  return g;
}

GapEstimate paired_ppl_gap(std::string metric_name, const std::vector<double>& source_nll,
                           const std::vector<double>& quantized_nll) {
  const Paired p = paired_stats(source_nll, quantized_nll);
  GapEstimate g;
  g.metric_name = std::move(metric_name);
  g.direction = MetricDirection::kLowerIsBetter;
  g.n = source_nll.size();
  g.source_score = std::exp(p.source.mean);
  g.quantized_score = std::exp(p.quantized.mean);
  g.source_stderr = g.source_score * p.source.sd / p.root_n;
  g.quantized_stderr = g.quantized_score * p.quantized.sd / p.root_n;
  g.relative_gap = std::max(0.0, std::exp(p.diff.mean) - 1.0);
  g.gap_stderr = std::exp(p.diff.mean) * p.diff.sd / p.root_n;
  return g;
}

GateVerdict judge(const GapEstimate& g, double threshold, double z) {
  // A higher-is-better source that scores 0 leaves nothing to lose: a gap
  // of 0 there says nothing about the quantization (a tiny model on gsm8k).
  if (g.direction == MetricDirection::kHigherIsBetter && g.source_score == 0 && g.quantized_score == 0)
    return GateVerdict::kUnresolved;
  if (g.relative_gap + z * g.gap_stderr <= threshold) return GateVerdict::kPass;
  if (g.relative_gap - z * g.gap_stderr > threshold) return GateVerdict::kFail;
  return GateVerdict::kUnresolved;
}

const char* verdict_name(GateVerdict v) {
  switch (v) {
    case GateVerdict::kPass: return "pass";
    case GateVerdict::kFail: return "fail";
    case GateVerdict::kUnresolved: return "unresolved";
  }
  return "?";
}

nlohmann::ordered_json eval_report_json(const GapEstimate& g, const std::string& dataset, const std::string& backend,
                                        std::optional<size_t> limit) {
  nlohmann::ordered_json j;
  j["metric_name"] = g.metric_name;
  j["dataset"] = dataset;
  j["backend"] = backend;
  j["source_score"] = g.source_score;
  j["quantized_score"] = g.quantized_score;
  j["relative_gap"] = g.relative_gap;
  j["n"] = g.n;
  j["limit"] = limit ? nlohmann::ordered_json(*limit) : nlohmann::ordered_json(nullptr);
  j["source_stderr"] = g.source_stderr;
  j["quantized_stderr"] = g.quantized_stderr;
  j["gap_stderr"] = g.gap_stderr;
  return j;
}

}  // namespace qloom::agent
