#include "qloom/perf/perf_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include <CLI/CLI.hpp>

#include "qloom/core/error.h"
#include "qloom/core/flag_names.h"

namespace qloom::perf {
namespace {

[[noreturn]] void options_usage(std::string_view flag, const std::string& message, const std::string& remedy = {}) {
  throw Error(ErrorKind::kUsage, "", "--" + std::string(flag), message, remedy);
}

// quark-quant-perf options that steer GPU serving stacks; recorded, reported
// as not applicable to the native CPU engine.
const std::vector<std::string>& gpu_only_options() {
  static const std::vector<std::string> names = {
      "gpu_type",        "gpu_index",       "tp",           "framework",          "vllm_extra_arg",
      "sglang_extra_arg", "workspace_source", "framework_repo", "kernel_repo",      "tracelens_arch",
      "backend",         "docker_image",    "experience_store", "perfopt_budget"};
  return names;
}

void add_search_flags(CLI::App& sub, PerfCommand& cmd) {
  RunSpec& s = cmd.spec;
  sub.add_option(flag_names("layer_precision_candidates"), s.layer_precision_candidates,
                 "precisions the mixed-precision search may give a partition (default: native fp8 ptpc_fp8 int8 "
                 "int4_wo_128 mxfp4)");
  sub.add_option(flag_names("kv_cache_precision_candidates"), s.kv_cache_precision_candidates,
                 "KV-cache precisions of the search: native and/or fp8 (fp8 alone is refused)")
      ->capture_default_str();
  sub.add_option(flag_names("kv_cache_scheme"), s.kv_cache_scheme, "a fixed KV-cache scheme for every candidate: fp8");
  sub.add_option(flag_names("exclude_layers"), s.exclude_layers, "layer patterns never quantized (Quark patterns)");
  sub.add_option(flag_names("max_search_candidates"), s.max_search_candidates,
                 "candidates the search scores at most (0 = all)")
      ->capture_default_str();
  sub.add_option(flag_names("search_timeout"), s.search_timeout,
                 "seconds of search before it stops with the best so far (partial_timeout)")
      ->capture_default_str();
  sub.add_option(flag_names("granularity"), s.granularity,
                 "sensitivity and assignment unit: partition (all layers of a type) or layer")
      ->check(CLI::IsMember({"partition", "layer"}))
      ->capture_default_str();
}

void add_eval_flags(CLI::App& sub, PerfCommand& cmd) {
  RunSpec& s = cmd.spec;
  sub.add_option(flag_names("accuracy_gap"), cmd.accuracy_gap_text,
                 "largest accepted relative accuracy gap: 0.02 or 2% (default 0.02)");
  sub.add_option(flag_names("baseline_floor"), cmd.baseline_floor_text,
                 "a base model scoring below this on the gate metric is base_unhealthy (default 0.03)");
  sub.add_flag(flag_names("recheck_baseline"), cmd.recheck_baseline,
               "re-measure the baseline even when cached or base_unhealthy");
  sub.add_flag(flag_names("retry_accuracy_gate"), cmd.retry_accuracy_gate,
               "reopen a failed or done session at the accuracy gate");
  sub.add_option(flag_names("eval_task"), s.eval_task,
                 "gate metric: gsm8k, ppl, kld or a multiple-choice task (hellaswag, ...)")
      ->capture_default_str();
  sub.add_option(flag_names("eval_limit"), s.eval_limit,
                 "ppl / kld windows or multiple-choice documents of the gate (default: the task's)");
  sub.add_option(flag_names("eval_dataset"), s.eval_dataset, "the gate's data set file (default: the task's bundled one)");
  sub.add_option(flag_names("gsm8k_num_samples"), s.gsm8k_num_samples, "gsm8k questions of the gate")
      ->capture_default_str();
  sub.add_option(flag_names("search_gsm8k_num_samples"), s.search_gsm8k_num_samples,
                 "gsm8k questions per candidate during the search (default: the KLD proxy only)");
}

void add_workload_flags(CLI::App& sub, PerfCommand& cmd) {
  RunSpec& s = cmd.spec;
  sub.add_option(flag_names("performance_mode"), cmd.performance_mode_given,
                 "off (default), measure (throughput of base and quantized) or optimize (tune to --target-gain)")
      ->check(CLI::IsMember({"off", "measure", "optimize"}));
  sub.add_option(flag_names("target_gain"), cmd.target_gain_text, "throughput gain to reach, e.g. 2x (implies optimize)");
  sub.add_option(flag_names("isl"), s.isl, "input tokens per throughput prompt")->capture_default_str();
  sub.add_option(flag_names("osl"), s.osl, "output tokens per throughput prompt")->capture_default_str();
  sub.add_option(flag_names("bench_concurrency"), s.bench_concurrency, "sequences in flight")->capture_default_str();
  sub.add_option(flag_names("server"), s.server,
                 "measure throughput against this OpenAI-compatible server (qloom serve, vLLM, SGLang)");
  sub.add_option(flag_names("threads"), s.threads, "worker threads (0 = all cores)");
  sub.add_option(flag_names("runtime"), s.runtime,
                 "in-process throughput: native (quantized kernels, bf16 compute; default) or simulate "
                 "(dequantized weights, simulated activation quantization)")
      ->check(CLI::IsMember({"native", "simulate"}));
}

void add_gpu_only_flags(CLI::App& sub, PerfCommand& cmd) {
  for (const std::string& name : gpu_only_options()) {
    sub.add_option_function<std::vector<std::string>>(
           flag_names(name),
           [&cmd, name](const std::vector<std::string>& v) {
             std::string joined;
             for (const auto& x : v) joined += (joined.empty() ? "" : " ") + x;
             cmd.spec.not_applicable[name] = joined;
           },
           "quark-quant-perf GPU option: recorded, not applicable to qloom's CPU engine")
        ->group("GPU options (recorded, not applicable)");
  }
}

}  // namespace

std::vector<std::string> default_layer_precisions() {
  return {"native", "fp8", "ptpc_fp8", "int8", "int4_wo_128", "mxfp4"};
}

double parse_ratio(std::string_view text, std::string_view flag, bool allow_x) {
  std::string t(text);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  double factor = 1.0;
  if (!t.empty() && t.back() == '%') {
    factor = 0.01;
    t.pop_back();
  } else if (allow_x && !t.empty() && (t.back() == 'x' || t.back() == 'X')) {
    t.pop_back();
  }
  if (t.empty()) options_usage(flag, "'" + std::string(text) + "' is not a number", "write e.g. 0.02, 2% or 2x");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || !std::isfinite(v) || v < 0)
    options_usage(flag, "'" + std::string(text) + "' is not a non-negative number", "write e.g. 0.02, 2% or 2x");
  return v * factor;
}

void add_perf_flags(CLI::App& sub, PerfCommand& cmd) {
  RunSpec& s = cmd.spec;
  sub.add_option(flag_names("model"), s.model, "model directory to quantize (required)");
  sub.add_option(flag_names("base_model"), s.base_model, "the baseline of the gate and throughput (default: --model)");
  sub.add_option(flag_names("quant_strategy"), s.quant_strategy,
                 "one fixed recipe in plain words (\"fp8 with fp8 kv cache\"); omit it for the mixed-precision search");
  sub.add_option(flag_names("session_dir"), cmd.session_dir,
                 "the session directory; the same command with the same directory resumes (default ./runs/<time>)");
  sub.add_option(flag_names("calib_dataset"), s.calib_dataset, "calibration data (default: the bundled c4 sample)");
  sub.add_option(flag_names("num_calib_data"), s.num_calib_data, "calibration samples")->capture_default_str();
  sub.add_option(flag_names("calib_seqlen"), s.calib_seqlen, "tokens per calibration sample")->capture_default_str();
  sub.add_flag(flag_names("json"), cmd.json, "print final.json only (no summary line on stderr)");
  add_search_flags(sub, cmd);
  add_eval_flags(sub, cmd);
  add_workload_flags(sub, cmd);
  add_gpu_only_flags(sub, cmd);
}

namespace {

void check_positive(int64_t v, std::string_view flag) {
  if (v <= 0) options_usage(flag, "must be positive, got " + std::to_string(v));
}

void finish_kv_candidates(RunSpec& s) {
  std::set<std::string> kv(s.kv_cache_precision_candidates.begin(), s.kv_cache_precision_candidates.end());
  for (const auto& k : kv)
    if (k != "native" && k != "fp8")
      options_usage("kv-cache-precision-candidates", "unknown KV-cache precision '" + k + "'", "use native and/or fp8");
  if (kv.empty() || !kv.count("native"))
    options_usage("kv-cache-precision-candidates", "fp8 alone leaves the search no fallback for a model whose KV cache "
          "does not tolerate fp8", "add native: --kv-cache-precision-candidates native fp8");
  s.kv_cache_precision_candidates.assign(kv.begin(), kv.end());  // sorted: native < fp8? keep fixed order below
  std::sort(s.kv_cache_precision_candidates.begin(), s.kv_cache_precision_candidates.end(),
            [](const std::string& a, const std::string& b) { return (a == "native") > (b == "native"); });
  if (!s.kv_cache_scheme.empty() && s.kv_cache_scheme != "fp8")
    options_usage("kv-cache-scheme", "unknown KV-cache scheme '" + s.kv_cache_scheme + "'", "use fp8");
}

void finish_performance(PerfCommand& cmd) {
  RunSpec& s = cmd.spec;
  if (!cmd.target_gain_text.empty()) {
    if (cmd.performance_mode_given == "off" || cmd.performance_mode_given == "measure")
      options_usage("target-gain", "a target gain needs --performance-mode optimize, but " + cmd.performance_mode_given +
                               " was given", "drop --performance-mode or use optimize");
    s.target_gain = parse_ratio(cmd.target_gain_text, "target-gain", true);
    if (*s.target_gain <= 0) options_usage("target-gain", "must be positive");
    s.performance_mode = "optimize";
  } else if (!cmd.performance_mode_given.empty()) {
    s.performance_mode = cmd.performance_mode_given;
  }
  if (s.performance_mode == "optimize" && !s.target_gain)
    options_usage("performance-mode", "optimize needs --target-gain", "add e.g. --target-gain 1.5x, or use measure");
  check_positive(s.isl, "isl");
  check_positive(s.osl, "osl");
  check_positive(s.bench_concurrency, "bench-concurrency");
}

}  // namespace

void finish_perf_command(PerfCommand& cmd) {
  RunSpec& s = cmd.spec;
  if (s.model.empty()) options_usage("model", "a model is required", "qloom perf --model DIR [options]; see qloom perf --help");
  if (s.base_model.empty()) s.base_model = s.model;
  if (!cmd.accuracy_gap_text.empty()) s.accuracy_gap = parse_ratio(cmd.accuracy_gap_text, "accuracy-gap");
  if (s.accuracy_gap >= 1.0)
    options_usage("accuracy-gap", "a relative gap of " + cmd.accuracy_gap_text + " accepts losing everything",
          "write a ratio (0.02) or a percentage (2%)");
  if (!cmd.baseline_floor_text.empty()) s.baseline_floor = parse_ratio(cmd.baseline_floor_text, "baseline-floor");
  finish_performance(cmd);
  finish_kv_candidates(s);
  if (s.layer_precision_candidates.empty()) s.layer_precision_candidates = default_layer_precisions();
  if (s.max_search_candidates < 0) options_usage("max-search-candidates", "must be >= 0 (0 = all)");
  if (!(s.search_timeout > 0)) options_usage("search-timeout", "must be positive");
  check_positive(s.gsm8k_num_samples, "gsm8k-num-samples");
  if (s.search_gsm8k_num_samples) check_positive(*s.search_gsm8k_num_samples, "search-gsm8k-num-samples");
  if (s.eval_limit) check_positive(*s.eval_limit, "eval-limit");
  check_positive(s.num_calib_data, "num-calib-data");
  check_positive(s.calib_seqlen, "calib-seqlen");
  if (s.eval_task.empty()) options_usage("eval-task", "must not be empty");
}

namespace {

template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json str_or_null(const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); }

}  // namespace

nlohmann::ordered_json to_json(const RunSpec& s) {
  nlohmann::ordered_json j;
  j["model"] = s.model;
  j["base_model"] = s.base_model;
  j["quant_strategy"] = str_or_null(s.quant_strategy);
  j["accuracy_gap"] = s.accuracy_gap;
  j["performance_mode"] = s.performance_mode;
  j["target_gain"] = opt(s.target_gain);
  j["layer_precision_candidates"] = s.layer_precision_candidates;
  j["kv_cache_precision_candidates"] = s.kv_cache_precision_candidates;
  j["kv_cache_scheme"] = str_or_null(s.kv_cache_scheme);
  j["exclude_layers"] = s.exclude_layers;
  j["max_search_candidates"] = s.max_search_candidates;
  j["search_timeout"] = s.search_timeout;
  j["baseline_floor"] = s.baseline_floor;
  j["eval_task"] = s.eval_task;
  j["eval_limit"] = opt(s.eval_limit);
  j["eval_dataset"] = str_or_null(s.eval_dataset);
  j["gsm8k_num_samples"] = s.gsm8k_num_samples;
  j["search_gsm8k_num_samples"] = opt(s.search_gsm8k_num_samples);
  j["granularity"] = s.granularity;
  j["isl"] = s.isl;
  j["osl"] = s.osl;
  j["bench_concurrency"] = s.bench_concurrency;
  j["calib_dataset"] = s.calib_dataset;
  j["num_calib_data"] = s.num_calib_data;
  j["calib_seqlen"] = s.calib_seqlen;
  j["server"] = str_or_null(s.server);
  j["threads"] = s.threads;
  j["runtime"] = s.runtime;
  j["not_applicable"] = s.not_applicable;
  return j;
}

namespace {

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  if (!j.is_object() || !j.contains(name))
    throw Error(ErrorKind::kInvalidInput, "state.json", "run_spec." + std::string(name), "missing field",
                "the session was written by another qloom version; start a new session directory");
  return j.at(name);
}

template <class T>
void read(const nlohmann::json& j, const char* name, T& out) {
  try {
    out = field(j, name).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidInput, "state.json", "run_spec." + std::string(name), e.what());
  }
}
template <class T>
void read_opt(const nlohmann::json& j, const char* name, std::optional<T>& out) {
  const auto& v = field(j, name);
  if (v.is_null()) {
    out.reset();
    return;
  }
  T x{};
  read(j, name, x);
  out = x;
}
void read_str_or_null(const nlohmann::json& j, const char* name, std::string& out) {
  const auto& v = field(j, name);
  if (v.is_null()) out.clear();
  else read(j, name, out);
}

}  // namespace

RunSpec run_spec_from_json(const nlohmann::json& j) {
  RunSpec s;
  read(j, "model", s.model);
  read(j, "base_model", s.base_model);
  read_str_or_null(j, "quant_strategy", s.quant_strategy);
  read(j, "accuracy_gap", s.accuracy_gap);
  read(j, "performance_mode", s.performance_mode);
  read_opt(j, "target_gain", s.target_gain);
  read(j, "layer_precision_candidates", s.layer_precision_candidates);
  read(j, "kv_cache_precision_candidates", s.kv_cache_precision_candidates);
  read_str_or_null(j, "kv_cache_scheme", s.kv_cache_scheme);
  read(j, "exclude_layers", s.exclude_layers);
  read(j, "max_search_candidates", s.max_search_candidates);
  read(j, "search_timeout", s.search_timeout);
  read(j, "baseline_floor", s.baseline_floor);
  read(j, "eval_task", s.eval_task);
  read_opt(j, "eval_limit", s.eval_limit);
  read_str_or_null(j, "eval_dataset", s.eval_dataset);
  read(j, "gsm8k_num_samples", s.gsm8k_num_samples);
  read_opt(j, "search_gsm8k_num_samples", s.search_gsm8k_num_samples);
  read(j, "granularity", s.granularity);
  read(j, "isl", s.isl);
  read(j, "osl", s.osl);
  read(j, "bench_concurrency", s.bench_concurrency);
  read(j, "calib_dataset", s.calib_dataset);
  read(j, "num_calib_data", s.num_calib_data);
  read(j, "calib_seqlen", s.calib_seqlen);
  read_str_or_null(j, "server", s.server);
  read(j, "threads", s.threads);
  if (j.contains("runtime")) read(j, "runtime", s.runtime);  // absent in sessions before issue 14
  read(j, "not_applicable", s.not_applicable);
  return s;
}

std::vector<std::string> run_spec_differences(const RunSpec& stored, const RunSpec& given) {
  nlohmann::ordered_json a = to_json(stored), b = to_json(given);
  std::vector<std::string> out;
  for (auto it = a.begin(); it != a.end(); ++it) {
    const auto& other = b[it.key()];
    if (it.value() != other) out.push_back(it.key() + ": " + it.value().dump() + " -> " + other.dump());
  }
  return out;
}

}  // namespace qloom::perf
