#include "qloom/agent/eval_gap.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>

#include "qloom/core/error.h"

namespace qloom::agent {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void require_finite(double v, const char* what) {
  if (!std::isfinite(v)) throw Error(ErrorKind::kInvalidInput, "", what, "score is not a finite number");
}

struct MeanSd {
  double mean = 0, sd = 0;
};
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

MetricDirection metric_direction(std::string_view metric_name) {
  const std::string m = lower(metric_name);
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

GapEstimate paired_accuracy_gap(std::string metric_name, const std::vector<double>& source,
                                const std::vector<double>& quantized) {
  check_pairs(source, quantized);
  GapEstimate g;
  g.metric_name = std::move(metric_name);
  g.direction = MetricDirection::kHigherIsBetter;
  g.n = source.size();
  const MeanSd s = mean_sd(source), q = mean_sd(quantized);
  std::vector<double> d(source.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = source[i] - quantized[i];
  const MeanSd dd = mean_sd(d);
  const double rn = std::sqrt(double(g.n));
  g.source_score = s.mean;
  g.quantized_score = q.mean;
  g.source_stderr = s.sd / rn;
  g.quantized_stderr = q.sd / rn;
  g.relative_gap = relative_gap(s.mean, q.mean, g.direction);
  if (s.mean == 0.0) {
    g.gap_stderr = 0;
    g.note = "source score is 0: the relative gap is undefined; reported as 0 when the quantized model is no worse, else 1";
  } else {
    g.gap_stderr = dd.sd / rn / std::fabs(s.mean);
  }
  return g;
}

GapEstimate paired_ppl_gap(std::string metric_name, const std::vector<double>& source_nll,
                           const std::vector<double>& quantized_nll) {
  check_pairs(source_nll, quantized_nll);
  GapEstimate g;
  g.metric_name = std::move(metric_name);
  g.direction = MetricDirection::kLowerIsBetter;
  g.n = source_nll.size();
  const MeanSd s = mean_sd(source_nll), q = mean_sd(quantized_nll);
  std::vector<double> d(source_nll.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = quantized_nll[i] - source_nll[i];
  const MeanSd dd = mean_sd(d);
  const double rn = std::sqrt(double(g.n));
  g.source_score = std::exp(s.mean);
  g.quantized_score = std::exp(q.mean);
  g.source_stderr = g.source_score * s.sd / rn;
  g.quantized_stderr = g.quantized_score * q.sd / rn;
  g.relative_gap = std::max(0.0, std::exp(dd.mean) - 1.0);
  g.gap_stderr = std::exp(dd.mean) * dd.sd / rn;
  return g;
}

GateVerdict judge(const GapEstimate& g, double threshold, double z) {
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
