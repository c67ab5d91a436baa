#include "qloom/eval/eval_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"

namespace qloom::eval {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string fmt2(const char* f, double a, double b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

struct Row {
  std::string task, metric, value, stderr_;
};

// Binomial standard error of a mean of 0/1 scores (lm-eval: sample stddev / sqrt(n)).
double binomial_stderr(double p, int64_t n) {
  return n > 1 ? std::sqrt(p * (1 - p) / double(n - 1)) : 0.0;
}

}  // namespace

std::string ppl_line(double ppl, double stderr_) {
  return fmt2("PPL = %.4f +/- %.4f", ppl, stderr_);
}

std::string kld_block(const KldSummary& s) {
  std::string o;
  o += "====== Perplexity statistics ======\n";
  o += fmt2("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.ppl_quantized,
            s.ppl_quantized_stderr);
  o += fmt2("Mean PPL(base)                : %10.6f ± %10.6f\n", s.ppl_source, s.ppl_source_stderr);
  o += fmt2("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.ppl_ratio, s.ppl_ratio_stderr);
  o += "\n====== KL divergence statistics ======\n";
  o += fmt2("Mean    KLD: %10.6f ± %10.6f\n", s.kld_mean, s.kld_mean_stderr);
  o += fmt("Maximum KLD: %10.6f\n", s.kld_max);
  o += fmt("99.0%%   KLD: %10.6f\n", s.kld_p99);
  o += fmt("Median  KLD: %10.6f\n", s.kld_median);
  o += "\n====== Token probability statistics ======\n";
  o += fmt2("Same top p: %6.3f ± %5.3f %%\n", 100.0 * s.top1_agreement, 100.0 * s.top1_stderr);
  return o;
}

std::string render_table(const EvalReport& r) {
  std::vector<Row> rows;
  if (r.task == "ppl") {
    rows.push_back({r.task, "ppl", fmt("%.4f", r.ppl), fmt("%.4f", r.ppl_stderr)});
    rows.push_back({r.task, "tokens_scored", std::to_string(r.tokens_scored), ""});
    rows.push_back({r.task, "windows", std::to_string(r.windows), ""});
  } else if (r.task == "kld") {
    const KldSummary& k = r.kld;
    rows.push_back({r.task, "kld_mean", fmt("%.6f", k.kld_mean), fmt("%.6f", k.kld_mean_stderr)});
    rows.push_back({r.task, "kld_median", fmt("%.6f", k.kld_median), ""});
    rows.push_back({r.task, "kld_p99", fmt("%.6f", k.kld_p99), ""});
    rows.push_back({r.task, "top1_agreement_%", fmt("%.3f", 100 * k.top1_agreement),
                    fmt("%.3f", 100 * k.top1_stderr)});
    rows.push_back({r.task, "ppl_source", fmt("%.4f", k.ppl_source), fmt("%.4f", k.ppl_source_stderr)});
    rows.push_back({r.task, "ppl_quantized", fmt("%.4f", k.ppl_quantized),
                    fmt("%.4f", k.ppl_quantized_stderr)});
    rows.push_back({r.task, "ppl_ratio", fmt("%.6f", k.ppl_ratio), fmt("%.6f", k.ppl_ratio_stderr)});
  } else if (r.is_multiple_choice()) {
    rows.push_back({r.task, "acc", fmt("%.4f", r.acc), fmt("%.4f", r.acc_stderr)});
    if (r.has_acc_norm) rows.push_back({r.task, "acc_norm", fmt("%.4f", r.acc_norm), fmt("%.4f", r.acc_norm_stderr)});
    if (r.paired) {
      rows.push_back({r.task, "acc (source)", fmt("%.4f", r.source_acc), ""});
      rows.push_back({r.task, "acc - source (paired)", fmt("%+.4f", r.delta_acc), fmt("%.4f", r.delta_acc_stderr)});
      if (r.has_acc_norm) {
        rows.push_back({r.task, "acc_norm (source)", fmt("%.4f", r.source_acc_norm), ""});
        rows.push_back({r.task, "acc_norm - source (paired)", fmt("%+.4f", r.delta_acc_norm),
                        fmt("%.4f", r.delta_acc_norm_stderr)});
      }
    }
    rows.push_back({r.task, "n", std::to_string(r.n), ""});
  } else {
    rows.push_back({r.task, "exact_match,strict-match", fmt("%.4f", r.accuracy_strict),
                    fmt("%.4f", binomial_stderr(r.accuracy_strict, r.n))});
    rows.push_back({r.task, "exact_match,flexible-extract", fmt("%.4f", r.accuracy_flexible),
                    fmt("%.4f", binomial_stderr(r.accuracy_flexible, r.n))});
    rows.push_back({r.task, "n", std::to_string(r.n), ""});
  }
  size_t w[4] = {4, 6, 5, 6};
  for (const Row& x : rows) {
    w[0] = std::max(w[0], x.task.size());
    w[1] = std::max(w[1], x.metric.size());
    w[2] = std::max(w[2], x.value.size());
    w[3] = std::max(w[3], x.stderr_.size());
  }
  auto pad = [](const std::string& s, size_t n, bool right) {
    const std::string fill(n > s.size() ? n - s.size() : 0, ' ');
    return right ? fill + s : s + fill;
  };
  // Appends only (gcc 12 warns falsely on "literal" + std::string).
  std::string o;
  auto add_row = [&](const std::string& a, const std::string& b, const std::string& c,
                     const std::string& d) {
    o += "| ";
    o += pad(a, w[0], false);
    o += " | ";
    o += pad(b, w[1], false);
    o += " | ";
    o += pad(c, w[2], true);
    o += " | ";
    o += pad(d, w[3], true);
    o += " |\n";
  };
  add_row("Task", "Metric", "Value", "Stderr");
  o += '|';
  o.append(w[0] + 2, '-');
  o += '|';
  o.append(w[1] + 2, '-');
  o += '|';
  o.append(w[2] + 1, '-');
  o += ":|";
  o.append(w[3] + 1, '-');
  o += ":|\n";
  for (const Row& x : rows) add_row(x.task, x.metric, x.value, x.stderr_);
  return o;
}

nlohmann::json report_to_json(const EvalReport& r) {
  nlohmann::json j;
  j["task"] = r.task;
  j["model"] = r.model;
  j["dataset"] = r.dataset;
  j["seq_len"] = r.seq_len;
  j["limit"] = r.limit ? nlohmann::json(*r.limit) : nlohmann::json(nullptr);
  if (!r.protocol.empty()) j["protocol"] = r.protocol;
  if (!r.source.empty()) j["source"] = r.source;
  j["backend"] = r.backend;
  if (!r.runtime.empty() && r.runtime != "simulate") j["runtime"] = r.runtime;
  if (!r.server.empty()) {
    j["server"] = r.server;
    j["served_model"] = r.served_model;
  }
  if (r.task == "ppl") {
    j["windows"] = r.windows;
    j["tokens_scored"] = r.tokens_scored;
    j["ppl"] = r.ppl;
    j["ppl_stderr"] = r.ppl_stderr;
  } else if (r.task == "kld") {
    const KldSummary& k = r.kld;
    j["windows"] = r.windows;
    j["tokens_scored"] = k.count;
    j["kld_mean"] = k.kld_mean;
    j["kld_median"] = k.kld_median;
    j["kld_p99"] = k.kld_p99;
    j["kld_max"] = k.kld_max;
    j["top1_agreement"] = k.top1_agreement;
    j["ppl_source"] = k.ppl_source;
    j["ppl_quantized"] = k.ppl_quantized;
    j["ppl_ratio"] = k.ppl_ratio;
  } else if (r.is_multiple_choice()) {
    j["n"] = r.n;
    j["n_total"] = r.n_total;
    j["num_fewshot"] = r.num_fewshot;
    j["acc"] = r.acc;
    j["acc_stderr"] = r.acc_stderr;
    if (r.has_acc_norm) {
      j["acc_norm"] = r.acc_norm;
      j["acc_norm_stderr"] = r.acc_norm_stderr;
    }
    if (r.paired) {
      j["source_acc"] = r.source_acc;
      j["delta_acc"] = r.delta_acc;
      j["delta_acc_stderr"] = r.delta_acc_stderr;
      if (r.has_acc_norm) {
        j["source_acc_norm"] = r.source_acc_norm;
        j["delta_acc_norm"] = r.delta_acc_norm;
        j["delta_acc_norm_stderr"] = r.delta_acc_norm_stderr;
      }
    }
  } else {
    j["n"] = r.n;
    j["accuracy_strict"] = r.accuracy_strict;
    j["accuracy_flexible"] = r.accuracy_flexible;
  }
  j["seconds"] = r.seconds;
  j["notes"] = r.notes;
  return j;
}

void write_report_json(const EvalReport& r, const std::filesystem::path& path) {
  io::write_file_atomic(path, report_to_json(r).dump(2) + "\n");
}

void write_mc_samples(const EvalReport& r, const std::filesystem::path& path) {
  if (!r.is_multiple_choice())
    throw Error(ErrorKind::kUsage, "", "--log_samples", "--log_samples is written for the multiple-choice tasks only",
                "drop --log_samples, or evaluate hellaswag, arc_easy, arc_challenge, piqa, winogrande or mmlu");
  std::string out;
  for (size_t d = 0; d < r.samples.mc_items.size(); ++d) {
    const McItem& it = r.samples.mc_items[d];
    nlohmann::json j;
    j["doc_id"] = d;
    j["gold"] = it.gold;
    j["lls"] = nlohmann::json::array();
    j["is_greedy"] = nlohmann::json::array();
    j["tokens"] = nlohmann::json::array();
    for (const OptionScore& o : it.options) {
      j["lls"].push_back(o.loglik);
      j["is_greedy"].push_back(o.greedy);
      j["tokens"].push_back(o.tokens);
    }
    j["acc"] = it.acc() ? 1 : 0;
    if (r.has_acc_norm) j["acc_norm"] = it.acc_norm() ? 1 : 0;
    out += j.dump() + "\n";
  }
  io::write_file_atomic(path, out);
}

}  // namespace qloom::eval
