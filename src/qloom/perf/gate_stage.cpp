// Baseline health and the real accuracy gate of a perf session.
//   baseline: the base model on the gate metric (baseline_health.h), cached
//     per runtime fingerprint under $QLOOM_CACHE_DIR/perf-baselines (default
//     ~/.cache/qloom/perf-baselines); its files in evaluation/baseline/attempt-1.
//   gate: the exported checkpoint on the same samples
//     (evaluation/quantized/attempt-N, N = the attempt's number), paired with
//     the baseline (accuracy_gate.h); every attempt is appended to
//     accuracy_attempts with its candidate's rank.
#include "qloom/perf/gate_stage.h"

#include <cstdlib>

#include "qloom/core/error.h"
#include "qloom/perf/accuracy_gate.h"
#include "qloom/perf/baseline_health.h"
#include "qloom/perf/session_ctx.h"

namespace qloom::perf {
namespace fs = std::filesystem;

namespace {

fs::path baseline_cache_dir() {
  if (const char* d = std::getenv("QLOOM_CACHE_DIR"); d && *d) return fs::path(d) / "perf-baselines";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "qloom" / "perf-baselines";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "qloom" / "perf-baselines";
  return fs::temp_directory_path() / "qloom-perf-baselines";
}

fs::path baseline_dir(const SessionCtx& ctx) { return ctx.dir() / "evaluation" / "baseline" / "attempt-1"; }

}  // namespace

GateSpec gate_spec(const RunSpec& spec) {
  GateSpec g;
  g.task = spec.eval_task;
  g.dataset = spec.eval_dataset;
  const bool gsm8k = spec.eval_task.rfind("gsm8k", 0) == 0;
  g.limit = gsm8k ? spec.gsm8k_num_samples : spec.eval_limit.value_or(0);
  g.threads = spec.threads;
  g.tokenizer_dir = spec.base_model;  // both sides score the same tokens
  if (spec.eval_task == "kld") g.reference_dir = spec.base_model;
  return g;
}

void baseline_health_step(SessionCtx& ctx, bool recheck) {
  auto& s = ctx.st();
  if (s["baseline_reference"].is_object() && !recheck) {
    if (!s["baseline_reference"]["healthy"].get<bool>())
      ctx.terminate("base_unhealthy", "base_unhealthy", s["baseline_reference"]["reason"].get<std::string>());
    return;
  }
  ctx.set_stage("quantize", "baseline health: the base model on " + ctx.spec.eval_task);
  ctx.timed("baseline_health", [&] {
    BaselineHealth h = check_baseline(ctx.spec.base_model, gate_spec(ctx.spec), ctx.spec.baseline_floor,
                                      baseline_cache_dir(), recheck, baseline_dir(ctx), ctx.log);
    s["baseline_reference"] = to_json(h);
    ctx.store.save();
  });
  const auto& b = s["baseline_reference"];
  ctx.say("baseline " + b["metric"].get<std::string>() + " = " + b["score"].dump() +
          (b["cached"].get<bool>() ? " (cached)" : ""));
  if (!b["healthy"].get<bool>()) ctx.terminate("base_unhealthy", "base_unhealthy", b["reason"].get<std::string>());
}

nlohmann::ordered_json gate_checkpoint(SessionCtx& ctx, const fs::path& checkpoint, int64_t rank,
                                       const std::function<void(const nlohmann::ordered_json&)>& on_result) {
  auto& s = ctx.st();
  const int64_t attempt = int64_t(s["accuracy_attempts"].size()) + 1;
  const fs::path out = ctx.dir() / "evaluation" / "quantized" / ("attempt-" + std::to_string(attempt));
  ctx.detail("accuracy gate attempt " + std::to_string(attempt) + " on " + checkpoint.filename().string());
  nlohmann::ordered_json v;
  ctx.timed("accuracy_gate attempt-" + std::to_string(attempt), [&] {
    TaskScore base = load_task_score(baseline_dir(ctx));
    TaskScore quant = score_task(checkpoint, gate_spec(ctx.spec), out, ctx.log);
    v = to_json(gate(base, quant, ctx.spec.accuracy_gap));
    v["attempt"] = attempt;
    v["candidate_rank"] = rank;
    v["checkpoint"] = checkpoint.string();
    s["accuracy_attempts"].push_back(v);
    on_result(v);
  });
  ctx.say("gate attempt " + std::to_string(attempt) + ": gap " + v["gap"].dump() + " +/- " + v["stderr"].dump() +
          " (n " + v["n"].dump() + ") vs " + std::to_string(ctx.spec.accuracy_gap) + ": " +
          (v["passed"].get<bool>() ? "pass" : "fail"));
  return v;
}

void direct_gate_step(SessionCtx& ctx) {
  auto& s = ctx.st();
  if (s["accuracy_validation"].is_object()) return;
  ctx.set_stage("land", "real accuracy gate on the fixed recipe's checkpoint");
  nlohmann::ordered_json v = gate_checkpoint(ctx, s["quant_ckpt_dir"].get<std::string>(), 1,
                                             [&](const nlohmann::ordered_json& r) { s["accuracy_validation"] = r; });
  ctx.store.progress({{"best_so_far", {{"accuracy_gap", v["gap"]}, {"perf_gain", nullptr}}}});
  if (!v["passed"].get<bool>())
    ctx.terminate("failed", "accuracy_failed",
                  "accuracy gap " + v["gap"].dump() + " exceeds --accuracy-gap " + std::to_string(ctx.spec.accuracy_gap));
}

}  // namespace qloom::perf
