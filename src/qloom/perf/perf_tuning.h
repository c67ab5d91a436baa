// qloom perf — optimize (issue 13 item 7): when the quantized model's
// throughput gain is below the target, tune what qloom owns and keep a
// change only when an ABBA comparison proves it.
//
// Knobs (in-process runner, throughput.h RunnerSettings), tried in this
// order, one value at a time against the best settings so far:
//   threads       compute threads: hardware, hardware/2, ... 1 (the engine
//                 is reloaded per thread count; EngineCache keeps each copy)
//   decode_batch  sequences per forward_batch pass: concurrency, halves of
//                 it, 1 (not tunable when the runtime's hooks mix rows)
// Not tunable here, and reported as such (TuningResult::not_tunable):
//   kernel        linear() picks its path per shape class inside the engine
//                 (gemm_dispatch.h, kAuto = qloom's AVX-512 / AVX2 kernels;
//                 OpenBLAS is never picked) and the ISA cap QLOOM_MAX_ISA is
//                 read once per process (core/convert.h best_isa), so neither
//                 can change between runs of one process.
//   tile_sizes    the packed GEMM's tiles are compile-time constants.
//   (server)      with --server the server owns threads and batching; every
//                 runner knob is reported not tunable.
//
// A trial is abba(A = best settings, B = trial settings) on the quantized
// model; it is kept iff its gain >= 1 + floor, floor = max(0.01, 2 x the
// largest relative MAD of its four legs). Trials stop once the estimated
// gain (the starting ABBA gain times every kept trial's gain) reaches the
// target, after max_trials, or when every value was tried. The final figure
// is a fresh ABBA of the baseline (starting settings) against the quantized
// model with the final settings (the starting ABBA when nothing was kept).
//
// Errors: what throughput.h throws; kUsage for a non-positive target,
// max_trials < 0, or a server spec without options.baseline_server. Not thread-safe (one tuning run at a time).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/perf/throughput.h"

namespace qloom::perf {

struct TuningTrial {
  std::string knob;        // "threads" | "decode_batch"
  int64_t from = 0, to = 0;
  AbbaResult abba;         // A = from, B = to
  double keep_floor = 0;   // max(0.01, 2 x abba.max_relative_mad)
  bool kept = false;
  std::string reason;
  // {knob, from, to, abba, keep_floor, kept, reason}
  nlohmann::ordered_json to_json() const;
  static TuningTrial from_json(const nlohmann::ordered_json& j, const std::string& where);
};

struct KnobNote {
  std::string knob, reason;
};

struct TuningResult {
  std::optional<double> target_gain;  // none: tune every knob
  RunnerSettings initial_settings, final_settings;
  AbbaResult initial_abba;  // baseline vs quantized, initial settings
  std::vector<TuningTrial> trials;
  AbbaResult final_abba;    // baseline (initial settings) vs quantized (final settings)
  double final_gain = 0;
  bool target_met = false;
  std::string stop_reason;  // "target met" | "all knob values tried" | "max_trials reached" | ...
  std::vector<KnobNote> not_tunable;
  // {target_gain, initial_settings, final_settings, initial_abba, trials,
  // final_abba, final_gain, target_met, stop_reason, not_tunable: [{knob, reason}]}
  nlohmann::ordered_json to_json() const;
};

// The KEEP rule.
double keep_floor(double max_relative_mad);
bool keep_trial(const AbbaResult& r, double* floor_out = nullptr, std::string* reason_out = nullptr);

// One knob and the values to try, in order.
struct KnobPlan {
  std::string knob;
  std::vector<int64_t> values;
};
int64_t knob_value(const RunnerSettings& s, const std::string& knob);
RunnerSettings with_knob(RunnerSettings s, const std::string& knob, int64_t value);

// The values tried for each knob from `start` (resolved settings), given
// the hardware threads and the spec's concurrency.
std::vector<KnobPlan> default_plans(const RunnerSettings& start, unsigned hardware_threads, int64_t concurrency,
                                    bool rows_independent);

// The search without any model: `compare(best, trial)` runs the ABBA.
using TrialCompare = std::function<AbbaResult(const RunnerSettings& best, const RunnerSettings& trial)>;
struct SearchOutcome {
  RunnerSettings best;
  std::vector<TuningTrial> trials;
  std::string stop_reason;
  double estimated_gain = 0;
};
SearchOutcome search_knobs(const RunnerSettings& start, const std::vector<KnobPlan>& plans, double initial_gain,
                           std::optional<double> target_gain, int max_trials, const TrialCompare& compare,
                           const ProgressLog& log = {});

struct TuningOptions {
  std::optional<double> target_gain;
  int max_trials = 8;
  ProtocolLimits limits;
  // With spec.server (the quantized model's server): the baseline model's
  // server, required (kUsage, --server) since one server serves one model.
  std::string baseline_server;
  // The baseline-vs-quantized ABBA at the default settings when the caller
  // measured it already with the same spec and limits (perf's measure step):
  // used as initial_abba instead of measuring it again.
  std::optional<AbbaResult> initial_abba;
};

TuningResult optimize_quantized(const std::filesystem::path& baseline_dir, const std::filesystem::path& quantized_dir,
                                const ThroughputSpec& spec, const TuningOptions& options,
                                const ProgressLog& log = {});

}  // namespace qloom::perf
