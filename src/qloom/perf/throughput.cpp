// JSON forms, the prompt pool, the measurement loop and ABBA. The two
// workloads (engine, server) are in throughput_runners.cpp.
#include "qloom/perf/throughput.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qloom/core/format.h"
#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

Json opt_json(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

std::optional<double> opt_number(const Json& j, const char* key, const std::string& where) {
  if (json_read::field(j, key, where).is_null()) return std::nullopt;
  return json_read::number(j, key, where);
}

// Median of the runs' values of one optional field (absent when any run lacks it).
std::optional<double> median_of(const std::vector<RunSample>& runs, std::optional<double> RunSample::*field) {
  std::vector<double> v;
  for (const RunSample& r : runs) {
    if (!(r.*field)) return std::nullopt;
    v.push_back(*(r.*field));
  }
  if (v.empty()) return std::nullopt;
  return median(std::move(v));
}

}  // namespace

// ---- JSON ----

Json RunnerSettings::to_json() const { return {{"threads", threads}, {"decode_batch", decode_batch}}; }

RunnerSettings RunnerSettings::from_json(const Json& j, const std::string& where) {
  RunnerSettings s;
  const int64_t t = json_read::integer(j, "threads", where);
  if (t < 0 || t > 65536) throw_invalid(where, "threads", "threads must be in [0, 65536]");
  s.threads = unsigned(t);
  s.decode_batch = json_read::integer(j, "decode_batch", where);
  if (s.decode_batch < 0) throw_invalid(where, "decode_batch", "decode_batch must not be negative");
  return s;
}

Json RunSample::to_json() const {
  return {{"tokens_per_s", tokens_per_s},       {"seconds", seconds},
          {"output_tokens", output_tokens},     {"prompt_tokens", prompt_tokens},
          {"total_tokens_per_s", total_tokens_per_s}, {"ttft_ms_median", opt_json(ttft_ms_median)},
          {"tpot_ms_median", opt_json(tpot_ms_median)}, {"latency_ms_median", opt_json(latency_ms_median)}};
}

RunSample RunSample::from_json(const Json& j, const std::string& where) {
  RunSample r;
  r.tokens_per_s = json_read::number(j, "tokens_per_s", where);
  r.seconds = json_read::number(j, "seconds", where);
  r.output_tokens = json_read::integer(j, "output_tokens", where);
  r.prompt_tokens = json_read::integer(j, "prompt_tokens", where);
  r.total_tokens_per_s = json_read::number(j, "total_tokens_per_s", where);
  r.ttft_ms_median = opt_number(j, "ttft_ms_median", where);
  r.tpot_ms_median = opt_number(j, "tpot_ms_median", where);
  r.latency_ms_median = opt_number(j, "latency_ms_median", where);
  return r;
}

Json ThroughputMeasurement::to_json() const {
  Json j;
  j["label"] = label;
  j["model_dir"] = model_dir;
  j["runtime"] = runtime;
  j["backend"] = backend;
  j["runs"] = Json::array();
  for (const RunSample& r : runs) j["runs"].push_back(r.to_json());
  j["warmup"] = warmup.to_json();
  j["median_tokens_per_s"] = median_tokens_per_s;
  j["relative_mad"] = relative_mad;
  j["stable"] = stable;
  j["timed_samples"] = timed_samples;
  j["median_total_tokens_per_s"] = median_total_tokens_per_s;
  j["ttft_ms_median"] = opt_json(ttft_ms_median);
  j["tpot_ms_median"] = opt_json(tpot_ms_median);
  j["latency_ms_median"] = opt_json(latency_ms_median);
  j["spec"] = spec.to_json();
  j["settings"] = settings.to_json();
  j["num_prompts"] = num_prompts;
  j["prompts_hash"] = prompts_hash;
  j["note"] = note;
  return j;
}

ThroughputMeasurement ThroughputMeasurement::from_json(const Json& j, const std::string& where) {
  ThroughputMeasurement m;
  m.label = json_read::text(j, "label", where);
  m.model_dir = json_read::text(j, "model_dir", where);
  m.runtime = json_read::text(j, "runtime", where);
  m.backend = json_read::text(j, "backend", where);
  const Json& runs = json_read::field(j, "runs", where);
  if (!runs.is_array()) throw_invalid(where, "runs", "'runs' must be an array");
  for (size_t i = 0; i < runs.size(); ++i)
    m.runs.push_back(RunSample::from_json(runs[i], where + ": runs[" + std::to_string(i) + "]"));
  m.warmup = RunSample::from_json(json_read::field(j, "warmup", where), where + ": warmup");
  m.median_tokens_per_s = json_read::number(j, "median_tokens_per_s", where);
  m.relative_mad = json_read::number(j, "relative_mad", where);
  m.stable = json_read::boolean(j, "stable", where);
  m.timed_samples = int(json_read::integer(j, "timed_samples", where));
  m.median_total_tokens_per_s = json_read::number(j, "median_total_tokens_per_s", where);
  m.ttft_ms_median = opt_number(j, "ttft_ms_median", where);
  m.tpot_ms_median = opt_number(j, "tpot_ms_median", where);
  m.latency_ms_median = opt_number(j, "latency_ms_median", where);
  m.spec = ThroughputSpec::from_json(json_read::field(j, "spec", where), where + ": spec");
  m.settings = RunnerSettings::from_json(json_read::field(j, "settings", where), where + ": settings");
  m.num_prompts = json_read::integer(j, "num_prompts", where);
  m.prompts_hash = json_read::text(j, "prompts_hash", where);
  m.note = json_read::text(j, "note", where);
  return m;
}

Json AbbaResult::to_json() const {
  Json j;
  j["a_label"] = a_label;
  j["b_label"] = b_label;
  j["a1"] = a1;
  j["b1"] = b1;
  j["b2"] = b2;
  j["a2"] = a2;
  j["gain"] = gain;
  j["max_relative_mad"] = max_relative_mad;
  j["stable"] = stable;
  j["legs"] = Json::array();
  for (const ThroughputMeasurement& m : legs) j["legs"].push_back(m.to_json());
  return j;
}

AbbaResult AbbaResult::from_json(const Json& j, const std::string& where) {
  AbbaResult r;
  r.a_label = json_read::text(j, "a_label", where);
  r.b_label = json_read::text(j, "b_label", where);
  r.a1 = json_read::number(j, "a1", where);
  r.b1 = json_read::number(j, "b1", where);
  r.b2 = json_read::number(j, "b2", where);
  r.a2 = json_read::number(j, "a2", where);
  r.gain = json_read::number(j, "gain", where);
  r.max_relative_mad = json_read::number(j, "max_relative_mad", where);
  r.stable = json_read::boolean(j, "stable", where);
  const Json& legs = json_read::field(j, "legs", where);
  if (!legs.is_array() || (!legs.empty() && legs.size() != 4))
    throw_invalid(where, "legs", "'legs' must be an array of the four measurements A1 B1 B2 A2 (or empty)");
  for (size_t i = 0; i < legs.size(); ++i)
    r.legs.push_back(ThroughputMeasurement::from_json(legs[i], where + ": legs[" + std::to_string(i) + "]"));
  return r;
}

// ---- prompts ----

std::vector<int32_t> prompt_token_pool(const text::Tokenizer& tok, const model::ModelConfig& cfg) {
  const int64_t v = std::min<int64_t>(cfg.vocab_size, tok.vocab_size());
  std::vector<bool> banned(size_t(std::max<int64_t>(v, 0)), false);
  auto ban = [&](int64_t id) {
    if (id >= 0 && id < v) banned[size_t(id)] = true;
  };
  ban(cfg.bos_token_id);
  for (int64_t id : cfg.eos_token_ids) ban(id);
  if (const auto b = tok.bos_id()) ban(*b);
  if (const auto e = tok.eos_id()) ban(*e);
  std::vector<int32_t> pool;
  for (int32_t id = 0; id < int32_t(v); ++id) {
    if (banned[size_t(id)]) continue;
    const int32_t one[1] = {id};
    if (tok.decode(one, true).empty() && !tok.decode(one, false).empty()) continue;  // special
    pool.push_back(id);
  }
  return pool;
}

// ---- measurement ----

ThroughputMeasurement measure_workload(Workload& w, const std::string& label, const ProtocolLimits& limits,
                                       const ProgressLog& log) {
  check_limits(limits);
  auto say = [&](const std::string& s) {
    if (log) log(label + ": " + s);
  };
  ThroughputMeasurement m;
  m.label = label;
  m.model_dir = w.model_dir();
  m.runtime = w.runtime();
  m.backend = w.backend();
  m.spec = w.spec();
  m.settings = w.settings();
  m.num_prompts = int64_t(w.prompts().size());
  m.prompts_hash = prompts_hash(w.prompts());
  m.note = w.note();
  m.warmup = w.run();
  say("warm-up " + format_fixed(m.warmup.tokens_per_s, 1) + " output tokens/s");
  std::vector<double> rates;
  while (needs_extra_run(rates, limits)) {
    m.runs.push_back(w.run());
    rates.push_back(m.runs.back().tokens_per_s);
    say("run " + std::to_string(rates.size()) + ": " + format_fixed(rates.back(), 1) + " output tokens/s");
  }
  m.timed_samples = int(m.runs.size());
  m.median_tokens_per_s = median(rates);
  m.relative_mad = relative_mad(rates);
  m.stable = is_stable(m.relative_mad, limits);
  std::vector<double> totals;
  for (const RunSample& r : m.runs) totals.push_back(r.total_tokens_per_s);
  m.median_total_tokens_per_s = median(std::move(totals));
  m.ttft_ms_median = median_of(m.runs, &RunSample::ttft_ms_median);
  m.tpot_ms_median = median_of(m.runs, &RunSample::tpot_ms_median);
  m.latency_ms_median = median_of(m.runs, &RunSample::latency_ms_median);
  say("median " + format_fixed(m.median_tokens_per_s, 1) + " output tokens/s, relative MAD " + format_fixed(m.relative_mad, 4) +
      (m.stable ? " (stable)" : " (NOT stable)"));
  return m;
}

ThroughputMeasurement measure_throughput(const std::filesystem::path& model_dir, const std::string& label,
                                         const ThroughputSpec& spec, const ProtocolLimits& limits,
                                         const ProgressLog& log) {
  check_limits(limits);
  const std::unique_ptr<Workload> w = open_workload(model_dir, spec);
  return measure_workload(*w, label, limits, log);
}

// ---- ABBA ----

AbbaResult abba_of(double a1, double b1, double b2, double a2, double max_relative_mad, bool stable) {
  AbbaResult r;
  r.a1 = a1;
  r.b1 = b1;
  r.b2 = b2;
  r.a2 = a2;
  r.gain = abba_gain(a1, b1, b2, a2);
  r.max_relative_mad = max_relative_mad;
  r.stable = stable;
  return r;
}

AbbaResult abba(Workload& a, const std::string& a_label, Workload& b, const std::string& b_label,
                const ProtocolLimits& limits, const ProgressLog& log) {
  check_limits(limits);
  if (prompts_hash(a.prompts()) != prompts_hash(b.prompts()))
    throw_invalid(b.model_dir(), "prompts",
                  "the two models draw different prompts (their vocabularies or special tokens differ from " +
                      a.model_dir() + "), so their throughputs are not comparable",
                  "compare a quantized checkpoint with the model it was made from");
  std::vector<ThroughputMeasurement> legs;
  legs.push_back(measure_workload(a, a_label + " (A1)", limits, log));
  legs.push_back(measure_workload(b, b_label + " (B1)", limits, log));
  legs.push_back(measure_workload(b, b_label + " (B2)", limits, log));
  legs.push_back(measure_workload(a, a_label + " (A2)", limits, log));
  double mad = 0;
  bool stable = true;
  for (const ThroughputMeasurement& m : legs) {
    mad = std::max(mad, m.relative_mad);
    stable = stable && m.stable;
  }
  AbbaResult r = abba_of(legs[0].median_tokens_per_s, legs[1].median_tokens_per_s, legs[2].median_tokens_per_s,
                         legs[3].median_tokens_per_s, mad, stable);
  r.a_label = a_label;
  r.b_label = b_label;
  r.legs = std::move(legs);
  if (log) log("ABBA " + b_label + " / " + a_label + ": gain " + format_fixed(r.gain, 4) + ", max relative MAD " + format_fixed(mad, 4));
  return r;
}

AbbaResult abba(const std::filesystem::path& baseline_dir, const std::filesystem::path& quantized_dir,
                const ThroughputSpec& spec, const ProtocolLimits& limits, const ProgressLog& log) {
  check_limits(limits);
  if (!spec.server.empty())
    throw Error(ErrorKind::kUsage, spec.server, "--server",
                "one server serves one model, so it cannot be both sides of a baseline / quantized comparison",
                "start a server per model and compare workloads opened on each (perf::abba on two Workloads)");
  const std::unique_ptr<Workload> a = open_workload(baseline_dir, spec);
  const std::unique_ptr<Workload> b = open_workload(quantized_dir, spec);
  return abba(*a, "baseline", *b, "quantized", limits, log);
}

}  // namespace qloom::perf
