#include "qloom/perf/proxy.h"

#include <algorithm>

#include "qloom/core/error.h"
#include "qloom/perf/search_walk.h"

namespace qloom::perf {
namespace {

void check_config(const PartitionPlan& plan, const CandidateConfig& c) {
  for (const auto& [partition, prec] : c.partitions) {
    if (std::find(plan.partitions.begin(), plan.partitions.end(), partition) == plan.partitions.end())
      throw Error(ErrorKind::kUsage, "", "config." + partition, "the model has no such partition to search", "");
    (void)get_precision(prec, "config." + partition);
  }
  for (const std::string& p : plan.partitions)
    if (c.precision_of(p).empty())
      throw Error(ErrorKind::kUsage, "", "config." + p, "the config gives this partition no precision", "");
  for (const auto& [unit, prec] : c.layers) {
    if (!plan.find_unit(unit))
      throw Error(ErrorKind::kUsage, "", "config.layers." + unit, "no such unit in the partition plan",
                  "layer overrides need --granularity layer");
    (void)get_precision(prec, "config.layers." + unit);
  }
  if (c.kv_cache != kNative && c.kv_cache != "fp8")
    throw Error(ErrorKind::kUsage, "", "config.kv_cache", "unknown KV-cache precision '" + c.kv_cache + "'",
                "native or fp8");
}

}  // namespace

Assignment assignment_of(const PartitionPlan& plan, const CandidateConfig& config) {
  check_config(plan, config);
  Assignment a;
  for (const SearchUnit& u : plan.units) {
    const Precision& p = get_precision(config.precision_of(u), "config");
    if (p.is_native()) continue;
    for (const UnitModule& m : u.modules) a.modules[m.module] = &p;
  }
  a.kv_fp8 = config.kv_cache == "fp8";
  return a;
}

ProxyScore score_candidate(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                           const CandidateConfig& config, unsigned threads, const StopFn& stop) {
  const SimulationResult r = simulate(dir, plan, ref, assignment_of(plan, config), threads, stop);
  ProxyScore s;
  s.kld = r.summary.kld_mean;
  s.kld_stderr = r.summary.kld_mean_stderr;
  s.top1 = r.summary.top1_agreement;
  s.ppl_ratio = r.summary.ppl_ratio;
  s.ppl_ratio_stderr = r.summary.ppl_ratio_stderr;
  s.tokens = r.summary.count;
  s.seconds = r.seconds;
  s.stopped = r.stopped;
  return s;
}

void apply_proxy(CandidateEntry& e, const ProxyScore& s, std::string_view eval_task) {
  if (s.stopped)
    throw Error(ErrorKind::kUsage, "", "proxy", "the proxy score was interrupted before every window ran",
                "score the candidate again");
  e.search_metrics.proxy_kld = s.kld;
  e.search_metrics.proxy_kld_stderr = s.kld_stderr;
  e.search_metrics.proxy_top1 = s.top1;
  e.search_metrics.proxy_ppl_ratio = s.ppl_ratio;
  e.search_metrics.proxy_seconds = s.seconds;
  e.relative_change = relative_change(eval_task, s.kld, s.ppl_ratio);
}

}  // namespace qloom::perf
