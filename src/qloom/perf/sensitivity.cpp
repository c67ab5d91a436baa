#include "qloom/perf/sensitivity.h"

#include <chrono>
#include <optional>

#include "qloom/core/error.h"
#include "qloom/perf/search_json.h"

namespace qloom::perf {
namespace {

using Clock = std::chrono::steady_clock;

// The (unit, precision) pairs a run covers, in table order.
std::vector<std::pair<std::string, const Precision*>> planned_entries(const PartitionPlan& plan,
                                                                      const SensitivityOptions& o) {
  std::vector<std::pair<std::string, const Precision*>> out;
  for (const SearchUnit& u : plan.units)
    for (const Precision& p : o.precisions)
      if (!p.is_native()) out.emplace_back(u.name, &p);
  if (o.kv_fp8) out.emplace_back(kKvCacheUnit, &get_precision("fp8"));
  return out;
}

SensitivityTable empty_table(const PartitionPlan& plan, const Reference& ref, const SensitivityOptions& o) {
  SensitivityTable t;
  t.granularity = granularity_name(plan.granularity);
  t.dataset = ref.options().dataset;
  t.windows = ref.options().windows;
  t.seq_len = ref.options().seq_len;
  for (const Precision& p : o.precisions)
    if (!p.is_native()) t.precisions.push_back(p.name);
  t.kv_fp8 = o.kv_fp8;
  return t;
}

void check_resumable(const SensitivityTable& have, const SensitivityTable& want) {
  auto differ = [](const char* what, const std::string& a, const std::string& b) {
    throw Error(ErrorKind::kUsage, "", std::string("mix_precision_search.sensitivity.") + what,
                std::string("the stored sensitivity table was measured with ") + what + " " + a + ", this run uses " + b,
                "resume with the same settings, or drop the stored table to measure again");
  };
  if (have.granularity != want.granularity) differ("granularity", have.granularity, want.granularity);
  if (have.dataset != want.dataset) differ("dataset", "'" + have.dataset + "'", "'" + want.dataset + "'");
  if (have.windows != want.windows) differ("windows", std::to_string(have.windows), std::to_string(want.windows));
  if (have.seq_len != want.seq_len) differ("seq_len", std::to_string(have.seq_len), std::to_string(want.seq_len));
}

Assignment unit_assignment(const SearchUnit& u, const Precision& p) {
  Assignment a;
  for (const UnitModule& m : u.modules) a.modules[m.module] = &p;
  return a;
}

// Measures one entry; nullopt when `stop` interrupted it.
std::optional<SensitivityEntry> measure_entry(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                                              std::string_view unit, const Precision& p, unsigned threads,
                                              const StopFn& stop) {
  SensitivityEntry e;
  e.unit = unit;
  e.precision = p.name;
  Assignment a;
  if (unit == kKvCacheUnit) {
    if (p.name != "fp8" && !p.is_native())
      throw Error(ErrorKind::kUsage, "", std::string(unit), "the KV cache can only be measured at fp8", "");
    a.kv_fp8 = !p.is_native();
  } else {
    const SearchUnit* u = plan.find_unit(unit);
    if (!u) throw Error(ErrorKind::kUsage, "", std::string(unit), "no such search unit in the partition plan", "");
    e.reason = unit_unfit_reason(plan, *u, p);
    if (!e.reason.empty()) {
      e.status = "unfit";
      return e;
    }
    a = unit_assignment(*u, p);
  }
  const SimulationResult r = simulate(dir, plan, ref, a, threads, stop);
  if (r.stopped) return std::nullopt;
  e.kld_mean = r.summary.kld_mean;
  e.kld_stderr = r.summary.kld_mean_stderr;
  e.top1 = r.summary.top1_agreement;
  e.ppl_ratio = r.summary.ppl_ratio;
  e.tokens = r.summary.count;
  return e;
}

}  // namespace

const SensitivityEntry* SensitivityTable::find(std::string_view unit, std::string_view precision) const {
  for (const SensitivityEntry& e : entries)
    if (e.unit == unit && e.precision == precision) return &e;
  return nullptr;
}

bool SensitivityTable::fits(std::string_view unit, std::string_view precision) const {
  if (precision == kNative) return true;
  const SensitivityEntry* e = find(unit, precision);
  return e && e->status == "measured";
}

double SensitivityTable::kld(std::string_view unit, std::string_view precision) const {
  if (precision == kNative) return 0.0;
  const SensitivityEntry* e = find(unit, precision);
  if (!e || e->status != "measured")
    throw Error(ErrorKind::kInternal, "", std::string(unit) + "@" + std::string(precision),
                e ? "the precision cannot hold this unit (" + e->reason + ")" : "no sensitivity measured for this pair",
                "measure the sensitivity table for every candidate precision first");
  return e->kld_mean;
}

std::string unit_unfit_reason(const PartitionPlan& plan, const SearchUnit& unit, const Precision& precision) {
  for (const UnitModule& m : unit.modules) {
    const std::string why = unfit_reason(precision, m.rows, m.cols, plan.geometry.model_dtype);
    if (!why.empty()) return m.module + ": " + why;
  }
  return {};
}

SensitivityEntry measure_unit(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                              std::string_view unit, const Precision& precision, unsigned threads) {
  return *measure_entry(dir, plan, ref, unit, precision, threads, {});
}

SensitivityRun measure_sensitivity(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                                   const SensitivityOptions& options, const SensitivityTable* resume) {
  const auto t0 = Clock::now();
  SensitivityRun run;
  run.table = empty_table(plan, ref, options);
  if (resume) check_resumable(*resume, run.table);
  const auto planned = planned_entries(plan, options);
  bool stopped = false;
  for (const auto& [unit, p] : planned) {
    std::optional<SensitivityEntry> e;
    if (const SensitivityEntry* old = resume ? resume->find(unit, p->name) : nullptr) {
      e = *old;
    } else if (!stopped && !(options.stop && options.stop())) {
      e = measure_entry(dir, plan, ref, unit, *p, options.threads, options.stop);
      if (e && e->status == "measured") ++run.measured;
    }
    if (!e) {
      stopped = true;
      continue;  // resumed entries after the stop point are still kept
    }
    run.table.entries.push_back(std::move(*e));
    if (options.progress) {
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      options.progress({run.table.entries.size(), planned.size(), &run.table.entries.back(), &run.table, s});
    }
  }
  run.table.complete = run.table.entries.size() == planned.size();
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return run;
}

nlohmann::ordered_json to_json(const SensitivityTable& t) {
  nlohmann::ordered_json j;
  j["granularity"] = t.granularity;
  j["dataset"] = t.dataset;
  j["windows"] = t.windows;
  j["seq_len"] = t.seq_len;
  j["precisions"] = t.precisions;
  j["kv_fp8"] = t.kv_fp8;
  j["complete"] = t.complete;
  j["entries"] = nlohmann::ordered_json::array();
  for (const SensitivityEntry& e : t.entries) {
    nlohmann::ordered_json x;
    x["unit"] = e.unit;
    x["precision"] = e.precision;
    x["status"] = e.status;
    if (e.status == "measured") {
      x["kld_mean"] = e.kld_mean;
      x["kld_stderr"] = e.kld_stderr;
      x["top1"] = e.top1;
      x["ppl_ratio"] = e.ppl_ratio;
      x["tokens"] = e.tokens;
    } else {
      x["reason"] = e.reason;
    }
    j["entries"].push_back(std::move(x));
  }
  return j;
}

SensitivityTable sensitivity_from_json(const nlohmann::json& j, const std::string& where) {
  using namespace detail;
  SensitivityTable t;
  t.granularity = get_string(j, where, "granularity");
  if (t.granularity != "partition" && t.granularity != "layer")
    bad_field(where + ".granularity", "expected \"partition\" or \"layer\", got '" + t.granularity + "'");
  t.dataset = get_string(j, where, "dataset");
  t.windows = uint64_t(get_int(j, where, "windows"));
  t.seq_len = uint64_t(get_int(j, where, "seq_len"));
  const nlohmann::json& precisions = field(j, where, "precisions");
  require_array(precisions, where + ".precisions");
  for (const auto& p : precisions) {
    if (!p.is_string()) bad_field(where + ".precisions", "expected an array of strings");
    t.precisions.push_back(p.get<std::string>());
  }
  t.kv_fp8 = get_bool(j, where, "kv_fp8");
  t.complete = get_bool(j, where, "complete");
  const nlohmann::json& entries = field(j, where, "entries");
  require_array(entries, where + ".entries");
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string at = where + ".entries[" + std::to_string(i) + "]";
    SensitivityEntry e;
    e.unit = get_string(entries[i], at, "unit");
    e.precision = get_string(entries[i], at, "precision");
    e.status = get_string(entries[i], at, "status");
    if (e.status == "measured") {
      e.kld_mean = get_number(entries[i], at, "kld_mean");
      e.kld_stderr = get_number(entries[i], at, "kld_stderr");
      e.top1 = get_number(entries[i], at, "top1");
      e.ppl_ratio = get_number(entries[i], at, "ppl_ratio");
      e.tokens = get_int(entries[i], at, "tokens");
    } else if (e.status == "unfit") {
      e.reason = get_string(entries[i], at, "reason");
    } else {
      bad_field(at + ".status", "expected \"measured\" or \"unfit\", got '" + e.status + "'");
    }
    t.entries.push_back(std::move(e));
  }
  return t;
}

}  // namespace qloom::perf
