#include "qloom/agent/eval_phase.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <new>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/eval_headline.h"
#include "qloom/agent/eval_text.h"
#include "qloom/core/error.h"
#include "qloom/eval/eval_report.h"
#include "qloom/eval/mc_tasks.h"
#include "qloom/eval/run_eval.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/text_file.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using namespace eval_text;  // NOLINT: the helpers are this file's vocabulary
using ojson = nlohmann::ordered_json;

constexpr const char* kSamplesFormat = "qloom-eval-samples/1";
constexpr const char* kSourceMd = "source_eval.md";
constexpr const char* kSourceSamples = "source_eval_samples.json";
constexpr const char* kQuantizedMd = "quantized_eval.md";
constexpr const char* kQuantizedSamples = "quantized_eval_samples.json";
constexpr const char* kReport = "eval_report.json";
constexpr const char* kSkipped = "eval_skipped.txt";
constexpr const char* kBackend = "qloom";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// ---- per-sample scores of one side ----

struct Side {
  std::string role;          // "source" | "quantized"
  std::string model;         // absolute directory
  std::string task;          // run_eval's task of this run
  int64_t units_used = 0, units_total = 0;
  int64_t seq_len = 0;
  std::string protocol;
  std::string backend = kBackend, server;        // who scored it (EvalReport::backend / server)
  std::vector<double> token_nll;                 // ppl / kld
  // 0/1 per question or document: gsm8k strict-match / flexible-extract;
  // multiple choice acc / acc_norm (score_keys names them in the samples file).
  std::vector<uint8_t> strict, flexible;
  std::optional<int64_t> limit_used() const {
    return units_used < units_total ? std::optional<int64_t>(units_used) : std::nullopt;
  }
  size_t n() const { return token_nll.empty() ? strict.size() : token_nll.size(); }
};

bool is_text_task(const std::string& task) { return task == "ppl" || task == "kld"; }
bool is_mc_task(const std::string& task) { return eval::find_mc_task(task) != nullptr; }

// The samples file's keys of Side::strict / Side::flexible.
std::pair<const char*, const char*> score_keys(const std::string& task) {
  if (is_mc_task(task)) return {"acc_correct", "acc_norm_correct"};
  return {"strict_correct", "flexible_correct"};
}

// The headline is Side::flexible's score (not Side::strict's).
bool headline_is_second(const EvalMetric& m) {
  return m.headline == "exact_match,flexible-extract" || m.headline == "acc_norm";
}

// exp(mean NLL) as eval_gap's paired_ppl_gap computes it (sum in order / n).
double ppl_of(const std::vector<double>& nll) {
  if (nll.empty()) return 0.0;
  double s = 0;
  for (double x : nll) s += x;
  return std::exp(s / double(nll.size()));
}

double accuracy_of(const std::vector<uint8_t>& v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (uint8_t x : v) s += x;
  return s / double(v.size());
}

double headline_score(const Side& s, const EvalMetric& m) {
  if (is_text_task(m.task)) return ppl_of(s.token_nll);
  return accuracy_of(headline_is_second(m) ? s.flexible : s.strict);
}

std::vector<double> as_doubles(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

const char* unit_of(const EvalMetric& m) {
  return is_text_task(m.task) ? "windows" : is_mc_task(m.task) ? "documents" : "questions";
}

// kld: token_nll is the evaluated (quantized) model's; the source's come from the cache.
Side side_from_report(const std::string& role, const std::string& model, const eval::EvalReport& r) {
  Side s;
  s.role = role;
  s.model = model;
  s.task = r.task;
  s.seq_len = r.seq_len;
  s.protocol = r.protocol;
  s.backend = r.backend;
  s.server = r.server;
  if (r.task == "gsm8k") {
    s.units_used = r.n;
    s.units_total = r.n_total;
    s.strict = r.samples.strict_correct;
    s.flexible = r.samples.flexible_correct;
  } else if (r.is_multiple_choice()) {
    s.units_used = r.n;
    s.units_total = r.n_total;
    s.strict = r.samples.acc_correct;
    s.flexible = r.samples.acc_norm_correct;
  } else {
    s.units_used = r.windows;
    s.units_total = r.windows_total;
    s.token_nll = r.samples.token_nll;
  }
  return s;
}

ojson samples_json(const Side& s, const EvalMetric& m, const ojson& key) {
  ojson j;
  j["format"] = kSamplesFormat;
  j["role"] = s.role;
  j["model"] = s.model;
  if (!key.is_null()) j["key"] = key;
  j["metric_name"] = m.metric_name;
  j["task"] = s.task;
  j["dataset"] = m.dataset;
  j["unit"] = unit_of(m);
  j["units_used"] = s.units_used;
  j["units_total"] = s.units_total;
  j["limit_used"] = s.limit_used() ? ojson(*s.limit_used()) : ojson(nullptr);
  j["seq_len"] = s.seq_len;
  j["protocol"] = s.protocol;
  j["score"] = headline_score(s, m);
  j["n"] = s.n();
  if (is_text_task(m.task)) {
    j["token_nll"] = s.token_nll;
  } else {
    const auto [first, second] = score_keys(m.task);
    j[first] = s.strict;
    j[second] = s.flexible;
  }
  return j;
}

// The cached source side, or nullopt (with `why`) when the files cannot be reused.
std::optional<Side> read_cached_source(const fs::path& ws, const EvalMetric& m, const ojson& key,
                                       std::string& why) {
  std::error_code ec;
  if (!fs::is_regular_file(ws / kSourceMd, ec)) {
    why = std::string(kSourceMd) + " does not exist";
    return std::nullopt;
  }
  const std::string md = io::read_text_file(ws / kSourceMd);
  const std::optional<Headline> head = parse_eval_headline(md, m);
  if (!head) {
    why = std::string(kSourceMd) + " has no " + m.headline + " headline (**Accuracy:** / **Perplexity:** line, or an "
                                   "lm-eval / qloom results table row)";
    return std::nullopt;
  }
  if (!fs::is_regular_file(ws / kSourceSamples, ec)) {
    why = std::string(kSourceSamples) + " (its per-sample scores) does not exist" +
          (head->source == "lm-eval table" ? " (" + std::string(kSourceMd) + " is an lm-eval table, " + m.headline +
                                                 " " + fmt("%.4f", head->value) + ", which cannot be paired)"
                                           : std::string());
    return std::nullopt;
  }
  const ojson j = ojson::parse(io::read_text_file(ws / kSourceSamples), nullptr, false);
  if (!j.is_object() || j.value("format", "") != kSamplesFormat || j.value("role", "") != "source") {
    why = std::string(kSourceSamples) + " is not a " + kSamplesFormat + " source file";
    return std::nullopt;
  }
  if (!j.contains("key") || j["key"].dump() != key.dump()) {
    why = "it was made with other settings or another source model";
    return std::nullopt;
  }
  try {
    Side s;
    s.role = "source";
    s.model = j.at("model").get<std::string>();
    s.task = j.at("task").get<std::string>();
    s.units_used = j.at("units_used").get<int64_t>();
    s.units_total = j.at("units_total").get<int64_t>();
    s.seq_len = j.at("seq_len").get<int64_t>();
    s.protocol = j.at("protocol").get<std::string>();
    const size_t n = j.at("n").get<size_t>();
    if (is_text_task(m.task)) {
      s.token_nll = j.at("token_nll").get<std::vector<double>>();
      for (double x : s.token_nll)
        if (!std::isfinite(x)) throw std::runtime_error("a non-finite NLL");
    } else {
      const auto [first, second] = score_keys(m.task);
      s.strict = j.at(first).get<std::vector<uint8_t>>();
      s.flexible = j.at(second).get<std::vector<uint8_t>>();
      if (s.flexible.size() != s.strict.size()) throw std::runtime_error(std::string(first) + " / " + second + " lengths differ");
      for (uint8_t x : s.strict)
        if (x > 1) throw std::runtime_error("a score other than 0/1");
      for (uint8_t x : s.flexible)
        if (x > 1) throw std::runtime_error("a score other than 0/1");
    }
    if (n == 0 || n != s.n()) throw std::runtime_error("n does not match the scores");
    const double score = headline_score(s, m);
    if (std::fabs(score - head->value) > 5e-5 * std::max(1.0, std::fabs(score)))
      throw std::runtime_error("its score " + fmt("%.4f", score) + " is not " + kSourceMd + "'s headline " +
                               fmt("%.4f", head->value));
    if (s.units_used < 1 || s.units_used > s.units_total) throw std::runtime_error("bad units_used");
    return s;
  } catch (const std::exception& e) {
    why = std::string(kSourceSamples) + " is malformed (" + e.what() + ")";
    return std::nullopt;
  }
}

// ---- the cache key ----

std::string absolute_normal(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

ojson source_fingerprint(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if ((ext == ".safetensors" || ext == ".bin" || ext == ".json") && e.is_regular_file(ec))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ojson out = ojson::array();
  for (const fs::path& f : files) {
    ojson e;
    e["name"] = f.filename().string();
    e["bytes"] = fs::file_size(f, ec);
    const auto sys = std::chrono::file_clock::to_sys(fs::last_write_time(f, ec));
    e["mtime_ns"] = static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(sys.time_since_epoch()).count());
    out.push_back(e);
  }
  return out;
}

ojson cache_key(const EvalPhaseOptions& o, const EvalMetric& m) {
  ojson k;
  k["metric_name"] = m.metric_name;
  k["task"] = m.task;
  k["dataset"] = m.dataset;
  k["protocol"] = is_text_task(m.task) ? o.protocol : "";
  k["seq_len"] = is_text_task(m.task) ? o.seq_len : 0;
  k["max_gen_toks"] = is_text_task(m.task) ? 0 : o.max_gen_toks;
  k["limit"] = o.limit ? ojson(*o.limit) : ojson(nullptr);
  k["time_budget_s"] = o.time_budget_s > 0 ? o.time_budget_s : 0.0;
  k["source_dir"] = absolute_normal(o.source_dir);
  if (!o.source_server.empty() && !is_text_task(m.task)) k["source_server"] = o.source_server;
  k["source_files"] = source_fingerprint(o.source_dir);
  return k;
}

// ---- one model's run ----

struct RunOutcome {
  std::optional<eval::EvalReport> report;
  std::string skip_outcome, skip_reason;
};

const char* stage_name(eval::EvalStage s) {
  switch (s) {
    case eval::EvalStage::kPrepare: return "preparing the data";
    case eval::EvalStage::kLoadModel: return "loading the model";
    case eval::EvalStage::kLoadSource: return "loading the source model";
    case eval::EvalStage::kScore: return "scoring";
  }
  return "?";
}

RunOutcome run_model(eval::EvalOptions eo, const std::string& role) {
  eval::EvalStage stage = eval::EvalStage::kPrepare;
  eo.stage = &stage;
  RunOutcome out;
  try {
    out.report = eval::run_eval(eo);
  } catch (...) {
    EvalSkip s = eval_skip_for(std::current_exception(), role, stage);
    out.skip_outcome = std::move(s.outcome);
    out.skip_reason = std::move(s.reason);
  }
  return out;
}

// ---- files ----

std::string headline_line(const EvalMetric& m, double score) {
  return is_text_task(m.task) ? "**Perplexity:** " + fmt("%.4f", score) : "**Accuracy:** " + fmt("%.4f", score);
}

std::string render_md(const std::string& title, const Side& s, const eval::EvalReport& r, const EvalMetric& m,
                      const std::string& samples_file, const EvalPhaseOptions& o) {
  std::string md = "# " + title + "\n\n";
  md += headline_line(m, headline_score(s, m)) + "\n\n";
  md += eval::render_table(r);
  if (r.task == "kld") md += "\n```\n" + eval::kld_block(r.kld) + "```\n";
  md += "\n";
  md += "- model: " + s.model + "\n";
  if (is_text_task(m.task)) {
    md += "- metric: " + m.metric_name + " (headline: perplexity, lower is better)\n";
    md += "- dataset: " + m.dataset + " (" + s.protocol + " protocol, " + std::to_string(s.seq_len) +
          "-token windows)\n";
  } else if (is_mc_task(m.task)) {
    md += "- metric: " + m.metric_name + " (headline: " + m.headline + "; lm-eval " + m.task +
          ", 0-shot, log-likelihood of each option)\n";
    md += "- dataset: " + m.dataset + "\n";
  } else {
    md += "- metric: " + m.metric_name + " (headline: " + m.headline +
          "; lm-eval gsm8k, 5-shot, greedy, max_gen_toks " + std::to_string(o.max_gen_toks) + ")\n";
    md += "- dataset: " + m.dataset + "\n";
  }
  const std::string unit = unit_of(m);
  if (s.limit_used())
    md += "- limit: " + std::to_string(*s.limit_used()) + " " + unit + " (of " + std::to_string(s.units_total) + ")\n";
  else
    md += "- limit: none (all " + std::to_string(s.units_total) + " " + unit + ")\n";
  md += "- n: " + std::to_string(s.n()) + (is_text_task(m.task) ? " tokens scored" : std::string(" ") + unit_of(m)) + "\n";
  md += "- backend: " + (s.server.empty() ? std::string(kBackend) + " native engine" : s.backend + " server " + s.server) + "\n";
  md += "- seconds: " + fmt("%.2f", r.seconds) + "\n";
  md += "- per-sample scores: " + samples_file + "\n";
  if (!r.notes.empty()) {
    md += "\n## Notes\n\n";
    for (const std::string& n : r.notes) md += "- " + n + "\n";
  }
  return md;
}

void write_text(const fs::path& p, const std::string& text) { io::write_file_atomic(p, text); }

void remove_file(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
  if (ec)
    throw Error(ErrorKind::kIo, p.string(), "", "cannot remove a file of an earlier attempt: " + ec.message(),
                "make the workspace writable");
}

// Records the skip in `r` and writes eval_skipped.txt.
void skip(EvalPhaseResult& r, const fs::path& ws, std::string outcome, std::string reason, std::ostream* log) {
  r.skipped = true;
  r.skip_outcome = std::move(outcome);
  r.skip_reason = std::move(reason);
  write_text(ws / kSkipped, r.skip_reason + "\n");
  if (log != nullptr) *log << "eval: skipped (" << r.skip_outcome << "): " << r.skip_reason << "\n" << std::flush;
}

}  // namespace

EvalSkip eval_skip_for(std::exception_ptr error, const std::string& role, eval::EvalStage stage) {
  auto oom = [&](const std::string& what) {
    return EvalSkip{"eval_oom", one_line("oom: out of memory while " + std::string(stage_name(stage)) + " for the " +
                                         role + " model's evaluation" + (what.empty() ? "" : " (" + what + ")"))};
  };
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc& e) {
    return oom(e.what());
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kUsage || e.kind() == ErrorKind::kInternal) throw;
    const std::string what = e.what();
    if (what.find(std::strerror(ENOMEM)) != std::string::npos) return oom(what);
    if (role == "quantized" && (stage == eval::EvalStage::kLoadModel || stage == eval::EvalStage::kScore))
      return {"quantized_load_failed", "quantized_load: the engine could not " +
                                           std::string(stage == eval::EvalStage::kScore ? "run" : "load") +
                                           " the quantized model: " + defuse(one_line(what), {"oom"})};
    std::string where;
    if (stage == eval::EvalStage::kPrepare)
      where = "the evaluation data could not be prepared";
    else if (role == "source" || stage == eval::EvalStage::kLoadSource)
      where = std::string("the source model could not be ") + (stage == eval::EvalStage::kScore ? "evaluated" : "loaded");
    else
      where = std::string("evaluation failed while ") + stage_name(stage);
    return {"eval_env_unavailable", env_reason(where + ": " + what)};
  }
}

EvalPhaseResult run_eval_phase(const EvalPhaseOptions& o) {
  if (o.workspace.empty() || o.source_dir.empty() || o.quantized_dir.empty())
    throw Error(ErrorKind::kUsage, "", "eval phase", "workspace, source_dir and quantized_dir are required");
  std::error_code ec;
  if (!fs::is_directory(o.workspace, ec))
    throw Error(ErrorKind::kNotFound, o.workspace.string(), "", "the workspace directory does not exist",
                "create it before the eval phase");
  if (o.limit && *o.limit < 1)
    throw Error(ErrorKind::kUsage, "", "limit", "the eval limit must be at least 1 (got " +
                                                    std::to_string(*o.limit) + ")");
  const fs::path& ws = o.workspace;
  for (const char* f : {kSkipped, kReport, kQuantizedMd, kQuantizedSamples}) remove_file(ws / f);

  EvalPhaseResult res;
  res.threshold = resolve_threshold(o.caller_threshold, ws);
  res.metric = resolve_eval_metric(o.metric_name, o.eval_dataset);
  const EvalMetric& m = res.metric;
  if (!m.unavailable.empty()) {
    skip(res, ws, "eval_env_unavailable", m.unavailable, o.log);
    return res;
  }

  const std::string source_abs = absolute_normal(o.source_dir);
  const std::string quant_abs = absolute_normal(o.quantized_dir);
  eval::EvalOptions base;
  base.dataset = m.dataset;
  base.protocol = o.protocol;
  base.seq_len = o.seq_len;
  base.threads = o.threads;
  base.max_gen_toks = o.max_gen_toks;
  base.log = o.log;
  base.log_is_tty = o.log_is_tty;
  base.tokenizer_dir = source_abs;  // both runs: the same tokens
  base.api_key = o.server_api_key;
  const bool servers = !o.source_server.empty() || !o.quantized_server.empty();
  if (servers && is_text_task(m.task))
    res.notes.push_back(m.metric_name + " is computed in-process: an OpenAI-compatible server does not return "
                                        "every position's full distribution, so the evaluation servers were not used");

  // ---- source (cached across attempts) ----
  const ojson key = cache_key(o, m);
  std::string why;
  std::optional<Side> source = read_cached_source(ws, m, key, why);
  if (source) {
    res.source_cached = true;
    res.notes.push_back(std::string("source results reused from ") + kSourceMd + " (" + kSourceSamples + ")");
    if (o.log != nullptr)
      *o.log << "eval: source model: reusing " << kSourceMd << " from an earlier attempt (" << source->units_used
             << " " << unit_of(m) << ")\n"
             << std::flush;
  } else {
    remove_file(ws / kSourceMd);
    remove_file(ws / kSourceSamples);
    if (o.log != nullptr) {
      *o.log << "eval: source model " << source_abs << ": " << m.metric_name << " on " << m.dataset;
      if (o.time_budget_s > 0) *o.log << ", time budget " << fmt("%.0f", o.time_budget_s) << " s";
      *o.log << " (not cached: " << why << ")\n" << std::flush;
    }
    eval::EvalOptions eo = base;
    eo.model_dir = source_abs;
    if (!is_text_task(m.task)) eo.server = o.source_server;
    eo.task = m.task == "kld" ? "ppl" : m.task;
    eo.limit = o.limit;
    eo.time_budget = o.time_budget_s > 0 ? o.time_budget_s : 0.0;
    RunOutcome run = run_model(eo, "source");
    if (!run.report) {
      skip(res, ws, run.skip_outcome, run.skip_reason, o.log);
      return res;
    }
    const eval::EvalReport& r = *run.report;
    Side s = side_from_report("source", source_abs, r);
    res.source_seconds = r.seconds;
    res.notes.insert(res.notes.end(), r.notes.begin(), r.notes.end());
    write_text(ws / kSourceSamples, samples_json(s, m, key).dump(2) + "\n");
    write_text(ws / kSourceMd, render_md("Source model evaluation", s, r, m, kSourceSamples, o));
    source = std::move(s);
  }
  res.samples_used = source->units_used;
  res.samples_total = source->units_total;
  res.limit_used = source->limit_used();

  // ---- quantized: the source's samples exactly ----
  if (o.log != nullptr)
    *o.log << "eval: quantized model " << quant_abs << ": " << m.metric_name << " on " << m.dataset << ", the source's "
           << source->units_used << " " << unit_of(m) << "\n"
           << std::flush;
  eval::EvalOptions eo = base;
  eo.model_dir = quant_abs;
  if (!is_text_task(m.task)) eo.server = o.quantized_server;
  eo.task = m.task;
  eo.limit = source->units_used;
  eo.time_budget = 0;
  if (is_text_task(m.task)) {
    eo.seq_len = source->seq_len;
    eo.protocol = source->protocol;
  }
  if (m.task == "kld") eo.source_dir = source_abs;
  RunOutcome run = run_model(eo, "quantized");
  if (!run.report) {
    skip(res, ws, run.skip_outcome, run.skip_reason, o.log);
    return res;
  }
  const eval::EvalReport& qr = *run.report;
  const Side q = side_from_report("quantized", quant_abs, qr);
  res.quantized_seconds = qr.seconds;
  if (q.n() != source->n() || q.units_used != source->units_used)
    throw Error(ErrorKind::kInvalidInput, quant_abs, m.metric_name,
                "the quantized model was scored on " + std::to_string(q.n()) + " samples (" +
                    std::to_string(q.units_used) + " " + unit_of(m) + "), the source on " +
                    std::to_string(source->n()) + " (" + std::to_string(source->units_used) + ")",
                "check that both models have the same config (max_position_embeddings) and tokenizer");
  write_text(ws / kQuantizedSamples, samples_json(q, m, nullptr).dump(2) + "\n");
  write_text(ws / kQuantizedMd, render_md("Quantized model evaluation", q, qr, m, kQuantizedSamples, o));

  // ---- the gap ----
  if (is_text_task(m.task)) {
    res.gap = paired_ppl_gap(m.metric_name, source->token_nll, q.token_nll);
  } else {
    const bool flexible = headline_is_second(m);
    res.gap = paired_accuracy_gap(m.metric_name, as_doubles(flexible ? source->flexible : source->strict),
                                  as_doubles(flexible ? q.flexible : q.strict));
  }
  res.verdict = judge(res.gap, res.threshold.value);
  if (!res.gap.note.empty()) res.notes.push_back(res.gap.note);

  ojson report = eval_report_json(res.gap, m.dataset, q.server.empty() ? std::string(kBackend) : q.backend,
                                 res.limit_used ? std::optional<size_t>(size_t(*res.limit_used)) : std::nullopt);
  report["n_unit"] = is_text_task(m.task) ? "tokens" : unit_of(m);
  report["limit_unit"] = unit_of(m);
  report["samples_total"] = source->units_total;
  report["task"] = m.task;
  report["headline"] = m.headline;
  report["direction"] = res.gap.direction == MetricDirection::kLowerIsBetter ? "lower_is_better" : "higher_is_better";
  if (is_text_task(m.task)) {
    report["protocol"] = source->protocol;
    report["seq_len"] = source->seq_len;
  }
  report["source_model"] = source_abs;
  report["quantized_model"] = quant_abs;
  report["threshold"] = res.threshold.value;
  report["threshold_source"] = res.threshold.source;
  report["verdict"] = verdict_name(res.verdict);
  report["notes"] = res.gap.note.empty() ? ojson::array() : ojson::array({res.gap.note});
  if (m.task == "gsm8k") {
    const bool flexible = m.headline == "exact_match,flexible-extract";
    ojson sec;
    sec["metric"] = flexible ? "exact_match,strict-match" : "exact_match,flexible-extract";
    sec["source"] = accuracy_of(flexible ? source->strict : source->flexible);
    sec["quantized"] = accuracy_of(flexible ? q.strict : q.flexible);
    report["secondary"] = sec;
  } else if (is_mc_task(m.task) && eval::find_mc_task(m.task)->acc_norm) {
    const bool norm = headline_is_second(m);
    ojson sec;
    sec["metric"] = norm ? "acc" : "acc_norm";
    sec["source"] = accuracy_of(norm ? source->strict : source->flexible);
    sec["quantized"] = accuracy_of(norm ? q.strict : q.flexible);
    report["secondary"] = sec;
  } else if (m.task == "kld") {
    const eval::KldSummary& k = qr.kld;
    ojson kj;
    kj["mean"] = k.kld_mean;
    kj["mean_stderr"] = k.kld_mean_stderr;
    kj["median"] = k.kld_median;
    kj["p99"] = k.kld_p99;
    kj["max"] = k.kld_max;
    kj["top1_agreement"] = k.top1_agreement;
    report["kld"] = kj;
  }
  require_valid_artifact("eval_report", nlohmann::json::parse(report.dump()), ws / kReport);
  write_text(ws / kReport, report.dump(2) + "\n");
  if (o.log != nullptr)
    *o.log << "eval: " << m.metric_name << " source " << fmt("%.4f", res.gap.source_score) << ", quantized "
           << fmt("%.4f", res.gap.quantized_score) << ", relative gap " << fmt("%.4f", res.gap.relative_gap)
           << " +/- " << fmt("%.4f", res.gap.gap_stderr) << " (n " << res.gap.n << "), threshold "
           << fmt("%.4f", res.threshold.value) << " (" << res.threshold.source << "): " << verdict_name(res.verdict)
           << "\n"
           << std::flush;
  return res;
}

}  // namespace qloom::agent
