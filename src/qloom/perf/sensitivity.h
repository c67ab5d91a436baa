// MEASURED sensitivity of each search unit to each candidate precision — what
// qloom's search uses where quark-quant-perf weighs partitions with fixed
// numbers: for every (unit, precision) the KLD of the model's next-token
// distribution against the unquantized model when ONLY that unit drops to
// that precision (all else native), on the Reference's calibration windows
// (simulation.h: default 4 windows x 256 tokens of the calibration text),
// plus the fp8 KV cache as the pseudo-unit "kv_cache" when fp8 is a KV
// candidate. Reported per entry: kld_mean and its standard error (eval/kld.h,
// llama.cpp's formula), top-1 agreement, PPL ratio, scored tokens.
//
// A (unit, precision) whose Quark layout cannot hold one of the unit's
// weights (e.g. int4 with out_features % 8 != 0) is not measured: its entry
// has status "unfit" and the reason; the candidate enumeration drops configs
// using it. "native" is never stored (its sensitivity is 0 by definition;
// measure_unit can measure it, and gives exactly 0).
//
// Resume: pass the table of an interrupted run (from_json of what the
// progress callback persisted): entries it holds are kept, not re-measured.
// Its settings (granularity, dataset, windows, seq_len) must equal the
// current ones, else kUsage (a table measured on other windows is not
// comparable). Stop: when options.stop returns true (polled between windows)
// the run returns the entries measured so far with complete = false.
//
// Determinism: entries in a fixed order (units in plan order x precisions in
// candidate order, then kv_cache), values identical for any thread count;
// the JSON holds no timings, so equal inputs give byte-identical JSON.
// Errors: qloom::Error from calibration / loading / the simulation;
// from_json: kInvalidInput naming the JSON path. Thread-safety: the
// functions share no state; callbacks run on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/perf/partitions.h"
#include "qloom/perf/precision.h"
#include "qloom/perf/simulation.h"

namespace qloom::perf {

inline constexpr const char* kKvCacheUnit = "kv_cache";

struct SensitivityEntry {
  std::string unit;       // a SearchUnit name, or "kv_cache"
  std::string precision;  // a Precision name ("fp8" for kv_cache)
  std::string status = "measured";  // "measured" | "unfit"
  std::string reason;     // unfit: why ("model.layers.0.mlp.down_proj: ...")
  double kld_mean = 0, kld_stderr = 0;
  double top1 = 1;        // top-1 agreement with the base model (0..1)
  double ppl_ratio = 1;   // PPL(simulated) / PPL(base) on the windows
  int64_t tokens = 0;     // scored tokens
};

struct SensitivityTable {
  std::string granularity = "partition";
  std::string dataset;
  uint64_t windows = 0, seq_len = 0;
  std::vector<std::string> precisions;  // the non-native candidates, in order
  bool kv_fp8 = false;                  // kv_cache fp8 measured
  std::vector<SensitivityEntry> entries;
  bool complete = false;

  const SensitivityEntry* find(std::string_view unit, std::string_view precision) const;
  // kld_mean of a measured entry; 0 for "native"; Error(kInternal) when the
  // entry is absent or unfit (callers check fits() first).
  double kld(std::string_view unit, std::string_view precision) const;
  bool fits(std::string_view unit, std::string_view precision) const;
};

struct SensitivityProgress {
  size_t done = 0, total = 0;       // entries (measured + unfit + resumed) / all
  const SensitivityEntry* entry = nullptr;  // the entry just added
  const SensitivityTable* table = nullptr;  // everything so far (persist this)
  double seconds = 0;               // this run so far
};

struct SensitivityOptions {
  std::vector<Precision> precisions;  // candidates; native entries are skipped
  bool kv_fp8 = false;                // measure the fp8 KV cache
  unsigned threads = 0;
  StopFn stop;
  std::function<void(const SensitivityProgress&)> progress;
};

struct SensitivityRun {
  SensitivityTable table;
  size_t measured = 0;  // entries measured by this run (not resumed, not unfit)
  double seconds = 0;   // wall time of this run (not in the JSON)
};

SensitivityRun measure_sensitivity(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                                   const SensitivityOptions& options, const SensitivityTable* resume = nullptr);

// One entry: `unit` ("kv_cache" with precision "fp8", or a unit of the plan)
// alone at `precision` ("native" allowed). Unfit units give status "unfit".
// kUsage for an unknown unit.
SensitivityEntry measure_unit(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                              std::string_view unit, const Precision& precision, unsigned threads);

// Why `precision` cannot hold a weight of `unit` ("module: reason"), or "".
std::string unit_unfit_reason(const PartitionPlan& plan, const SearchUnit& unit, const Precision& precision);

nlohmann::ordered_json to_json(const SensitivityTable& table);
// Strict inverse; `where` names the JSON location for errors.
SensitivityTable sensitivity_from_json(const nlohmann::json& j,
                                       const std::string& where = "mix_precision_search.sensitivity");

}  // namespace qloom::perf
