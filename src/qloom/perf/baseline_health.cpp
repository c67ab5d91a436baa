#include "qloom/perf/baseline_health.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "qloom/core/format.h"
#include "qloom/build_info.h"
#include "qloom/git_commit.h"
#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/text_file.h"
#include "qloom/perf/task_score_internal.h"

namespace qloom::perf {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr const char* kCacheFormat = "qloom-perf-baseline-cache/1";
constexpr const char* kFingerprintFormat = "qloom-perf-baseline-fingerprint/1";

// sha256 of a safetensors file's 8-byte length and JSON header.
std::string safetensors_header_sha256(const fs::path& f, uint64_t size) {
  std::ifstream in(f, std::ios::binary);
  unsigned char len_bytes[8] = {};
  if (!in.read(reinterpret_cast<char*>(len_bytes), 8))
    throw Error(ErrorKind::kInvalidInput, f.string(), "", "too short for a safetensors header",
                "re-download or re-export the model");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > io::kMaxSafetensorsHeaderBytes || n > size - 8)
    throw Error(ErrorKind::kInvalidInput, f.string(), "", "the header length " + std::to_string(n) + " is impossible",
                "re-download or re-export the model");
  std::string bytes(8 + n, '\0');
  std::copy(len_bytes, len_bytes + 8, bytes.begin());
  if (!in.read(bytes.data() + 8, std::streamsize(n)))
    throw Error(ErrorKind::kInvalidInput, f.string(), "", "the header is truncated", "re-download or re-export the model");
  return job::sha256_hex(bytes);
}

json model_inputs(const fs::path& model_dir) {
  const io::ModelDir dir = io::ModelDir::open(model_dir);
  json m;
  m["config_sha256"] = job::sha256_hex(io::read_text_file(model_dir / "config.json"));
  json weights = json::array();
  for (const fs::path& name : dir.weight_files()) {  // sorted
    const fs::path f = model_dir / name;
    const uint64_t size = fs::file_size(f);
    json w;
    w["name"] = name.string();
    w["bytes"] = size;
    if (name.string().ends_with(".safetensors"))
      w["header_sha256"] = safetensors_header_sha256(f, size);
    else
      w["sha256"] = job::sha256_hex(io::read_text_file(f));  // the index
    weights.push_back(std::move(w));
  }
  m["weights"] = std::move(weights);
  return m;
}

}  // namespace

nlohmann::ordered_json fingerprint_inputs(const fs::path& model_dir, const GateSpec& spec) {
  if (model_dir.empty()) throw Error(ErrorKind::kUsage, "", "--base-model", "no base model directory given");
  const GateMetric m = resolve_gate_metric(spec);
  json j;
  j["format"] = kFingerprintFormat;
  j["qloom"] = {{"version", build::kVersion}, {"git_commit", build::kGitCommit}, {"build_type", build::kBuildType},
                {"compiler", build::kCompiler}, {"flags", build::kFlags}, {"isa", isa_name(best_isa())}};
  j["model"] = model_inputs(model_dir);
  j["task"] = m.task;
  j["metric"] = m.metric;
  j["dataset"] = m.dataset;
  j["dataset_sha256"] = dataset_sha256(m);
  j["limit"] = m.limit ? json(*m.limit) : json(nullptr);
  j["seq_len"] = spec.seq_len;
  j["protocol"] = m.task == "ppl" || m.task == "kld" ? "quark" : "";
  j["max_gen_toks"] = m.task == "gsm8k" ? 256 : 0;
  j["tokenizer_sha256"] = tokenizer_sha256(tokenizer_dir_of(spec, model_dir));
  j["server"] = spec.server.empty() ? json(nullptr) : json({{"url", spec.server}, {"served_model", spec.served_model}});
  return j;
}

std::string baseline_fingerprint(const fs::path& model_dir, const GateSpec& spec) {
  return job::sha256_hex(fingerprint_inputs(model_dir, spec).dump());
}

namespace {

// ---- the cache ----

void write_cache(const fs::path& file, const std::string& fingerprint, const json& inputs, const TaskScore& s,
                 const fs::path& out_dir) {
  json c;
  c["format"] = kCacheFormat;
  c["fingerprint"] = fingerprint;
  c["inputs"] = inputs;
  c["task_score"] = to_json(s);
  const fs::path report = out_dir / kEvalReportFile;
  std::error_code ec;
  c["eval_report"] = fs::is_regular_file(report, ec) ? json::parse(io::read_text_file(report)) : json(nullptr);
  c["samples"] = json::parse(io::read_text_file(out_dir / kSamplesFile));
  fs::create_directories(file.parent_path(), ec);
  if (ec)
    throw Error(ErrorKind::kIo, file.parent_path().string(), "", "cannot create the baseline cache directory: " + ec.message());
  io::write_file_atomic(file, c.dump(1) + "\n");
}

// Rebuilds out_dir from a cache file; nullopt (with `why`) when it cannot be used.
std::optional<TaskScore> restore_from_cache(const fs::path& file, const std::string& fingerprint,
                                            const fs::path& out_dir, std::string& why) {
  try {
    const json c = json::parse(io::read_text_file(file));
    if (c.value("format", "") != kCacheFormat) throw std::runtime_error(std::string("not a ") + kCacheFormat + " file");
    if (c.value("fingerprint", "") != fingerprint) throw std::runtime_error("it holds another fingerprint");
    if (!c.contains("samples") || !c.contains("task_score") || !c.contains("eval_report"))
      throw std::runtime_error("samples, task_score or eval_report is missing");
    const TaskScore s = task_score_from_json(nlohmann::json::parse(c["task_score"].dump()), file.string());
    const nlohmann::json report = nlohmann::json::parse(c["eval_report"].dump());
    publish_task_score(out_dir, c["samples"], s, report.is_null() ? nullptr : &report);
    return load_task_score(out_dir);  // validates the samples against the score
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kIo) throw;  // out_dir cannot be written: not the cache's fault
    why = e.what();
  } catch (const std::exception& e) {
    why = e.what();
  }
  return std::nullopt;
}

// ---- health ----

int64_t vocabulary_size(const fs::path& model_dir, const GateSpec& spec) {
  const nlohmann::json& cfg = io::ModelDir::open(model_dir).config();
  for (const nlohmann::json* c : {&cfg, cfg.contains("text_config") ? &cfg["text_config"] : nullptr})
    if (c != nullptr && c->contains("vocab_size") && (*c)["vocab_size"].is_number_integer())
      return (*c)["vocab_size"].get<int64_t>();
  return text::Tokenizer::load(tokenizer_dir_of(spec, model_dir)).vocab_size();
}

void judge_health(BaselineHealth& h, const TaskScore& s, double floor, const fs::path& model_dir,
                  const GateSpec& spec) {
  const std::string what = s.task + " " + s.metric + " " + format_printf("%.4f", s.score);
  if (s.task == "kld") {
    h.healthy = true;
    h.reason = "kld: the base model is the reference (KLD 0 by definition); --baseline-floor does not apply";
  } else if (s.direction == agent::MetricDirection::kLowerIsBetter) {
    const int64_t vocab = vocabulary_size(model_dir, spec);
    h.healthy = std::isfinite(s.score) && s.score < double(vocab);
    h.reason = what + (h.healthy ? " is better than guessing uniformly" : " is no better than guessing uniformly") +
               " (perplexity " + std::to_string(vocab) + ", the vocabulary size); --baseline-floor " +
               format_printf("%g", floor) + " does not apply to perplexity";
  } else {
    h.floor = floor;
    h.healthy = s.score >= floor;
    h.reason = what + (h.healthy ? " is at or above" : " is below") + " --baseline-floor " + format_printf("%g", floor) +
               (h.healthy ? "" : ": the base model cannot do the task, so an accuracy gap against it means nothing");
  }
}

}  // namespace

BaselineHealth check_baseline(const fs::path& model_dir, const GateSpec& spec, double floor, const fs::path& cache_dir,
                              bool recheck, const fs::path& out_dir, std::ostream* log) {
  const GateMetric m = resolve_gate_metric(spec);
  if (!std::isfinite(floor) || floor < 0 || (m.direction == agent::MetricDirection::kHigherIsBetter && floor > 1))
    throw Error(ErrorKind::kUsage, "", "--baseline-floor", "must be a number in [0, 1], got " + format_printf("%g", floor),
                "e.g. 0.03 (\"3%\" is read as 0.03)");
  if (cache_dir.empty() || out_dir.empty())
    throw Error(ErrorKind::kUsage, "", "baseline cache / out_dir", "both directories are required");
  const json inputs = fingerprint_inputs(model_dir, spec);
  BaselineHealth h;
  h.fingerprint = job::sha256_hex(inputs.dump());
  const fs::path cache_file = cache_dir / (h.fingerprint + ".json");
  std::optional<TaskScore> s;
  std::error_code ec;
  if (!recheck && fs::is_regular_file(cache_file, ec)) {
    std::string why;
    s = restore_from_cache(cache_file, h.fingerprint, out_dir, why);
    if (log != nullptr)
      *log << "perf: baseline " << (s ? "cache hit: " : "cache file unusable (" + why + "), re-evaluating: ")
           << cache_file.string() << "\n";
    h.cached = s.has_value();
  } else if (log != nullptr) {
    *log << "perf: baseline " << (recheck ? "recheck requested" : "not cached") << " (" << h.fingerprint << ")\n";
  }
  if (!s) {
    s = score_task(model_dir, spec, out_dir, log);
    write_cache(cache_file, h.fingerprint, inputs, *s, out_dir);
  }
  h.task = s->task;
  h.metric = s->metric;
  h.score = s->score;
  h.stderr_ = s->stderr_;
  h.n = s->n;
  h.evaluated_at = s->evaluated_at;
  h.samples_path = s->samples_path;
  judge_health(h, *s, floor, model_dir, spec);
  if (log != nullptr) *log << "perf: baseline " << (h.healthy ? "healthy: " : "UNHEALTHY: ") << h.reason << "\n" << std::flush;
  return h;
}

nlohmann::ordered_json to_json(const BaselineHealth& h) {
  json j;
  j["fingerprint"] = h.fingerprint;
  j["task"] = h.task;
  j["metric"] = h.metric;
  j["score"] = h.score;
  j["stderr"] = h.stderr_;
  j["n"] = h.n;
  j["floor"] = h.floor ? json(*h.floor) : json(nullptr);
  j["healthy"] = h.healthy;
  j["reason"] = h.reason;
  j["cached"] = h.cached;
  j["evaluated_at"] = h.evaluated_at;
  j["samples_path"] = h.samples_path.string();
  return j;
}

BaselineHealth baseline_health_from_json(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw Error(ErrorKind::kInvalidInput, file, "baseline_reference", "must be a JSON object");
  BaselineHealth h;
  h.fingerprint = field<std::string>(j, "fingerprint", file);
  h.task = field<std::string>(j, "task", file);
  h.metric = field<std::string>(j, "metric", file);
  h.score = field<double>(j, "score", file);
  h.stderr_ = field<double>(j, "stderr", file);
  h.n = field<int64_t>(j, "n", file);
  if (!j.contains("floor")) throw Error(ErrorKind::kInvalidInput, file, "floor", "missing");
  if (!j["floor"].is_null()) h.floor = field<double>(j, "floor", file);
  h.healthy = field<bool>(j, "healthy", file);
  h.reason = field<std::string>(j, "reason", file);
  h.cached = field<bool>(j, "cached", file);
  h.evaluated_at = field<std::string>(j, "evaluated_at", file);
  h.samples_path = field<std::string>(j, "samples_path", file);
  return h;
}

}  // namespace qloom::perf
