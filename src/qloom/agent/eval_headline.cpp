#include "qloom/agent/eval_headline.h"

#include <cstdlib>
#include <regex>
#include <vector>

#include "qloom/core/strings.h"
#include "qloom/agent/eval_phase.h"

namespace qloom::agent {
namespace {


// The cells of a markdown table row "| a | b |"; empty when the line is not one.
std::vector<std::string> cells(const std::string& line) {
  const std::string t = trim(line, " \t");
  std::vector<std::string> out;
  if (t.size() < 2 || t.front() != '|' || t.back() != '|') return out;
  size_t pos = 1;
  while (pos < t.size()) {
    const size_t bar = t.find('|', pos);
    if (bar == std::string::npos) break;
    out.push_back(trim(t.substr(pos, bar - pos), " \t"));
    pos = bar + 1;
  }
  return out;
}

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

bool task_matches(const std::string& cell, const std::string& task) {
  std::string c = cell;
  while (!c.empty() && (c[0] == ' ' || c[0] == '-')) c.erase(0, 1);  // lm-eval indents subtasks " - x"
  return c == task || c.rfind(task + "_", 0) == 0;
}

// metric cell and filter cell (lm-eval) against the headline.
bool metric_matches(const EvalMetric& m, const std::string& metric, const std::string& filter) {
  if (m.headline == "exact_match,strict-match") return metric == "exact_match" && (filter.empty() || filter == "strict-match");
  if (m.headline == "exact_match,flexible-extract")
    return metric == "exact_match" && (filter.empty() || filter == "flexible-extract");
  if (m.headline == "acc" || m.headline == "acc_norm") return metric == m.headline;
  return false;
}

std::optional<Headline> from_tables(const std::string& md, const EvalMetric& m) {
  std::vector<std::string> header;
  std::string task;
  size_t pos = 0;
  while (pos <= md.size()) {
    size_t end = md.find('\n', pos);
    if (end == std::string::npos) end = md.size();
    const std::vector<std::string> c = cells(md.substr(pos, end - pos));
    pos = end + 1;
    if (c.empty()) {
      header.clear();
      continue;
    }
    if (header.empty()) {
      header = c;
      task.clear();
      continue;
    }
    if (c[0].find("---") != std::string::npos || c[0].find(":-") != std::string::npos) continue;
    const bool lm_eval = header.size() >= 7 && header[0] == "Tasks" && header[4] == "Metric";
    const bool qloom = header.size() == 4 && header[0] == "Task" && header[1] == "Metric";
    if (!lm_eval && !qloom) continue;
    if (!c[0].empty()) task = c[0];
    if (!task_matches(task, m.task) || c.size() != header.size()) continue;
    const std::string metric = lm_eval ? c[4] : c[1];
    const std::string filter = lm_eval ? c[2] : "";
    if (!metric_matches(m, metric, filter)) continue;
    if (const auto v = number(lm_eval ? c[6] : c[2])) return Headline{*v, lm_eval ? "lm-eval table" : "qloom table"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<Headline> parse_eval_headline(const std::string& markdown, const EvalMetric& m) {
  static const std::regex line(R"(\*\*(Accuracy|Perplexity):\*\*\s*([-+0-9.eE]+))");
  std::smatch hit;
  if (std::regex_search(markdown, hit, line)) {
    const bool ppl = hit[1] == "Perplexity";
    const bool want_ppl = m.task == "ppl" || m.task == "kld";
    if (ppl == want_ppl)
      if (const auto v = number(hit[2])) return Headline{*v, "headline line"};
  }
  return from_tables(markdown, m);
}

}  // namespace qloom::agent
