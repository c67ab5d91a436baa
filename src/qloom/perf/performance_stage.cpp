// perfopt: throughput of baseline and quantized (--performance-mode measure
// or optimize) in ABBA order, then, for optimize below --target-gain, the
// tuning trials (perf_tuning.h). Results go to performance_measurements
// (the four legs), performance_validation (gain, abba, trials) and
// performance_status; the terminal stage follows from them:
//   measure:  done / success once measured.
//   optimize: target met -> done / success; not met -> perf_failed /
//             perf_below_target.
//   a measurement that fails (server down, model that does not run) ->
//             failed / performance_failed, with the error recorded.
#include "qloom/core/error.h"
#include "qloom/perf/perf_tuning.h"
#include "qloom/perf/session_ctx.h"
#include "qloom/perf/throughput.h"

namespace qloom::perf {
namespace fs = std::filesystem;

namespace {

ThroughputSpec throughput_spec(const RunSpec& spec) {
  ThroughputSpec t;
  t.isl = spec.isl;
  t.osl = spec.osl;
  t.concurrency = spec.bench_concurrency;
  t.threads = spec.threads;
  t.server = spec.server;
  t.runtime = spec.runtime;
  return t;
}

ProtocolLimits limits_of(const nlohmann::ordered_json& validation) {
  ProtocolLimits l;
  l.timed_samples = validation["timed_samples"].get<int>();
  l.max_timed_samples = validation["max_timed_samples"].get<int>();
  l.stability_relative_mad = validation["stability_relative_mad"].get<double>();
  return l;
}

void record_abba(SessionCtx& ctx, const AbbaResult& r) {
  auto& s = ctx.st();
  s["performance_measurements"] = nlohmann::ordered_json::array();
  // The legs in ABBA order, with the role / order / figure the reports read.
  static const char* const kOrder[] = {"A1", "B1", "B2", "A2"};
  for (size_t i = 0; i < r.legs.size(); ++i) {
    nlohmann::ordered_json m = r.legs[i].to_json();
    m["role"] = (i == 0 || i == 3) ? "baseline" : "quantized";
    m["order"] = i < 4 ? kOrder[i] : "extra";
    m["tokens_per_s"] = r.legs[i].median_tokens_per_s;
    s["performance_measurements"].push_back(m);
  }
  nlohmann::ordered_json abba = r.to_json();
  abba.erase("legs");  // the legs are performance_measurements
  s["performance_validation"]["abba"] = abba;
  s["performance_validation"]["gain"] = r.gain;
  s["performance_status"] = "measured";
  ctx.store.save();
  ctx.store.progress({{"best_so_far", {{"accuracy_gap", s["accuracy_validation"].is_object()
                                                            ? s["accuracy_validation"]["gap"]
                                                            : nlohmann::ordered_json(nullptr)},
                                       {"perf_gain", r.gain}}}});
}

void measure(SessionCtx& ctx, const fs::path& quantized) {
  const ProtocolLimits limits = limits_of(ctx.st()["performance_validation"]);
  ctx.timed("throughput", [&] {
    AbbaResult r = abba(ctx.spec.base_model, quantized, throughput_spec(ctx.spec), limits,
                        [&](const std::string& line) { ctx.detail(line); });
    record_abba(ctx, r);
  });
  ctx.say("throughput gain " + std::to_string(ctx.st()["performance_validation"]["gain"].get<double>()) +
          " (ABBA, runtime " + ctx.st()["runtime_context"]["runtime"].get<std::string>() + ")");
}

void optimize(SessionCtx& ctx, const fs::path& quantized) {
  auto& v = ctx.st()["performance_validation"];
  if (v.contains("tuning")) return;  // done by an earlier invocation
  const ProtocolLimits limits = limits_of(v);
  ctx.timed("optimize", [&] {
    TuningOptions o;
    o.target_gain = ctx.spec.target_gain;
    o.limits = limits;
    const auto& a = v["abba"];  // the measure step's ABBA: the same spec, limits and default settings
    o.initial_abba = abba_of(a["a1"].get<double>(), a["b1"].get<double>(), a["b2"].get<double>(),
                             a["a2"].get<double>(), a["max_relative_mad"].get<double>(), a["stable"].get<bool>());
    o.initial_abba->a_label = "baseline";
    o.initial_abba->b_label = "quantized";
    TuningResult t = optimize_quantized(ctx.spec.base_model, quantized, throughput_spec(ctx.spec), o,
                                        [&](const std::string& line) { ctx.detail(line); });
    v["tuning"] = t.to_json();
    v["trials"] = v["tuning"]["trials"];
    v["gain"] = t.final_gain;
    ctx.store.save();
  });
}

}  // namespace

void performance_step(SessionCtx& ctx) {
  auto& s = ctx.st();
  if (ctx.spec.performance_mode == "off") {
    ctx.terminate("done", "success", "");
    return;
  }
  const fs::path quantized = s["quant_ckpt_dir"].get<std::string>();
  ctx.set_stage("perfopt", "throughput of baseline and quantized (" + ctx.spec.performance_mode + ")");
  try {
    if (s["performance_status"] == "pending") measure(ctx, quantized);
    if (ctx.spec.performance_mode == "optimize") {
      if (s["performance_validation"]["gain"].get<double>() < *ctx.spec.target_gain) optimize(ctx, quantized);
      const bool met = s["performance_validation"]["gain"].get<double>() >= *ctx.spec.target_gain;
      s["performance_status"] = met ? "target_met" : "target_not_met";
      ctx.store.save();
      if (!met) {
        ctx.terminate("perf_failed", "perf_below_target",
                      "throughput gain " + s["performance_validation"]["gain"].dump() + " below the target " +
                          std::to_string(*ctx.spec.target_gain));
        return;
      }
    }
  } catch (const Error& e) {
    s["performance_status"] = "measurement_failed";
    ctx.store.save();
    ctx.terminate("failed", "performance_failed", std::string("throughput measurement failed: ") + e.what());
    return;
  }
  ctx.terminate("done", "success", "");
}

}  // namespace qloom::perf
