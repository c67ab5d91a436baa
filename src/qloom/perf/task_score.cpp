#include "qloom/perf/task_score.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "qloom/agent/eval_phase.h"
#include "qloom/core/error.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/mc_tasks.h"
#include "qloom/eval/run_eval.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/text_file.h"
#include "qloom/perf/task_score_internal.h"
#include "qloom/perf/utc_time.h"

namespace qloom::perf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr const char* kSamplesFormat = "qloom-perf-samples/1";
constexpr int64_t kMaxGenToks = 256;  // eval::EvalOptions' default, which score_task keeps

// The agent's messages carry U+200B after some letters (defused for its
// outcome classifier); a qloom perf error has no classifier to defuse.
std::string plain(std::string s) {
  const std::string zwsp = "\xE2\x80\x8B";
  for (size_t p = s.find(zwsp); p != std::string::npos; p = s.find(zwsp, p)) s.erase(p, zwsp.size());
  return s;
}

bool is_text_task(const std::string& task) { return task == "ppl" || task == "kld"; }

// The array of samples.json the headline is computed from.
std::string headline_key(const std::string& task, const std::string& metric) {
  if (is_text_task(task)) return "token_nll";
  if (task == "gsm8k") return metric == "exact_match,flexible-extract" ? "flexible_correct" : "strict_correct";
  return metric == "acc_norm" ? "acc_norm_correct" : "acc_correct";
}

// The two 0/1 arrays of a gsm8k / multiple-choice samples file.
std::pair<const char*, const char*> accuracy_keys(const std::string& task) {
  if (task == "gsm8k") return {"strict_correct", "flexible_correct"};
  return {"acc_correct", "acc_norm_correct"};
}

}  // namespace

// ---- metric, direction, fingerprints of inputs ----

GateMetric resolve_gate_metric(const GateSpec& spec) {
  if (spec.task.empty())
    throw Error(ErrorKind::kUsage, "", "--eval-task", "no evaluation task given",
                "use gsm8k, ppl, kld or a multiple-choice task (hellaswag, arc_easy, ...)");
  if (spec.limit < 0)
    throw Error(ErrorKind::kUsage, "", "--eval-limit / --gsm8k-num-samples",
                "the limit must be 0 (the task's default) or more, got " + std::to_string(spec.limit));
  if (spec.seq_len < 0)
    throw Error(ErrorKind::kUsage, "", "seq_len", "the window length must be 0 (default) or more");
  const agent::EvalMetric em = agent::resolve_eval_metric(spec.task, spec.dataset);
  if (!em.unavailable.empty())
    throw Error(ErrorKind::kUsage, spec.dataset, "--eval-task " + spec.task, plain(em.unavailable),
                "use gsm8k, ppl, kld or a multiple-choice task with a local data set file");
  GateMetric m;
  m.task = em.task;
  m.dataset = em.dataset;
  if (em.task == "kld") {
    m.metric = "kld_mean";
    if (spec.reference_dir.empty())
      throw Error(ErrorKind::kUsage, "", "--eval-task kld", "the kld task needs the base model to compare against",
                  "set GateSpec::reference_dir to the base model directory");
  } else {
    m.metric = em.headline;
  }
  m.direction = is_text_task(m.task) ? agent::MetricDirection::kLowerIsBetter : agent::MetricDirection::kHigherIsBetter;
  m.unit = is_text_task(m.task) ? "windows" : m.task == "gsm8k" ? "questions" : "documents";
  if (spec.limit > 0)
    m.limit = spec.limit;
  else if (m.task == "gsm8k")
    m.limit = kGsm8kDefaultLimit;
  return m;
}

const char* direction_name(agent::MetricDirection d) {
  return d == agent::MetricDirection::kLowerIsBetter ? "lower_is_better" : "higher_is_better";
}

agent::MetricDirection parse_direction(const std::string& name, const std::string& file) {
  if (name == "lower_is_better") return agent::MetricDirection::kLowerIsBetter;
  if (name == "higher_is_better") return agent::MetricDirection::kHigherIsBetter;
  throw Error(ErrorKind::kInvalidInput, file, "direction", "unknown direction '" + name + "'",
              "expected higher_is_better or lower_is_better");
}

std::vector<fs::path> dataset_files(const GateMetric& m) {
  if (is_text_task(m.task)) return {eval::load_text_dataset(m.dataset).file};
  if (m.task == "gsm8k") {
    const fs::path test = m.dataset == "gsm8k" ? eval::bundled_file("gsm8k/test.jsonl") : fs::path(m.dataset);
    return {test, eval::bundled_file("gsm8k/train.jsonl")};  // train.jsonl: the few-shot pool
  }
  if (m.dataset == "hellaswag") return {eval::bundled_file("hellaswag/hellaswag_val_first200.txt")};
  return {m.dataset};
}

std::string dataset_sha256(const GateMetric& m) {
  std::string all;
  for (const fs::path& f : dataset_files(m)) all += job::sha256_hex(io::read_text_file(f)) + "\n";
  return job::sha256_hex(all);
}

std::string tokenizer_sha256(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (io::is_tokenizer_file(e.path().filename().string()) && e.is_regular_file(ec)) files.push_back(e.path());
  if (ec) throw Error(ErrorKind::kNotFound, dir.string(), "", "cannot list the tokenizer directory: " + ec.message());
  std::sort(files.begin(), files.end());
  std::string all;
  for (const fs::path& f : files)
    all += f.filename().string() + " " + job::sha256_hex(io::read_text_file(f)) + "\n";
  return job::sha256_hex(all);
}

std::string absolute_dir(const fs::path& p) {
  if (p.empty()) return {};
  return fs::absolute(p).lexically_normal().string();
}

fs::path tokenizer_dir_of(const GateSpec& spec, const fs::path& model_dir) {
  if (!spec.tokenizer_dir.empty()) return spec.tokenizer_dir;
  std::error_code ec;
  if (fs::is_regular_file(model_dir / "tokenizer.json", ec) || fs::is_regular_file(model_dir / "tokenizer.model", ec) ||
      spec.reference_dir.empty())
    return model_dir;
  return spec.reference_dir;  // run_eval's fallback: the source's tokenizer
}

// ---- statistics of one side ----

using agent::mean_sd;
using agent::MeanSd;

std::pair<double, double> score_of_samples(const std::string& task, const std::vector<double>& values) {
  const MeanSd m = mean_sd(values);
  const double root_n = std::sqrt(double(std::max<size_t>(values.size(), 1)));
  if (task == "ppl") {
    const double ppl = std::exp(m.mean);
    return {ppl, ppl * m.sd / root_n};
  }
  return {m.mean, m.sd / root_n};
}

// ---- samples.json ----

namespace {

std::vector<double> as_doubles(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

json samples_header(const GateMetric& m, const std::string& model, const std::string& reference,
                    const std::string& tokenizer_sha) {
  json j;
  j["format"] = kSamplesFormat;
  j["task"] = m.task;
  j["metric"] = m.metric;
  j["direction"] = direction_name(m.direction);
  j["model"] = model;
  j["reference"] = reference.empty() ? json(nullptr) : json(reference);
  j["dataset"] = m.dataset;
  j["dataset_sha256"] = dataset_sha256(m);
  j["unit"] = m.unit;
  j["tokenizer_sha256"] = tokenizer_sha;
  j["max_gen_toks"] = m.task == "gsm8k" ? kMaxGenToks : 0;
  return j;
}

// The samples file of a finished run (header, units, the arrays, n, score, stderr).
json samples_of_report(const eval::EvalReport& r, const GateMetric& m, json j) {
  const bool text = is_text_task(m.task);
  j["units_used"] = text ? r.windows : r.n;
  j["units_total"] = text ? r.windows_total : r.n_total;
  j["seq_len"] = text ? r.seq_len : 0;
  j["protocol"] = text ? r.protocol : "";
  std::vector<double> values;
  if (m.task == "ppl") {
    values = r.samples.token_nll;
  } else if (m.task == "gsm8k") {
    values = as_doubles(m.metric == "exact_match,flexible-extract" ? r.samples.flexible_correct : r.samples.strict_correct);
  } else if (m.task != "kld") {
    values = as_doubles(m.metric == "acc_norm" ? r.samples.acc_norm_correct : r.samples.acc_correct);
  }
  if (m.task == "kld") {
    j["n"] = r.kld.count;
    j["score"] = r.kld.kld_mean;
    j["stderr"] = r.kld.kld_mean_stderr;
    j["token_nll"] = r.samples.token_nll;
    j["source_token_nll"] = r.samples.source_token_nll;
    return j;
  }
  const auto [score, se] = score_of_samples(m.task, values);
  j["n"] = values.size();
  j["score"] = score;
  j["stderr"] = se;
  if (text) {
    j["token_nll"] = r.samples.token_nll;
  } else {
    const bool gsm = m.task == "gsm8k";
    const auto [first, second] = accuracy_keys(m.task);
    j[first] = gsm ? r.samples.strict_correct : r.samples.acc_correct;
    j[second] = gsm ? r.samples.flexible_correct : r.samples.acc_norm_correct;
  }
  return j;
}

}  // namespace

// ---- writing and reading a score directory ----

TaskScore publish_task_score(const fs::path& out_dir, const json& samples, TaskScore score,
                             const nlohmann::json* eval_report) {
  score.samples_path = fs::absolute(out_dir).lexically_normal() / kSamplesFile;
  io::AtomicDir dir(out_dir, /*overwrite=*/true);
  if (eval_report != nullptr) io::write_file_atomic(dir.staging() / kEvalReportFile, eval_report->dump(2) + "\n");
  io::write_file_atomic(dir.staging() / kSamplesFile, samples.dump(1) + "\n");
  io::write_file_atomic(dir.staging() / kScoreFile, to_json(score).dump(2) + "\n");
  dir.commit();
  return score;
}

TaskScore record_task_score(const eval::EvalReport& report, const GateSpec& spec, const fs::path& out_dir) {
  const GateMetric m = resolve_gate_metric(spec);
  if (report.task != m.task)
    throw Error(ErrorKind::kInternal, "", "task", "the report is for task '" + report.task + "', the spec for '" + m.task + "'");
  const std::string model = absolute_dir(report.model);
  const std::string reference = m.task == "kld" ? absolute_dir(report.source) : std::string();
  const json samples = samples_of_report(
      report, m, samples_header(m, model, reference, tokenizer_sha256(tokenizer_dir_of(spec, model))));
  TaskScore s;
  s.task = m.task;
  s.metric = m.metric;
  s.direction = m.direction;
  s.score = samples["score"].get<double>();
  s.stderr_ = samples["stderr"].get<double>();
  s.n = samples["n"].get<int64_t>();
  s.model = model;
  s.reference = reference;
  s.dataset = m.dataset;
  s.units_used = samples["units_used"].get<int64_t>();
  s.units_total = samples["units_total"].get<int64_t>();
  s.seconds = report.seconds;
  s.evaluated_at = utc_timestamp();
  const nlohmann::json rj = eval::report_to_json(report);
  return publish_task_score(out_dir, samples, std::move(s), &rj);
}

namespace {

// kld on the base model itself: KL(base || base) = 0; nothing to run.
TaskScore record_kld_base(const fs::path& model_dir, const GateSpec& spec, const GateMetric& m,
                          const fs::path& out_dir) {
  const std::string model = absolute_dir(model_dir);
  json samples = samples_header(m, model, model, tokenizer_sha256(tokenizer_dir_of(spec, model)));
  samples["units_used"] = 0;
  samples["units_total"] = 0;
  samples["seq_len"] = spec.seq_len;
  samples["protocol"] = "quark";
  samples["n"] = 0;
  samples["score"] = 0.0;
  samples["stderr"] = 0.0;
  samples["token_nll"] = json::array();
  samples["source_token_nll"] = json::array();
  TaskScore s;
  s.task = m.task;
  s.metric = m.metric;
  s.direction = m.direction;
  s.model = model;
  s.reference = model;
  s.dataset = m.dataset;
  s.evaluated_at = utc_timestamp();
  return publish_task_score(out_dir, samples, std::move(s), nullptr);
}

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool eq = fs::equivalent(a, b, ec);
  return ec ? absolute_dir(a) == absolute_dir(b) : eq;
}

}  // namespace

TaskScore score_task(const fs::path& model_dir, const GateSpec& spec, const fs::path& out_dir, std::ostream* log) {
  const GateMetric m = resolve_gate_metric(spec);
  if (out_dir.empty()) throw Error(ErrorKind::kUsage, "", "out_dir", "no output directory given");
  const std::string model = absolute_dir(model_dir);
  if (m.task == "kld" && same_directory(model, spec.reference_dir)) {
    if (log != nullptr) *log << "perf: kld of the base model " << model << " against itself is 0 (not run)\n";
    return record_kld_base(model, spec, m, out_dir);
  }
  eval::EvalOptions eo;
  eo.model_dir = model;
  eo.task = m.task;
  eo.dataset = m.dataset;
  eo.limit = m.limit;
  eo.threads = spec.threads;
  eo.seq_len = spec.seq_len;
  eo.server = spec.server;
  eo.api_key = spec.api_key;
  eo.served_model = spec.served_model;
  eo.tokenizer_dir = spec.tokenizer_dir;
  eo.max_gen_toks = kMaxGenToks;
  eo.log = log;
  if (m.task == "kld") eo.source_dir = absolute_dir(spec.reference_dir);
  if (log != nullptr)
    *log << "perf: scoring " << model << ": " << m.metric << " on " << m.dataset
         << (m.limit ? ", limit " + std::to_string(*m.limit) + " " + m.unit : std::string(", every ") + m.unit) << "\n"
         << std::flush;
  const eval::EvalReport r = eval::run_eval(eo);
  return record_task_score(r, spec, out_dir);
}

// ---- TaskScore JSON ----

nlohmann::ordered_json to_json(const TaskScore& s) {
  json j;
  j["task"] = s.task;
  j["metric"] = s.metric;
  j["direction"] = direction_name(s.direction);
  j["score"] = s.score;
  j["stderr"] = s.stderr_;
  j["n"] = s.n;
  j["samples_path"] = s.samples_path.string();
  j["model"] = s.model;
  j["reference"] = s.reference.empty() ? json(nullptr) : json(s.reference);
  j["dataset"] = s.dataset;
  j["units_used"] = s.units_used;
  j["units_total"] = s.units_total;
  j["seconds"] = s.seconds;
  j["evaluated_at"] = s.evaluated_at;
  return j;
}

TaskScore task_score_from_json(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw Error(ErrorKind::kInvalidInput, file, "", "a task score must be a JSON object");
  TaskScore s;
  s.task = field<std::string>(j, "task", file);
  s.metric = field<std::string>(j, "metric", file);
  s.direction = parse_direction(field<std::string>(j, "direction", file), file);
  s.score = field<double>(j, "score", file);
  s.stderr_ = field<double>(j, "stderr", file);
  s.n = field<int64_t>(j, "n", file);
  s.samples_path = field<std::string>(j, "samples_path", file);
  s.model = field<std::string>(j, "model", file);
  s.reference = nullable_string(j, "reference", file);
  s.dataset = field<std::string>(j, "dataset", file);
  s.units_used = field<int64_t>(j, "units_used", file);
  s.units_total = field<int64_t>(j, "units_total", file);
  s.seconds = field<double>(j, "seconds", file);
  s.evaluated_at = field<std::string>(j, "evaluated_at", file);
  if (s.n < 0 || !std::isfinite(s.score) || !std::isfinite(s.stderr_))
    throw Error(ErrorKind::kInvalidInput, file, "score", "n, score and stderr must be finite, n >= 0");
  return s;
}

namespace {

nlohmann::json parse_json_file(const fs::path& f) {
  std::error_code ec;
  if (!fs::is_regular_file(f, ec))
    throw Error(ErrorKind::kNotFound, f.string(), "", "the file does not exist",
                "score the model again (qloom perf re-runs the evaluation)");
  try {
    return nlohmann::json::parse(io::read_text_file(f));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidInput, f.string(), "", std::string("not valid JSON: ") + e.what(),
                "delete the evaluation directory and score the model again");
  }
}

std::vector<double> number_array(const nlohmann::json& j, const std::string& key, const std::string& file,
                                 bool zero_one) {
  if (!j.contains(key) || !j[key].is_array())
    throw Error(ErrorKind::kInvalidInput, file, key, "missing or not an array");
  std::vector<double> v;
  v.reserve(j[key].size());
  for (const auto& x : j[key]) {
    if (!x.is_number() || !std::isfinite(x.get<double>()) || (zero_one && x != 0 && x != 1))
      throw Error(ErrorKind::kInvalidInput, file, key,
                  zero_one ? "every value must be 0 or 1" : "every value must be a finite number");
    v.push_back(x.get<double>());
  }
  return v;
}

}  // namespace

const std::vector<std::string>& pairing_keys() {
  static const std::vector<std::string> keys = {"task", "metric", "dataset", "dataset_sha256", "unit",
                                                "units_used", "units_total", "seq_len", "protocol",
                                                "max_gen_toks", "tokenizer_sha256", "n"};
  return keys;
}

TaskSamples read_task_samples(const fs::path& file) {
  const std::string name = file.string();
  const nlohmann::json j = parse_json_file(file);
  if (!j.is_object() || !j.contains("format") || j["format"] != kSamplesFormat)
    throw Error(ErrorKind::kInvalidInput, name, "format", std::string("not a ") + kSamplesFormat + " file");
  TaskSamples s;
  s.file = file;
  for (const auto& [k, v] : j.items())
    if (!v.is_array()) s.header[k] = v;
  for (const std::string& k : pairing_keys())
    if (!s.header.contains(k)) throw Error(ErrorKind::kInvalidInput, name, k, "missing");
  const std::string task = field<std::string>(j, "task", name);
  const std::string metric = field<std::string>(j, "metric", name);
  s.n = field<int64_t>(j, "n", name);
  const bool text = is_text_task(task);
  if (text) {
    s.values = number_array(j, "token_nll", name, false);
  } else {
    const auto [first, second] = accuracy_keys(task);
    const std::vector<double> a = number_array(j, first, name, true), b = number_array(j, second, name, true);
    if (a.size() != b.size()) throw Error(ErrorKind::kInvalidInput, name, second, "its length differs from " + std::string(first) + "'s");
    s.values = headline_key(task, metric) == first ? a : b;
  }
  if (int64_t(s.values.size()) != s.n)
    throw Error(ErrorKind::kInvalidInput, name, "n", "n is " + std::to_string(s.n) + " but there are " +
                                                         std::to_string(s.values.size()) + " per-sample scores");
  if (task == "kld") {
    if (number_array(j, "source_token_nll", name, false).size() != s.values.size())
      throw Error(ErrorKind::kInvalidInput, name, "source_token_nll", "its length differs from token_nll's");
    s.score = field<double>(j, "score", name);
    s.stderr_ = field<double>(j, "stderr", name);
    if (s.n == 0 && (s.score != 0 || nullable_string(j, "reference", name) != field<std::string>(j, "model", name)))
      throw Error(ErrorKind::kInvalidInput, name, "n", "a kld run without samples must be the base model's (score 0)");
  } else {
    if (s.n < 1) throw Error(ErrorKind::kInvalidInput, name, "n", "no samples were scored");
    std::tie(s.score, s.stderr_) = score_of_samples(task, s.values);
  }
  return s;
}

TaskScore load_task_score(const fs::path& out_dir) {
  const fs::path score_file = out_dir / kScoreFile;
  TaskScore s = task_score_from_json(parse_json_file(score_file), score_file.string());
  const TaskSamples samples = read_task_samples(out_dir / kSamplesFile);
  const std::string sf = (out_dir / kSamplesFile).string();
  auto mismatch = [&](const std::string& key, const std::string& what) {
    return Error(ErrorKind::kInvalidInput, score_file.string(), key, what + " does not match " + sf,
                 "delete " + out_dir.string() + " and score the model again");
  };
  if (samples.header["task"] != s.task) throw mismatch("task", "the task");
  if (samples.header["metric"] != s.metric) throw mismatch("metric", "the metric");
  if (samples.header["direction"] != direction_name(s.direction)) throw mismatch("direction", "the direction");
  if (samples.n != s.n) throw mismatch("n", "the sample count");
  if (std::fabs(samples.score - s.score) > 1e-9 * std::max(1.0, std::fabs(s.score)))
    throw mismatch("score", "the score");
  s.samples_path = fs::absolute(out_dir).lexically_normal() / kSamplesFile;
  return s;
}

}  // namespace qloom::perf
