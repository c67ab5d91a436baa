// session_breakdown.json (report_facts.h): the final facts plus every
// detail the session recorded, helper documents passed through as stored
// after checking the fields the reports read from them.
#include "qloom/perf/report_facts.h"

#include "qloom/perf/report_facts_internal.h"
#include "qloom/perf/report_json.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

Json not_applicable_of(const Field& spec) {
  Json out = Json::array();
  const Field na = spec["not_applicable"];
  if (!na.present()) return out;
  for (const auto& [k, v] : na.object().items()) {
    std::string flag = "--" + k;
    for (char& c : flag) c = c == '_' ? '-' : c;
    out.push_back(Json{{"option", k}, {"flag", flag}, {"value", v},
                       {"note", "accepted for compatibility with quark-quant-perf; qloom's native engine does not use it"}});
  }
  return out;
}

// The sensitivity table for the reports: the measured entries with their KLD
// under "kld" (perf/sensitivity.h stores kld_mean; "kld" is accepted too),
// entries a precision cannot hold moved to "unfit" [{unit, precision,
// reason}], everything else as stored.
Json sensitivity_of(const Field& mps) {
  const Field s = mps["sensitivity"];
  if (!s.present()) return nullptr;
  Json out = s.object();
  out["entries"] = Json::array();
  out["unfit"] = Json::array();
  const Field entries = s["entries"];
  for (size_t i = 0; i < entries.array().size(); ++i) {
    const Field e = entries[i];
    Json row = e.object();
    row["unit"] = e["unit"].string();
    row["precision"] = e["precision"].string();
    if (e["status"].present() && e["status"].one_of({"measured", "unfit"}) == "unfit") {
      out["unfit"].push_back(Json{{"unit", row["unit"]}, {"precision", row["precision"]},
                                  {"reason", e["reason"].opt_string()}});
      continue;
    }
    const Field kld = e["kld_mean"].present() ? e["kld_mean"] : e["kld"];
    if (kld.number() < 0) kld.fail("a KL divergence cannot be negative");
    if (!row.contains("kld")) row["kld"] = kld.number();
    if (!row.contains("kld_stderr") && row.contains("kld_mean_stderr")) row["kld_stderr"] = row["kld_mean_stderr"];
    out["entries"].push_back(std::move(row));
  }
  return out;
}

Json search_detail(const Field& st, const Json& summary) {
  if (summary.is_null()) return nullptr;
  const Field mps = st["mix_precision_search"];
  Json s = summary;
  s["config"] = mps["config"].opt_object();
  s["candidate_cursor"] = mps["candidate_cursor"].opt_integer();
  s["best_config"] = mps["result"]["best_config"].opt_object();
  s["baseline_metrics"] = mps["result"]["baseline_metrics"].opt_object();
  return s;
}

// A list of objects passed through as stored.
Json objects_of(const Field& list) {
  Json out = Json::array();
  for (size_t i = 0; i < list.size(); ++i) out.push_back(list[i].object());
  return out;
}

Json performance_detail(const Field& st, const Json& summary) {
  Json p;
  p["mode"] = summary["mode"];
  p["status"] = summary["status"];
  p["target_gain"] = summary["target_gain"];
  Json v = st["performance_validation"].opt_object();
  if (v.is_object()) v.erase("trials");
  p["validation"] = v;
  p["measurements"] = objects_of(st["performance_measurements"]);
  p["trials"] = objects_of(st["performance_validation"]["trials"]);
  return p;
}

Json timeline_of(const Field& st) {
  const Field tl = st["phase_timeline"];
  Json out = Json::array();
  for (size_t i = 0; i < tl.array().size(); ++i) {
    Json e;
    e["stage"] = tl[i]["stage"].string();
    e["started_at"] = tl[i]["started_at"].opt_string();
    e["ended_at"] = tl[i]["ended_at"].opt_string();
    e["seconds"] = tl[i]["seconds"].number();
    out.push_back(e);
  }
  return out;
}

}  // namespace

Json build_session_breakdown(const Json& state, const ReportContext& ctx) {
  Json fin = build_final_facts(state, ctx);
  const Field st(state, "", ctx.source);
  const Json cands = detail::candidates_of(st);
  Json b;
  b["schema_version"] = kReportSchemaVersion;
  b["session_id"] = fin["session_id"];
  b["final"] = nullptr;  // filled last, kept in this place
  b["stage"] = st["stage"].opt_string();
  b["run_spec"] = st["run_spec"].object();
  b["not_applicable"] = not_applicable_of(st["run_spec"]);
  b["runtime_context"] = st["runtime_context"].opt_object();
  // invocation.env is left out: it may hold tokens (HF_TOKEN).
  b["invocation"] = Json{{"argv", st["invocation"]["argv"].array()}, {"spec", st["invocation"]["spec"].opt_string()}};
  b["baseline_reference"] = st["baseline_reference"].opt_object();
  b["search"] = search_detail(st, fin["search"]);
  b["candidates"] = cands;
  b["sensitivity"] = sensitivity_of(st["mix_precision_search"]);
  b["accuracy_validation"] = st["accuracy_validation"].opt_object();
  b["accuracy_attempts"] = objects_of(st["accuracy_attempts"]);
  b["performance"] = performance_detail(st, fin["performance"]);
  b["phase_timeline"] = timeline_of(st);
  b["generated_at"] = fin["generated_at"];
  fin.erase("generated_at");
  b["final"] = std::move(fin);
  return b;
}

}  // namespace qloom::perf
