// The mixed-precision search of a perf session (path mix_precision_search):
//   1. sensitivity   every (unit, precision) measured on calibration windows
//                    (perf/sensitivity.h); persisted entry by entry, so a
//                    resumed session measures only what is missing
//   2. queue         every combination, hierarchy-checked, ranked by modelled
//                    bytes per token (perf/candidates.h)
//   3. walk          quark-quant-perf's walk with the KLD proxy
//                    (perf/search_walk.h, perf/proxy.h) — a pure function of
//                    the persisted queue, one candidate per saved step
//   4. gate loop     the fastest proxy-passing candidate is exported
//                    (candidates/rank-R, perf/candidate_export.h) and judged
//                    by the real accuracy gate; a rejection moves to the next;
//                    the winner is renamed to quant_ckpt/
// --search-timeout (summed over invocations) stops the proxy phase with
// termination partial_timeout and gates the best proxy results so far.
#include <algorithm>
#include <chrono>

#include "qloom/core/error.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/candidate_export.h"
#include "qloom/perf/candidates.h"
#include "qloom/perf/gate_stage.h"
#include "qloom/perf/partitions.h"
#include "qloom/perf/precision.h"
#include "qloom/perf/proxy.h"
#include "qloom/perf/search_walk.h"
#include "qloom/perf/sensitivity.h"
#include "qloom/perf/session_ctx.h"
#include "qloom/perf/simulation.h"

namespace qloom::perf {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

struct Search {
  SessionCtx& ctx;
  io::ModelDir dir;
  PartitionPlan plan;
  std::vector<Precision> precisions;
  std::vector<std::string> kv;
  WalkOptions walk;
  std::shared_ptr<const Reference> ref;  // built on first use
  Clock::time_point started = Clock::now();
  double seconds_before = 0;             // search time of earlier invocations

  nlohmann::ordered_json& m() { return ctx.st()["mix_precision_search"]; }
  double elapsed() const { return seconds_before + std::chrono::duration<double>(Clock::now() - started).count(); }
  bool timed_out() const { return elapsed() >= ctx.spec.search_timeout; }
  const Reference& reference() {
    if (!ref) {
      WindowOptions w;
      w.dataset = ctx.spec.calib_dataset;
      w.threads = ctx.spec.threads;
      ref = Reference::build(dir, plan, w);
    }
    return *ref;
  }
  void save_elapsed() { m()["search_seconds"] = elapsed(); }
};

nlohmann::ordered_json search_config(const Search& s) {
  return {{"partitions", s.plan.partitions},
          {"precisions", s.ctx.spec.layer_precision_candidates},
          {"kv", s.kv},
          {"granularity", s.ctx.spec.granularity},
          {"max_search_candidates", s.ctx.spec.max_search_candidates},
          {"units", s.plan.units.size()},
          {"proxy", "mean KLD vs the base model on calibration windows; relative_change estimates the gate gap"}};
}

void init_block(Search& s) {
  if (s.m().is_object()) {
    s.seconds_before = s.m().value("search_seconds", 0.0);
    return;
  }
  s.m() = {{"status", "pending"},        {"config", search_config(s)}, {"sensitivity", nullptr},
           {"result", nullptr},          {"candidate_queue", nlohmann::ordered_json::array()},
           {"candidate_cursor", 0},      {"termination_reason", nullptr}, {"search_seconds", 0.0}};
  for (const auto& w : s.plan.warnings) s.ctx.store.warn("search: " + w);
  if (s.ctx.spec.search_gsm8k_num_samples)
    s.ctx.store.warn("--search-gsm8k-num-samples: qloom's search scores candidates with its KLD proxy, not gsm8k; "
                     "the real gate runs the task on the exported winner");
  s.ctx.store.save();
}

void sensitivity_phase(Search& s) {
  const auto& stored = s.m()["sensitivity"];
  if (stored.is_object() && stored["complete"].get<bool>()) return;
  std::optional<SensitivityTable> resume;
  if (stored.is_object()) resume = sensitivity_from_json(stored);
  s.ctx.timed("sensitivity", [&] {
    SensitivityOptions o;
    o.precisions = s.precisions;
    o.kv_fp8 = std::find(s.kv.begin(), s.kv.end(), "fp8") != s.kv.end();
    o.threads = s.ctx.spec.threads;
    o.stop = [&] { return s.timed_out(); };
    o.progress = [&](const SensitivityProgress& p) {
      s.m()["sensitivity"] = to_json(*p.table);
      s.save_elapsed();
      s.ctx.store.save();
      s.ctx.detail("sensitivity " + std::to_string(p.done) + "/" + std::to_string(p.total) + ": " + p.entry->unit +
                   " at " + p.entry->precision +
                   (p.entry->status == "unfit" ? " unfit (" + p.entry->reason + ")"
                                               : " KLD " + std::to_string(p.entry->kld_mean)));
    };
    SensitivityRun run = measure_sensitivity(s.dir, s.plan, s.reference(), o, resume ? &*resume : nullptr);
    s.m()["sensitivity"] = to_json(run.table);
    s.save_elapsed();
  });
}

void queue_phase(Search& s) {
  if (!s.m()["candidate_queue"].empty()) return;
  s.ctx.timed("enumerate", [&] {
    EnumerationOptions o;
    o.precisions = s.precisions;
    o.kv = s.kv;
    o.bytes = {s.ctx.spec.isl, s.ctx.spec.osl, s.ctx.spec.bench_concurrency};
    Enumeration e = enumerate_candidates(s.plan, sensitivity_from_json(s.m()["sensitivity"]), o);
    s.m()["candidate_queue"] = to_json(e.queue);
    s.m()["enumeration"] = {{"combinations", e.combinations},
                            {"dropped_hierarchy", e.dropped_hierarchy},
                            {"dropped_unfit", e.dropped_unfit},
                            {"dropped_nothing_quantized", e.dropped_nothing_quantized},
                            {"layer_variants", e.layer_variants},
                            {"baseline_bytes_per_token", e.baseline_bytes_per_token}};
    s.m()["status"] = "running";
  });
  s.ctx.say("search queue: " + std::to_string(s.m()["candidate_queue"].size()) + " candidates");
}

void proxy_one(Search& s, std::vector<CandidateEntry>& q, size_t i) {
  const std::string step = "proxy rank-" + std::to_string(q[i].rank);
  s.ctx.timed(step, [&] {
    ProxyScore score = score_candidate(s.dir, s.plan, s.reference(), q[i].config, s.ctx.spec.threads);
    apply_proxy(q[i], score, s.ctx.spec.eval_task);
    s.m()["candidate_queue"] = to_json(q);
    s.m()["candidate_cursor"] = i;
    s.save_elapsed();
  });
  const size_t total = s.walk.max_search_candidates ? std::min<size_t>(s.walk.max_search_candidates, q.size())
                                                    : q.size();
  double best = 1e300;
  for (const auto& c : q)
    if (c.relative_change) best = std::min(best, *c.relative_change);
  s.ctx.store.progress({{"best_so_far", {{"accuracy_gap", best}, {"perf_gain", nullptr}}}});
  s.ctx.detail("mixed-precision search (" + std::to_string(proxied_count(q)) + "/" + std::to_string(total) +
               " candidates evaluated): rank " + std::to_string(q[i].rank) + " " + q[i].config.canonical() +
               " estimated gap " + std::to_string(*q[i].relative_change));
}

fs::path candidate_dir(const Search& s, const CandidateEntry& c) {
  return s.ctx.dir() / "candidates" / ("rank-" + std::to_string(c.rank));
}

void export_one(Search& s, std::vector<CandidateEntry>& q, size_t i) {
  s.ctx.timed("export rank-" + std::to_string(q[i].rank), [&] {
    ExportSettings e;
    e.output_dir = candidate_dir(s, q[i]);
    e.dataset = s.ctx.spec.calib_dataset;
    e.num_calib_data = uint64_t(s.ctx.spec.num_calib_data);
    e.seq_len = uint64_t(s.ctx.spec.calib_seqlen);
    e.exclude_layers = s.ctx.spec.exclude_layers;
    e.threads = s.ctx.spec.threads;
    e.overwrite = true;  // a directory the state does not record is redone
    job::quantize_model(export_options(s.dir, s.plan, q[i].config, e));
    q[i].status = kStatusExported;
    s.m()["candidate_queue"] = to_json(q);
  });
}

// The winner becomes quant_ckpt/ (renamed: a kill leaves either the candidate
// directory or quant_ckpt, and an unrecorded one is redone).
void accept(Search& s, std::vector<CandidateEntry>& q, size_t i, const nlohmann::ordered_json& v) {
  const fs::path ckpt = s.ctx.dir() / "quant_ckpt";
  std::error_code ec;
  fs::remove_all(ckpt, ec);
  fs::rename(candidate_dir(s, q[i]), ckpt);
  auto& st = s.ctx.st();
  st["quant_ckpt_dir"] = ckpt.string();
  st["best_candidate"] = {{"config", to_json(q[i].config)},
                          {"rank", q[i].rank},
                          {"bits_per_weight", q[i].search_metrics.bits_per_weight},
                          {"modelled_gain", q[i].search_metrics.modelled_gain}};
  st["accuracy_validation"] = v;
  st["accuracy_validation"]["checkpoint"] = ckpt.string();  // where the gated checkpoint now lives
}

// Exports (when needed) and gates queue[i]; true when accepted.
bool gate_one(Search& s, std::vector<CandidateEntry>& q, size_t i) {
  s.ctx.set_stage("land", "real accuracy gate on rank " + std::to_string(q[i].rank) + " " + q[i].config.canonical());
  if (q[i].status == kStatusPending || !fs::is_directory(candidate_dir(s, q[i]))) export_one(s, q, i);
  bool passed = false;
  gate_checkpoint(s.ctx, candidate_dir(s, q[i]), q[i].rank, [&](const nlohmann::ordered_json& v) {
    passed = v["passed"].get<bool>();
    q[i].real_gate = v;
    q[i].status = passed ? kStatusAccepted : kStatusRejected;
    if (passed) accept(s, q, i, v);
    s.m()["candidate_queue"] = to_json(q);
    s.save_elapsed();
  });
  if (!passed) {
    std::error_code ec;
    fs::remove_all(candidate_dir(s, q[i]), ec);  // a rejected checkpoint is evidence only in state.json
  }
  return passed;
}

void finish_search(Search& s, std::vector<CandidateEntry>& q, const std::string& status,
                   const std::string& termination) {
  std::optional<size_t> winner;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i].status == kStatusAccepted) winner = i;
    // Candidates the real gate never judged end "skipped" (their proxy
    // scores, if any, stay in search_metrics / relative_change).
    if (q[i].status == kStatusPending) q[i].status = kStatusSkipped;
  }
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const auto& c : q)
    if (c.proxied() || !c.real_gate.is_null()) all.push_back(to_json(c));
  const auto& base = s.ctx.st()["baseline_reference"];
  s.m()["candidate_queue"] = to_json(q);
  s.m()["status"] = status;
  s.m()["termination_reason"] = termination;
  s.m()["result"] = {{"best_config", winner ? to_json(q[*winner].config) : nlohmann::ordered_json(nullptr)},
                     {"all_results", all},
                     {"baseline_metrics", {{"metric", base["metric"]}, {"score", base["score"]},
                                           {"stderr", base["stderr"]}, {"n", base["n"]}}},
                     {"total_configs_evaluated", proxied_count(q)},
                     {"total_configs_available", q.size()},
                     {"search_time_seconds", s.elapsed()},
                     {"granularity", s.ctx.spec.granularity}};
  s.save_elapsed();
  s.ctx.store.save();
}

// Gates the proxy-passing candidates only (after --search-timeout).
bool salvage(Search& s, std::vector<CandidateEntry>& q) {
  for (size_t i : gate_order(q, s.walk))
    if (q[i].status == kStatusPending || q[i].status == kStatusExported)
      if (gate_one(s, q, i)) return true;
  return false;
}

void walk_phase(Search& s) {
  std::vector<CandidateEntry> q = candidate_queue_from_json(s.m()["candidate_queue"]);
  for (;;) {
    const WalkStep step = next_step(q, s.walk);
    if (step.kind == WalkStep::Kind::kProxy && s.timed_out()) {
      const bool won = salvage(s, q);
      finish_search(s, q, "partial_timeout", "partial_timeout");
      if (!won) s.ctx.terminate("failed", "accuracy_failed", "--search-timeout reached with no candidate passing the gate");
      return;
    }
    switch (step.kind) {
      case WalkStep::Kind::kProxy: proxy_one(s, q, step.index); break;
      case WalkStep::Kind::kGate: gate_one(s, q, step.index); break;
      case WalkStep::Kind::kAccepted: finish_search(s, q, "completed", "completed"); return;
      case WalkStep::Kind::kExhausted:
        finish_search(s, q, "exhausted", kTerminationExhausted);
        s.ctx.terminate("failed", "accuracy_failed",
                        std::string(kTerminationExhausted) + ": no candidate passed both the proxy and the real gate");
        return;
    }
  }
}

}  // namespace

void mixed_precision_search_step(SessionCtx& ctx) {
  auto& st = ctx.st();
  if (st["mix_precision_search"].is_object() && st["mix_precision_search"]["result"].is_object()) return;
  ctx.set_stage("quantize", "mixed-precision search");
  Search s{ctx, io::ModelDir::open(ctx.spec.model), {}, {}, {}, {}, nullptr};
  s.plan = plan_partitions(s.dir, {parse_granularity(ctx.spec.granularity), ctx.spec.exclude_layers});
  s.precisions = parse_precision_candidates(ctx.spec.layer_precision_candidates);
  s.kv = ctx.spec.kv_cache_scheme == "fp8" ? std::vector<std::string>{"fp8"}
                                           : parse_kv_candidates(ctx.spec.kv_cache_precision_candidates);
  s.walk = {ctx.spec.accuracy_gap, ctx.spec.eval_task, uint64_t(ctx.spec.max_search_candidates)};
  init_block(s);
  sensitivity_phase(s);
  if (!s.m()["sensitivity"]["complete"].get<bool>()) {  // --search-timeout during the measurement
    std::vector<CandidateEntry> none;
    finish_search(s, none, "partial_timeout", "partial_timeout");
    ctx.terminate("failed", "accuracy_failed", "--search-timeout reached while measuring sensitivity");
    return;
  }
  queue_phase(s);
  walk_phase(s);
}

}  // namespace qloom::perf
