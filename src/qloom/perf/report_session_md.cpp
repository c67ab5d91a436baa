// session_report.md (report_markdown.h): every table of session_breakdown.json.
#include <algorithm>

#include "qloom/perf/report_facts.h"
#include "qloom/perf/report_format.h"
#include "qloom/perf/report_markdown.h"
#include "qloom/perf/report_markdown_internal.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;
using mdr::heading;

// Field / value rows of an object's members, in its order.
std::string kv_table(const Json& obj) {
  MdTable t{{"Field", "Value"}, "ll", {}};
  for (const auto& [k, v] : obj.items()) t.rows.push_back({md_code(k), md_cell(v)});
  return t.str() + "\n";
}

// One row per object, the columns the union of their keys in first-seen order.
std::string objects_table(const Json& list) {
  std::vector<std::string> cols;
  for (const auto& o : list)
    for (const auto& [k, _] : o.items())
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
  MdTable t{{}, "", {}};
  for (const auto& c : cols) {
    t.head.push_back(md_text(c));
    t.align += 'l';
  }
  for (const auto& o : list) {
    std::vector<std::string> row;
    for (const auto& c : cols) row.push_back(o.contains(c) ? md_cell(o.at(c)) : "—");
    t.rows.push_back(std::move(row));
  }
  return t.str() + "\n";
}

std::string metric(const Json& m, const char* key, int sig) {
  if (!m.contains(key) || !m.at(key).is_number()) return "—";
  return fmt_sig(m.at(key).get<double>(), sig);
}

std::string candidates_table(const Json& cands) {
  if (cands.empty()) return "No candidates.\n\n";
  MdTable t{{"Rank", "Config", "Bits/w", "Proxy KLD", "", "Stderr", "Top-1", "Proxy gap", "Modelled gain", "Real gap",
             "Status", "Front"},
            "rlrrcrrrrrll",
            {}};
  for (const auto& c : cands) {
    const Json& m = c.at("search_metrics");
    std::string mark = c.at("pareto").get<bool>() ? "Pareto" : "";
    if (c.at("winner").get<bool>()) mark += mark.empty() ? "**winner**" : ", **winner**";
    t.rows.push_back({display(c.at("rank")), md_code(config_label(c.at("config"))),
                      fmt_fixed(c.at("bits_per_weight").get<double>(), 3), metric(m, "proxy_kld", 4), "±",
                      metric(m, "proxy_kld_stderr", 2), metric(m, "proxy_top1", 4),
                      c.at("relative_change").is_number() ? fmt_percent(c.at("relative_change").get<double>(), 2) : "—",
                      m.contains("modelled_gain") ? md_num(m.at("modelled_gain"), 2) + "x" : "—",
                      c.at("real_gap").is_number() ? fmt_percent(c.at("real_gap").get<double>(), 2) : "—",
                      md_text(c.at("status").get<std::string>()), mark});
  }
  return t.str() + "\nProxy gap: the search's estimate of the gate gap (relative_change); real gap: the gate on the "
                   "exported checkpoint. Pareto: no other candidate has both fewer bits per weight and a smaller proxy gap.\n\n";
}

// Axis labels in the table's own order when it lists them, else first-seen.
std::vector<std::string> axis(const Json& s, const char* listed, const char* key) {
  std::vector<std::string> out;
  if (s.contains(listed) && s.at(listed).is_array())
    for (const auto& v : s.at(listed))
      if (v.is_string()) out.push_back(v.get<std::string>());
  for (const auto& e : s.at("entries")) {
    const auto v = e.at(key).get<std::string>();
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

std::string sensitivity_table(const Json& s) {
  if (s.is_null()) return "Not measured.\n\n";
  const auto units = axis(s, "units", "unit"), precs = axis(s, "precisions", "precision");
  MdTable t{{"Unit"}, "l", {}};
  for (const auto& p : precs) {
    t.head.push_back(md_code(p));
    t.align += 'r';
  }
  for (const auto& u : units) {
    std::vector<std::string> row{md_code(u)};
    for (const auto& p : precs) {
      std::string cell = "—";
      for (const auto& e : s.at("entries"))
        if (e.at("unit") == u && e.at("precision") == p) cell = fmt_sig(e.at("kld").get<double>(), 3);
      row.push_back(cell);
    }
    t.rows.push_back(std::move(row));
  }
  std::string head = "KL divergence of the model output when one unit drops to each precision";
  if (s.contains("granularity") && s.at("granularity").is_string())
    head += " (granularity " + md_code(s.at("granularity").get<std::string>()) + ")";
  return head + ":\n\n" + t.str() + "\n";
}

std::string attempts_table(const Json& attempts) {
  if (attempts.empty()) return "No attempts.\n\n";
  MdTable t{{"Attempt", "Candidate", "Baseline", "Quantized", "Gap", "", "Stderr", "Threshold", "n", "Passed"},
            "rrrrrcrrrc",
            {}};
  auto get = [](const Json& a, const char* k) { return a.contains(k) ? a.at(k) : Json(); };
  auto pct = [](const Json& v) { return v.is_number() ? fmt_percent(v.get<double>(), 2) : std::string("—"); };
  for (const auto& a : attempts)
    t.rows.push_back({md_cell(get(a, "attempt")), md_cell(get(a, "candidate_rank")), md_num(get(a, "baseline"), 4),
                      md_num(get(a, "quantized"), 4), pct(get(a, "gap")), "±", pct(get(a, "stderr")),
                      pct(get(a, "threshold")), md_cell(get(a, "n")), md_cell(get(a, "passed"))});
  return t.str() + "\n";
}

std::string measurements_table(const Json& ms) {
  if (ms.empty()) return "No measurements.\n\n";
  MdTable t{{"#", "Order", "Role", "Runtime", "Timed runs (tokens/s)", "Median tokens/s", "Rel. MAD", "Stable"},
            "rllllrrc",
            {}};
  auto get = [](const Json& m, const char* k) { return m.contains(k) ? m.at(k) : Json(); };
  for (size_t i = 0; i < ms.size(); ++i) {
    const Json& m = ms[i];
    std::string runs;
    if (m.contains("runs") && m.at("runs").is_array())
      for (const auto& r : m.at("runs"))
        if (r.is_object() && r.contains("tokens_per_s") && r.at("tokens_per_s").is_number())
          runs += (runs.empty() ? "" : ", ") + fmt_fixed(r.at("tokens_per_s").get<double>(), 1);
    t.rows.push_back({std::to_string(i + 1), md_cell(get(m, "order")), md_text(m.at("role").get<std::string>()),
                      md_cell(get(m, "runtime")), runs.empty() ? "—" : runs, md_num(m.at("tokens_per_s"), 1),
                      md_cell(get(m, "relative_mad")), md_cell(get(m, "stable"))});
  }
  return t.str() + "\n";
}

std::string timeline_table(const Json& tl) {
  if (tl.empty()) return "No stages recorded.\n\n";
  MdTable t{{"Stage", "Started", "Ended", "Seconds"}, "lllr", {}};
  double total = 0;
  for (const auto& e : tl) {
    t.rows.push_back({md_code(e.at("stage").get<std::string>()), md_cell(e.at("started_at")), md_cell(e.at("ended_at")),
                      fmt_fixed(e.at("seconds").get<double>(), 1)});
    total += e.at("seconds").get<double>();
  }
  t.rows.push_back({"**total**", "", "", "**" + fmt_fixed(total, 1) + "**"});
  return t.str() + "\n";
}

std::string search_section(const Json& b) {
  const Json& f = b.at("final");
  std::string s = heading("Mixed-precision search", 2) + "Search: " + mdr::search_line(f) + ".\n\n";
  if (f.at("path") == "direct_ptq") return s;
  if (b.at("search").is_object()) {
    Json shown = b.at("search");
    for (const char* k : {"config", "best_config", "baseline_metrics"}) shown.erase(k);
    s += kv_table(shown);
    if (b.at("search").at("config").is_object()) s += "Search space:\n\n" + kv_table(b.at("search").at("config"));
  }
  s += heading("Candidates", 3) + candidates_table(b.at("candidates"));
  s += heading("Sensitivity", 3) + sensitivity_table(b.at("sensitivity"));
  return s;
}

std::string performance_section(const Json& b) {
  const Json& p = b.at("performance");
  std::string s = heading("Throughput", 2) + mdr::throughput_table(b.at("final").at("performance")) +
                  "Gain: " + md_gain_line(b.at("final").at("performance")) + ".\n\n";
  if (p.at("validation").is_object()) s += kv_table(p.at("validation"));
  s += heading("Measurements", 3) + measurements_table(p.at("measurements"));
  s += heading("Tuning trials", 3) + (p.at("trials").empty() ? std::string("None.\n\n") : objects_table(p.at("trials")));
  return s;
}

}  // namespace

std::string render_session_report_md(const Json& breakdown) {
  const Json& b = check_breakdown_facts(breakdown, "session_breakdown.json");
  const Json& f = b.at("final");
  std::string s = heading("qloom perf — session report " + md_code(b.at("session_id").get<std::string>()), 1);
  s += "Result: " + md_result_line(f) + ".\n\n" + mdr::summary_table(f);
  s += heading("Run spec", 2) + kv_table(b.at("run_spec"));
  s += heading("Not applicable options", 3) +
       (b.at("not_applicable").empty() ? std::string("None.\n\n") : objects_table(b.at("not_applicable")));
  s += heading("Baseline health", 2) +
       (b.at("baseline_reference").is_object() ? kv_table(b.at("baseline_reference")) : std::string("Not run.\n\n"));
  s += search_section(b);
  s += heading("Accuracy gate", 2) + mdr::accuracy_table(f.at("accuracy"));
  s += heading("Attempts", 3) + attempts_table(b.at("accuracy_attempts"));
  s += performance_section(b);
  s += heading("Phase timeline", 2) + timeline_table(b.at("phase_timeline"));
  s += heading("Warnings", 2) + mdr::warnings_list(f.at("warnings"));
  s += heading("Reproduce", 2) + mdr::reproduce_block(f.at("reproduction"));
  s += heading("Versions", 2) + kv_table(f.at("versions"));
  s += "Generated " + md_text(b.at("generated_at").get<std::string>()) + ".\n";
  return s;
}

}  // namespace qloom::perf
