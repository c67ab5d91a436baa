// The sections of final.json read from state.json (report_facts_internal.h).
#include "qloom/perf/report_facts_internal.h"

#include <optional>
#include <vector>

#include "qloom/build_info.h"
#include "qloom/job/quantize_args.h"
#include "qloom/git_commit.h"

namespace qloom::perf::detail {

using Json = nlohmann::ordered_json;

std::pair<std::string, std::string> terminal_of(const Field& state) {
  const std::string stage = state["terminal_stage"].one_of({"done", "perf_failed", "failed", "base_unhealthy"});
  const Field r = state["terminal_result"];
  const std::string result =
      r.one_of({"success", "perf_below_target", "accuracy_failed", "performance_failed", "base_unhealthy"});
  const bool ok = (stage == "done" && result == "success") ||
                  (stage == "perf_failed" && result == "perf_below_target") ||
                  (stage == "failed" && (result == "accuracy_failed" || result == "performance_failed")) ||
                  (stage == "base_unhealthy" && result == "base_unhealthy");
  if (!ok) r.fail("'" + result + "' does not follow from terminal_stage '" + stage + "'");
  return {stage, result};
}

Json accuracy_facts(const Field& state) {
  const Field av = state["accuracy_validation"];
  if (!av.present()) return nullptr;
  av.object();
  const Field spec = state["run_spec"];
  Json a;
  a["task"] = av["task"].present() ? av["task"].string() : spec["eval_task"].string();
  a["metric"] = av["metric"].opt_string();
  a["baseline"] = av["baseline"].number();
  a["quantized"] = av["quantized"].number();
  a["gap"] = av["gap"].number();
  a["threshold"] = av["threshold"].present() ? av["threshold"].number() : spec["accuracy_gap"].number();
  a["passed"] = av["passed"].boolean();
  a["n"] = av["n"].integer();
  a["stderr"] = av["stderr"].number();
  a["verdict"] = av["verdict"].opt_string();
  a["attempts"] = state["accuracy_attempts"].size();
  return a;
}

Json candidate_facts(const Field& c) {
  Json out;
  out["rank"] = c["rank"].integer();
  out["config"] = c["config"].object();
  out["status"] = c["status"].one_of({"pending", "exported", "accepted", "rejected", "skipped"});
  out["bits_per_weight"] = c["search_metrics"]["bits_per_weight"].number();
  out["relative_change"] = c["relative_change"].opt_number();
  const Field g = c["real_gate"];
  out["real_gap"] = g.present() ? Json(g["gap"].number()) : Json();
  out["real_passed"] = g.present() ? Json(g["passed"].boolean()) : Json();
  out["pareto"] = false;
  out["winner"] = false;
  out["search_metrics"] = c["search_metrics"].object();
  out["real_gate"] = g.opt_object();
  return out;
}

// Marks the candidates no other candidate beats on both bits per weight and
// proxy gap (relative_change); candidates without a proxy gap are not ranked.
void mark_pareto(Json& cands) {
  for (auto& c : cands) {
    if (c["relative_change"].is_null()) continue;
    const double b = c["bits_per_weight"].get<double>(), g = c["relative_change"].get<double>();
    bool dominated = false;
    for (const auto& o : cands) {
      if (o["relative_change"].is_null()) continue;
      const double ob = o["bits_per_weight"].get<double>(), og = o["relative_change"].get<double>();
      if (ob <= b && og <= g && (ob < b || og < g)) dominated = true;
    }
    c["pareto"] = !dominated;
  }
}

Json candidates_of(const Field& state) {
  const Field mps = state["mix_precision_search"];
  Field list = mps["candidate_queue"];
  if (list.size() == 0) list = mps["result"]["all_results"];
  Json out = Json::array();
  for (size_t i = 0; i < list.size(); ++i) out.push_back(candidate_facts(list[i]));
  mark_pareto(out);
  const Field best = state["best_candidate"];
  if (best.present()) {
    const Json rank = best["rank"].opt_integer();
    const Json& config = best["config"].object();
    for (auto& c : out)
      c["winner"] = rank.is_null() ? c["config"] == config : c["rank"] == rank;
  }
  return out;
}

Json best_candidate_facts(const Field& state, const std::string& path, const Json& cands) {
  const Field best = state["best_candidate"];
  if (!best.present()) return nullptr;
  Json b;
  b["kind"] = path == "direct_ptq" ? "fixed_recipe" : "search";
  b["quant_strategy"] = state["run_spec"]["quant_strategy"].opt_string();
  b["config"] = best["config"].object();
  b["rank"] = best["rank"].opt_integer();
  b["bits_per_weight"] = best["bits_per_weight"].opt_number();
  b["proxy_gap"] = nullptr;
  for (const auto& c : cands) {
    if (!c["winner"].get<bool>()) continue;
    if (b["bits_per_weight"].is_null()) b["bits_per_weight"] = c["bits_per_weight"];
    b["proxy_gap"] = c["relative_change"];
  }
  return b;
}

Json search_facts(const Field& state, const std::string& path, const Json& cands) {
  const Field mps = state["mix_precision_search"];
  if (path == "direct_ptq" || !mps.present()) return nullptr;
  const Field res = mps["result"];
  Json s;
  s["status"] = mps["status"].one_of({"pending", "running", "completed", "partial_timeout", "exhausted"});
  s["total_configs_available"] = res["total_configs_available"].opt_integer();
  s["total_configs_evaluated"] = res["total_configs_evaluated"].opt_integer();
  s["search_time_seconds"] = res["search_time_seconds"].opt_number();
  s["termination_reason"] = mps["termination_reason"].opt_string();
  s["granularity"] = res["granularity"].present() ? res["granularity"].opt_string()
                                                  : state["run_spec"]["granularity"].opt_string();
  s["candidates"] = cands.size();
  size_t gated = 0;
  for (const auto& c : cands) gated += c["real_gate"].is_null() ? 0 : 1;
  s["gated"] = gated;
  return s;
}

Json timings_of(const Field& state) {
  const Field tl = state["phase_timeline"];
  tl.array();
  Json stages = Json::array();
  double total = 0;
  for (size_t i = 0; i < tl.size(); ++i) {
    const double s = tl[i]["seconds"].number();
    Json entry{{"stage", tl[i]["stage"].string()}};
    if (tl[i]["step"].present()) entry["step"] = tl[i]["step"].string();  // the timeline's named step
    entry["seconds"] = s;
    stages.push_back(std::move(entry));
    total += s;
  }
  return Json{{"stages", stages}, {"total_seconds", total}};
}

Json versions_of() {
  return Json{{"qloom", build::kVersion}, {"git_commit", build::kGitCommit}, {"build_type", build::kBuildType}};
}

// The value of --session-dir in argv ("--session-dir D" or "--session-dir=D").
std::optional<std::string> session_dir_arg(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--session-dir" && i + 1 < argv.size()) return argv[i + 1];
    if (argv[i].rfind("--session-dir=", 0) == 0) return argv[i].substr(14);
  }
  return std::nullopt;
}

Json reproduction_of(const Field& state, const ReportContext& ctx) {
  const Field argv_f = state["invocation"]["argv"];
  std::vector<std::string> argv;
  for (size_t i = 0; i < argv_f.array().size(); ++i) argv.push_back(argv_f[i].string());
  if (argv.empty()) argv_f.fail("must hold the command line (at least the program name)");
  const auto given = session_dir_arg(argv);
  std::vector<std::string> resume = argv;
  if (!given && !ctx.session_dir.empty()) {
    resume.push_back("--session-dir");
    resume.push_back(ctx.session_dir.string());
  }
  const std::string dir = !ctx.session_dir.empty() ? ctx.session_dir.string() : given.value_or("");
  Json r;
  r["command"] = job::shell_join(argv);
  r["resume"] = job::shell_join(resume);
  r["report"] = dir.empty() ? Json() : Json(job::shell_join({argv[0], "perf", "report", "--session", dir}));
  return r;
}

}  // namespace qloom::perf::detail
