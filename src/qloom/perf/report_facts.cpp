#include "qloom/perf/report_facts.h"

#include <algorithm>
#include <cmath>

#include "qloom/agent/artifact_schema.h"
#include "qloom/core/error.h"
#include "qloom/perf/report_facts_internal.h"
#include "qloom/perf/report_format.h"
#include "qloom/perf/report_json.h"

namespace qloom::perf {
namespace detail {
namespace {

using Json = nlohmann::ordered_json;

// Geometric mean of positive values; sqrt for two (correctly rounded, so the
// bytes do not depend on the libm).
double geomean(const std::vector<double>& v) {
  double p = 1;
  for (double x : v) p *= x;
  if (v.size() == 1) return p;
  if (v.size() == 2) return std::sqrt(p);
  return std::pow(p, 1.0 / double(v.size()));
}

void push_unique(Json& list, const std::string& s) {
  if (std::find(list.begin(), list.end(), Json(s)) == list.end()) list.push_back(s);
}

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

}  // namespace

Json performance_facts(const Field& state) {
  const Field spec = state["run_spec"];
  Json p;
  p["mode"] = spec["performance_mode"].one_of({"off", "measure", "optimize"});
  p["status"] = state["performance_status"].one_of(
      {"not_requested", "pending", "measured", "target_met", "target_not_met", "measurement_failed"});
  const Field ms = state["performance_measurements"];
  std::vector<double> tps[2];
  Json runtimes = Json::array();
  Json stable = nullptr;
  for (size_t i = 0; i < ms.size(); ++i) {
    const Field m = ms[i];
    const int q = m["role"].one_of({"baseline", "quantized"}) == "quantized";
    const double t = m["tokens_per_s"].number();
    if (!(t > 0)) m["tokens_per_s"].fail("must be a positive number of tokens per second");
    tps[q].push_back(t);
    if (const Json rt = m["runtime"].opt_string(); !rt.is_null()) push_unique(runtimes, rt.get<std::string>());
    if (const Json st = m["stable"].opt_bool(); !st.is_null()) stable = (stable.is_null() ? true : stable.get<bool>()) && st.get<bool>();
  }
  std::string rt_joined;
  for (const auto& r : runtimes) rt_joined += (rt_joined.empty() ? "" : ", ") + r.get<std::string>();
  p["runtime"] = rt_joined.empty() ? Json() : Json(rt_joined);
  p["baseline_tokens_per_s"] = tps[0].empty() ? Json() : Json(geomean(tps[0]));
  p["quantized_tokens_per_s"] = tps[1].empty() ? Json() : Json(geomean(tps[1]));
  const Field pv = state["performance_validation"];
  if (pv["gain"].present()) p["gain"] = pv["gain"].number();
  else if (!tps[0].empty() && !tps[1].empty()) p["gain"] = geomean(tps[1]) / geomean(tps[0]);
  else p["gain"] = nullptr;
  p["target_gain"] = spec["target_gain"].opt_number();
  p["target_met"] = (p["gain"].is_null() || p["target_gain"].is_null())
                        ? Json()
                        : Json(p["gain"].get<double>() >= p["target_gain"].get<double>());
  p["abba"] = pv["abba"].opt_object();
  p["measurements"] = ms.size();
  p["stable"] = stable;
  p["trials"] = pv["trials"].size();
  return p;
}

Json warnings_of(const Field& state, const Json& performance, const ReportContext& ctx) {
  Json w = Json::array();
  const Field own = state["warnings"];
  for (size_t i = 0; i < own.size(); ++i) push_unique(w, own[i].string());
  const Field na = state["run_spec"]["not_applicable"];
  if (na.present())
    for (const auto& [k, v] : na.object().items())
      push_unique(w, flag_of(k) + " " + display(v) + ": not applicable to qloom's native engine (recorded, not used)");
  if (performance["runtime"] == "simulate")
    push_unique(w, "throughput was measured on the simulated runtime (--runtime simulate): tokens/s and gain "
                   "time fp32 arithmetic on dequantized weights, not the low-precision kernels");
  const Field ms = state["performance_measurements"];
  const Json limit = state["performance_validation"]["stability_relative_mad"].opt_number();
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i]["stable"].opt_bool() != Json(false)) continue;
    const Json order = ms[i]["order"].opt_string(), mad = ms[i]["relative_mad"].opt_number();
    std::string s = "throughput measurement " + (order.is_null() ? std::to_string(i + 1) : order.get<std::string>()) +
                    " (" + ms[i]["role"].string() + ") is not stable";
    if (!mad.is_null()) s += ": relative MAD " + fmt_sig(mad.get<double>(), 3);
    if (!mad.is_null() && !limit.is_null()) s += " > " + fmt_sig(limit.get<double>(), 3);
    push_unique(w, s);
  }
  if (performance["status"] == "measurement_failed") push_unique(w, "the throughput measurement failed: no gain is reported");
  const Field mps = state["mix_precision_search"];
  if (mps.present() && mps["status"].opt_string() == "partial_timeout")
    push_unique(w, "the mixed-precision search stopped at --search-timeout; the best candidate found so far was used");
  if (state["accuracy_validation"]["verdict"].opt_string() == "unresolved")
    push_unique(w, "the accuracy gate's sample size cannot resolve the gap from the threshold "
                   "(gap ± 1.96 stderr straddles it): a larger --eval-limit or sample count would settle it");
  for (const auto& s : ctx.extra_warnings) push_unique(w, s);
  return w;
}

}  // namespace detail

using Json = nlohmann::ordered_json;

namespace {

Field root_of(const Json& state, const ReportContext& ctx) {
  Field st(state, "", ctx.source);
  st.object();
  if (st["schema_version"].integer() != kReportSchemaVersion)
    st["schema_version"].fail("unsupported state schema_version " + st["schema_version"].raw().dump() +
                              " (this qloom reads " + std::to_string(kReportSchemaVersion) + ")");
  return st;
}

Json final_of(const Field& st, const ReportContext& ctx, const Json& cands) {
  if (ctx.generated_at.empty())
    throw Error(ErrorKind::kInternal, ctx.source, "generated_at", "the report context has no generation time");
  const std::string path = st["path"].one_of({"direct_ptq", "mix_precision_search"});
  const auto [stage, result] = detail::terminal_of(st);
  Json f;
  f["schema_version"] = kReportSchemaVersion;
  f["session_id"] = st["session_id"].string();
  f["result"] = result;
  f["terminal_stage"] = stage;
  f["path"] = path;
  f["model"] = st["run_spec"]["model"].string();
  f["base_model"] = st["run_spec"]["base_model"].string();
  f["quant_ckpt_dir"] = st["quant_ckpt_dir"].opt_string();
  f["accuracy"] = detail::accuracy_facts(st);
  f["best_candidate"] = detail::best_candidate_facts(st, path, cands);
  f["search"] = detail::search_facts(st, path, cands);
  f["performance"] = detail::performance_facts(st);
  f["warnings"] = detail::warnings_of(st, f["performance"], ctx);
  f["versions"] = detail::versions_of();
  f["reproduction"] = detail::reproduction_of(st, ctx);
  f["timings"] = detail::timings_of(st);
  f["generated_at"] = ctx.generated_at;
  return f;
}

}  // namespace

Json build_final_facts(const Json& state, const ReportContext& ctx) {
  const Field st = root_of(state, ctx);
  return final_of(st, ctx, detail::candidates_of(st));
}

Json comparable_facts(Json f) {
  f.erase("generated_at");
  f.erase("timings");
  if (f.contains("search") && f["search"].is_object()) f["search"].erase("search_time_seconds");
  if (f.contains("performance") && f["performance"].is_object())
    for (const char* k : {"baseline_tokens_per_s", "quantized_tokens_per_s", "gain", "target_met", "abba", "stable"})
      f["performance"].erase(k);
  return f;
}

const Json& check_final_facts(const Json& facts, const std::string& file) {
  agent::require_valid_artifact("perf_final", nlohmann::json(facts), file);
  return facts;
}

const Json& check_breakdown_facts(const Json& facts, const std::string& file) {
  agent::require_valid_artifact("perf_session_breakdown", nlohmann::json(facts), file);
  nlohmann::json fin = facts.at("final");
  fin["generated_at"] = facts.at("generated_at");
  agent::require_valid_artifact("perf_final", fin, file + " (final)");
  return facts;
}

}  // namespace qloom::perf
