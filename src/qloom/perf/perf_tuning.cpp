#include "qloom/perf/perf_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "qloom/core/format.h"
#include "qloom/core/error.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

std::string settings_label(const RunnerSettings& s) {
  return "quantized threads=" + std::to_string(s.threads) + " decode_batch=" + std::to_string(s.decode_batch);
}

void push_unique_value(std::vector<int64_t>& v, int64_t x) {
  if (x >= 1 && std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

std::vector<KnobNote> fixed_knobs(bool server, bool rows_independent) {
  std::vector<KnobNote> notes = {
      {"kernel",
       "linear() picks its GEMM path per shape class inside the engine (gemm_dispatch.h kAuto: qloom's AVX-512 / "
       "AVX2 kernels, OpenBLAS never picked) and QLOOM_MAX_ISA is read once per process (core/convert.h "
       "best_isa), so neither can change between runs of one process"},
      {"tile_sizes", "the packed GEMM's tile sizes are compile-time constants (12x32 AVX-512, 6x16 AVX2)"}};
  if (server) {
    notes.push_back({"threads", "--server: the server owns its compute threads (restart it with other settings)"});
    notes.push_back({"decode_batch", "--server: the server owns its batching (e.g. vLLM --max-num-seqs)"});
  } else if (!rows_independent) {
    notes.push_back({"decode_batch",
                     "the checkpoint's dynamic per-tensor activation scales mix rows, so sequences decode one "
                     "at a time (CheckpointRuntime::rows_independent)"});
  }
  return notes;
}

}  // namespace

// ---- JSON ----

Json TuningTrial::to_json() const {
  return {{"knob", knob},       {"from", from}, {"to", to},         {"abba", abba.to_json()},
          {"keep_floor", keep_floor}, {"kept", kept}, {"reason", reason}};
}

TuningTrial TuningTrial::from_json(const Json& j, const std::string& where) {
  TuningTrial t;
  t.knob = json_read::text(j, "knob", where);
  t.from = json_read::integer(j, "from", where);
  t.to = json_read::integer(j, "to", where);
  t.abba = AbbaResult::from_json(json_read::field(j, "abba", where), where + ": abba");
  t.keep_floor = json_read::number(j, "keep_floor", where);
  t.kept = json_read::boolean(j, "kept", where);
  t.reason = json_read::text(j, "reason", where);
  return t;
}

Json TuningResult::to_json() const {
  Json j;
  j["target_gain"] = target_gain ? Json(*target_gain) : Json();
  j["initial_settings"] = initial_settings.to_json();
  j["final_settings"] = final_settings.to_json();
  j["initial_abba"] = initial_abba.to_json();
  j["trials"] = Json::array();
  for (const TuningTrial& t : trials) j["trials"].push_back(t.to_json());
  j["final_abba"] = final_abba.to_json();
  j["final_gain"] = final_gain;
  j["target_met"] = target_met;
  j["stop_reason"] = stop_reason;
  j["not_tunable"] = Json::array();
  for (const KnobNote& n : not_tunable) j["not_tunable"].push_back({{"knob", n.knob}, {"reason", n.reason}});
  return j;
}

// ---- the KEEP rule ----

double keep_floor(double max_relative_mad) { return std::max(0.01, 2 * max_relative_mad); }

bool keep_trial(const AbbaResult& r, double* floor_out, std::string* reason_out) {
  const double floor = keep_floor(r.max_relative_mad);
  const bool keep = std::isfinite(r.gain) && r.gain >= 1 + floor;
  if (floor_out) *floor_out = floor;
  if (reason_out)
    *reason_out = "ABBA gain " + format_fixed(r.gain, 4) + (keep ? " >= " : " < ") + "1 + keep floor " + format_fixed(floor, 4) +
                  " (max(0.01, 2 x largest relative MAD " + format_fixed(r.max_relative_mad, 4) + "))";
  return keep;
}

// ---- knobs ----

int64_t knob_value(const RunnerSettings& s, const std::string& knob) {
  if (knob == "threads") return int64_t(s.threads);
  if (knob == "decode_batch") return s.decode_batch;
  throw Error(ErrorKind::kInternal, "", knob, "unknown tuning knob");
}

RunnerSettings with_knob(RunnerSettings s, const std::string& knob, int64_t value) {
  if (value < 1) throw Error(ErrorKind::kInternal, "", knob, "a knob value must be at least 1");
  if (knob == "threads")
    s.threads = unsigned(value);
  else if (knob == "decode_batch")
    s.decode_batch = value;
  else
    throw Error(ErrorKind::kInternal, "", knob, "unknown tuning knob");
  return s;
}

std::vector<KnobPlan> default_plans(const RunnerSettings& start, unsigned hardware_threads, int64_t concurrency,
                                    bool rows_independent) {
  std::vector<KnobPlan> plans;
  KnobPlan threads{"threads", {}};
  for (int64_t t = std::max<int64_t>(hardware_threads, 1); t >= 1; t /= 2) push_unique_value(threads.values, t);
  push_unique_value(threads.values, 1);
  plans.push_back(threads);
  if (rows_independent && concurrency > 1) {
    KnobPlan batch{"decode_batch", {}};
    push_unique_value(batch.values, concurrency);
    push_unique_value(batch.values, (concurrency + 1) / 2);
    push_unique_value(batch.values, 1);
    plans.push_back(batch);
  }
  (void)start;  // values equal to the start's are skipped by search_knobs
  return plans;
}

SearchOutcome search_knobs(const RunnerSettings& start, const std::vector<KnobPlan>& plans, double initial_gain,
                           std::optional<double> target_gain, int max_trials, const TrialCompare& compare,
                           const ProgressLog& log) {
  SearchOutcome out;
  out.best = start;
  out.estimated_gain = initial_gain;
  out.stop_reason = "all knob values tried";
  for (const KnobPlan& plan : plans)
    for (int64_t v : plan.values) {
      if (target_gain && out.estimated_gain >= *target_gain) {
        out.stop_reason = "target met";
        return out;
      }
      const int64_t from = knob_value(out.best, plan.knob);
      if (v == from) continue;
      if (int(out.trials.size()) >= max_trials) {
        out.stop_reason = "max_trials reached";
        return out;
      }
      TuningTrial t;
      t.knob = plan.knob;
      t.from = from;
      t.to = v;
      const RunnerSettings trial = with_knob(out.best, plan.knob, v);
      t.abba = compare(out.best, trial);
      t.kept = keep_trial(t.abba, &t.keep_floor, &t.reason);
      if (t.kept) {
        out.best = trial;
        out.estimated_gain *= t.abba.gain;
      }
      if (log) log("trial " + plan.knob + " " + std::to_string(from) + " -> " + std::to_string(v) + ": " + t.reason +
                   (t.kept ? ", kept" : ", dropped"));
      out.trials.push_back(std::move(t));
    }
  if (target_gain && out.estimated_gain >= *target_gain) out.stop_reason = "target met";
  return out;
}

// ---- optimize ----

TuningResult optimize_quantized(const std::filesystem::path& baseline_dir, const std::filesystem::path& quantized_dir,
                                const ThroughputSpec& spec, const TuningOptions& options, const ProgressLog& log) {
  if (options.target_gain && !(std::isfinite(*options.target_gain) && *options.target_gain > 0))
    throw Error(ErrorKind::kUsage, "", "--target-gain", "the target gain must be a positive number",
                "pass e.g. --target-gain 1.5");
  if (options.max_trials < 0)
    throw Error(ErrorKind::kUsage, "", "max_trials", "max_trials must not be negative", "use 8");
  check_limits(options.limits);
  ThroughputSpec base_spec = spec;
  if (!spec.server.empty()) {
    if (options.baseline_server.empty())
      throw Error(ErrorKind::kUsage, spec.server, "--server",
                  "the baseline model needs its own server (one server serves one model)",
                  "pass the baseline server's URL as TuningOptions::baseline_server");
    base_spec.server = options.baseline_server;
  }
  EngineCache cache;
  const std::unique_ptr<Workload> base = open_workload(baseline_dir, base_spec, {}, &cache);
  const std::unique_ptr<Workload> quant = open_workload(quantized_dir, spec, {}, &cache);
  TuningResult r;
  r.target_gain = options.target_gain;
  r.initial_settings = quant->settings();
  r.not_tunable = fixed_knobs(!quant->in_process(), quant->rows_independent());
  r.initial_abba = options.initial_abba ? *options.initial_abba
                                        : abba(*base, "baseline", *quant, "quantized", options.limits, log);
  std::vector<KnobPlan> plans;
  if (quant->in_process())
    plans = default_plans(r.initial_settings, std::max(1u, std::thread::hardware_concurrency()), spec.concurrency,
                          quant->rows_independent());
  const TrialCompare compare = [&](const RunnerSettings& best, const RunnerSettings& trial) {
    const std::unique_ptr<Workload> a = open_workload(quantized_dir, spec, best, &cache);
    const std::unique_ptr<Workload> b = open_workload(quantized_dir, spec, trial, &cache);
    return abba(*a, settings_label(best), *b, settings_label(trial), options.limits, log);
  };
  const SearchOutcome s = search_knobs(r.initial_settings, plans, r.initial_abba.gain, options.target_gain,
                                       options.max_trials, compare, log);
  r.trials = s.trials;
  r.stop_reason = plans.empty() ? "nothing tunable" : s.stop_reason;
  r.final_settings = s.best;
  if (r.final_settings == r.initial_settings) {
    r.final_abba = r.initial_abba;
  } else {
    const std::unique_ptr<Workload> tuned = open_workload(quantized_dir, spec, r.final_settings, &cache);
    r.final_abba = abba(*base, "baseline", *tuned, settings_label(r.final_settings), options.limits, log);
  }
  r.final_gain = r.final_abba.gain;
  r.target_met = options.target_gain && r.final_gain >= *options.target_gain;
  return r;
}

}  // namespace qloom::perf
