// resolve_eval_metric: a prompt's metric and data set names -> the run_eval
// task, its data set and headline, or why it cannot run offline.
#include <filesystem>
#include <string>

#include "qloom/agent/eval_phase.h"
#include "qloom/agent/eval_text.h"
#include "qloom/eval/mc_tasks.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using namespace eval_text;  // NOLINT: the helpers are this file's vocabulary

std::string absolute_path(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

// hellaswag, arc_easy (arc_e), arc_challenge (arc, arc_c: the leaderboards'
// "ARC"), piqa, winogrande, mmlu, each optionally suffixed _acc or _acc_norm.
// The headline is lm-eval's acc_norm where the task reports it, else acc.
bool resolve_mc_metric(const std::string& name, EvalMetric& m) {
  std::string base = name, metric;
  for (const char* suffix : {"_acc_norm", "_acc"}) {
    const std::string s = suffix;
    if (base.size() > s.size() && base.ends_with(s)) {
      base.resize(base.size() - s.size());
      metric = s.substr(1);
      break;
    }
  }
  if (one_of(base, {"arc", "arc_c", "ai2_arc_challenge"})) base = "arc_challenge";
  if (one_of(base, {"arc_e", "ai2_arc_easy"})) base = "arc_easy";
  const eval::McTaskInfo* task = eval::find_mc_task(base);
  if (task == nullptr || (metric == "acc_norm" && !task->acc_norm)) return false;
  m.task = task->name;
  m.headline = !metric.empty() ? metric : (task->acc_norm ? "acc_norm" : "acc");
  m.metric_name = m.headline == (task->acc_norm ? "acc_norm" : "acc") ? task->name : task->name + "_" + m.headline;
  return true;
}

// hellaswag has a bundled subset; every task takes a local file.
void resolve_mc_dataset(const std::string& eval_dataset, EvalMetric& m) {
  std::error_code ec;
  const std::string ds = normalize_name(eval_dataset);
  if (!eval_dataset.empty() && fs::is_regular_file(eval_dataset, ec)) {
    m.dataset = absolute_path(eval_dataset);
  } else if ((ds.empty() || ds == m.task) && m.task == "hellaswag") {
    m.dataset = "hellaswag";
  } else {
    m.dataset = eval_dataset.empty() ? m.task : eval_dataset;
    const eval::McTaskInfo* t = eval::find_mc_task(m.task);
    m.unavailable = env_reason("data set '" + m.dataset + "' is not available offline for " + m.task +
                               (m.task == "hellaswag" ? std::string(" (bundled: hellaswag, the first 200 validation tasks;")
                                                      : std::string(" (qloom bundles no " + m.task + " documents;")) +
                               " or a local file: " + t->formats + ")");
  }
}

}  // namespace

EvalMetric resolve_eval_metric(const std::string& metric_name, const std::string& eval_dataset) {
  EvalMetric m;
  const std::string name = normalize_name(metric_name);
  const std::string ds = normalize_name(eval_dataset);
  std::string default_ds;
  if (one_of(name, {"", "gsm8k", "gsm_8k", "gsm", "gsm8k_strict", "gsm8k_strict_match", "gsm8k_5shot"})) {
    m.metric_name = "gsm8k";
    m.task = "gsm8k";
    m.headline = "exact_match,strict-match";
  } else if (one_of(name, {"gsm8k_flexible", "gsm8k_flexible_extract"})) {
    m.metric_name = "gsm8k_flexible";
    m.task = "gsm8k";
    m.headline = "exact_match,flexible-extract";
  } else if (one_of(name, {"ppl", "perplexity", "wikitext", "wikitext2", "wikitext_2", "wikitext_ppl",
                           "wikitext2_ppl", "wikitext_2_ppl", "wikitext_2_raw_v1", "word_perplexity",
                           "tinystories", "tiny_stories", "tinystories_ppl"})) {
    m.metric_name = "ppl";
    m.task = "ppl";
    m.headline = "perplexity";
    if (name.rfind("tinystories", 0) == 0 || name == "tiny_stories") default_ds = "tinystories";
  } else if (one_of(name, {"kld", "kl", "kl_div", "kldiv", "kl_divergence"})) {
    m.metric_name = "kld";
    m.task = "kld";
    m.headline = "perplexity";
  } else if (resolve_mc_metric(name, m)) {
    resolve_mc_dataset(eval_dataset, m);
    return m;
  } else {
    m.metric_name = metric_name;
    m.unavailable = env_reason("metric '" + metric_name +
                               "' is not available offline: the native engine has no evaluator for it "
                               "(available: gsm8k, gsm8k_flexible, ppl, kld, hellaswag, arc_easy, "
                               "arc_challenge, piqa, winogrande, mmlu)");
    return m;
  }

  std::error_code ec;
  const bool file = !eval_dataset.empty() && fs::is_regular_file(eval_dataset, ec);
  if (m.task == "gsm8k") {
    if (ds.empty() || ds == "gsm8k") {
      m.dataset = "gsm8k";
    } else if (file && eval_dataset.size() > 6 && eval_dataset.ends_with(".jsonl")) {
      m.dataset = absolute_path(eval_dataset);
    } else {
      m.dataset = eval_dataset;
      m.unavailable = env_reason("data set '" + eval_dataset +
                                 "' is not available offline for gsm8k (bundled: gsm8k; or a local .jsonl "
                                 "file of {question, answer})");
    }
    return m;
  }
  if (ds.empty()) {
    m.dataset = default_ds.empty() ? "wikitext2" : default_ds;
  } else if (one_of(ds, {"wikitext2", "wikitext", "wikitext_2", "wikitext_2_raw_v1", "wikitext_2_raw", "wikitext2_raw", "wiki"})) {
    m.dataset = "wikitext2";
  } else if (ds == "tinystories" || ds == "tiny_stories") {
    m.dataset = "tinystories";
  } else if (file) {
    m.dataset = absolute_path(eval_dataset);
  } else {
    m.dataset = eval_dataset;
    m.unavailable = env_reason("data set '" + eval_dataset +
                               "' is not available offline for " + m.metric_name +
                               " (bundled: wikitext2, tinystories; or a local text file)");
  }
  return m;
}

}  // namespace qloom::agent
