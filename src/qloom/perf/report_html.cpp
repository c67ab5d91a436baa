#include "qloom/perf/report_html.h"

#include <algorithm>

#include "qloom/perf/report_facts.h"
#include "qloom/perf/report_format.h"
#include "qloom/perf/svg_plot.h"

namespace qloom::perf {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kStyle = R"css(
body { font-family: sans-serif; margin: 24px auto; max-width: 1180px; color: #111827; background: #ffffff; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; }
code, pre { font-family: monospace; font-size: 13px; }
pre { background: #f3f4f6; padding: 8px 10px; white-space: pre-wrap; word-break: break-all; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f9fafb; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.result { display: inline-block; padding: 3px 12px; border-radius: 12px; font-weight: bold; color: #ffffff; }
.result-success { background: #16a34a; }
.result-perf_below_target { background: #d97706; }
.result-fail { background: #dc2626; }
.sub { color: #4b5563; margin-top: 6px; }
.na { color: #6b7280; font-style: italic; }
.caption { color: #4b5563; font-size: 13px; max-width: 900px; }
tr.winner td { background: #fef3c7; }
footer { margin-top: 32px; color: #6b7280; font-size: 12px; }
)css";

std::string esc(const std::string& s) { return html_escape(s); }
std::string code(const std::string& s) { return "<code>" + esc(s) + "</code>"; }
std::string na(const std::string& s) { return "<p class=\"na\">" + esc(s) + "</p>\n"; }
std::string pct(const Json& v) { return v.is_number() ? fmt_percent(v.get<double>(), 2) : "—"; }
std::string num(const Json& v, int d) { return v.is_number() ? fmt_fixed(v.get<double>(), d) : "—"; }

std::string row(const std::string& k, const std::string& v_html) {
  return "<tr><th>" + esc(k) + "</th><td>" + v_html + "</td></tr>\n";
}

std::string winner_html(const Json& f) {
  const Json& b = f.at("best_candidate");
  if (b.is_null()) return "none (no candidate passed the gate)";
  std::string s = code(config_label(b.at("config")));
  if (b.at("quant_strategy").is_string()) s = "fixed recipe " + code(b.at("quant_strategy").get<std::string>()) + " → " + s;
  if (b.at("rank").is_number()) s += " · rank " + display(b.at("rank"));
  if (b.at("bits_per_weight").is_number()) s += " · " + num(b.at("bits_per_weight"), 3) + " bits/weight";
  return s;
}

std::string accuracy_html(const Json& a) {
  if (a.is_null()) return "<span class=\"na\">not run</span>";
  return esc(a.at("task").get<std::string>()) + (a.at("metric").is_string() ? " / " + esc(a.at("metric").get<std::string>()) : "") +
         ": baseline " + num(a.at("baseline"), 4) + ", quantized " + num(a.at("quantized"), 4) + " · gap <b>" +
         pct(a.at("gap")) + "</b> ± " + pct(a.at("stderr")) + " (n = " + display(a.at("n")) + ") vs threshold " +
         pct(a.at("threshold")) + " · <b>" + (a.at("passed").get<bool>() ? "passed" : "failed") + "</b>";
}

std::string search_html(const Json& f) {
  if (f.at("path") == "direct_ptq") return "<span class=\"na\">not applicable (fixed recipe)</span>";
  const Json& s = f.at("search");
  if (s.is_null()) return "<span class=\"na\">not run</span>";
  std::string out = esc(s.at("status").get<std::string>()) + ": " + display(s.at("total_configs_evaluated")) + " of " +
                    display(s.at("total_configs_available")) + " configurations evaluated, " + display(s.at("gated")) +
                    " gated";
  if (s.at("search_time_seconds").is_number()) out += ", " + num(s.at("search_time_seconds"), 1) + " s";
  if (s.at("termination_reason").is_string()) out += " · " + code(s.at("termination_reason").get<std::string>());
  return out;
}

std::string gain_html(const Json& p) {
  if (p.at("mode") == "off") return "<span class=\"na\">not applicable (--performance-mode off)</span>";
  if (p.at("gain").is_null())
    return "<span class=\"na\">not run (status " + esc(p.at("status").get<std::string>()) + ")</span>";
  std::string s = "<b>" + num(p.at("gain"), 2) + "x</b> (" + num(p.at("baseline_tokens_per_s"), 1) + " → " +
                  num(p.at("quantized_tokens_per_s"), 1) + " tokens/s)";
  if (p.at("target_gain").is_number())
    s += " · target " + num(p.at("target_gain"), 2) + "x " + (p.at("target_met").get<bool>() ? "met" : "missed");
  if (p.at("runtime").is_string()) s += " · runtime " + code(p.at("runtime").get<std::string>());
  return s;
}

std::string facts_table(const Json& f) {
  std::string t = "<table class=\"facts\">\n";
  t += row("Result", code(f.at("result").get<std::string>()) + " (terminal stage " +
                         code(f.at("terminal_stage").get<std::string>()) + ", path " + code(f.at("path").get<std::string>()) + ")");
  t += row("Model", code(f.at("model").get<std::string>()));
  if (f.at("base_model") != f.at("model")) t += row("Base model", code(f.at("base_model").get<std::string>()));
  t += row("Winner", winner_html(f));
  t += row("Checkpoint", f.at("quant_ckpt_dir").is_string() ? code(f.at("quant_ckpt_dir").get<std::string>()) : "none");
  t += row("Accuracy gate", accuracy_html(f.at("accuracy")));
  t += row("Search", search_html(f));
  t += row("Throughput gain", gain_html(f.at("performance")));
  t += row("Performance", code(f.at("performance").at("mode").get<std::string>()) + " / " +
                              code(f.at("performance").at("status").get<std::string>()));
  t += row("Session time", num(f.at("timings").at("total_seconds"), 1) + " s over " +
                               std::to_string(f.at("timings").at("stages").size()) + " stages");
  return t + "</table>\n";
}

std::string candidate_tooltip(const Json& c) {
  std::string t = "rank " + display(c.at("rank")) + " · " + config_label(c.at("config")) + " · " +
                  fmt_fixed(c.at("bits_per_weight").get<double>(), 3) + " bits/weight · proxy gap " + pct(c.at("relative_change"));
  if (c.at("real_gap").is_number())
    t += " · real gap " + pct(c.at("real_gap")) + (c.at("real_passed").get<bool>() ? " (passed)" : " (failed)");
  return t + " · " + c.at("status").get<std::string>();
}

std::string pareto_section(const Json& b) {
  const Json& f = b.at("final");
  std::string s = "<section id=\"pareto\">\n<h2>Accuracy gap vs bits per weight</h2>\n";
  if (f.at("path") == "direct_ptq") return s + na("Not applicable: a fixed recipe has no candidates.") + "</section>\n";
  ScatterSpec spec{"bits per weight", "accuracy gap", std::nullopt, {}};
  if (b.at("run_spec").at("accuracy_gap").is_number()) spec.threshold = b.at("run_spec").at("accuracy_gap").get<double>();
  for (const auto& c : b.at("candidates")) {
    if (!c.at("relative_change").is_number()) continue;
    ScatterPoint p;
    p.x = c.at("bits_per_weight").get<double>();
    p.y = c.at("relative_change").get<double>();
    if (c.at("real_gap").is_number()) p.y_real = c.at("real_gap").get<double>(), p.real_passed = c.at("real_passed").get<bool>();
    p.pareto = c.at("pareto").get<bool>();
    p.winner = c.at("winner").get<bool>();
    p.label = "#" + display(c.at("rank"));
    p.tooltip = candidate_tooltip(c);
    spec.points.push_back(std::move(p));
  }
  if (spec.points.empty()) return s + na("Not run: the search evaluated no candidate.") + "</section>\n";
  return s + svg_pareto_scatter(spec) +
         "<p class=\"caption\">Every candidate of the search: circles are the proxy's estimate of the gate gap "
         "(KLD on a few windows), diamonds the real gate on the exported checkpoint (dashed line joins the two). "
         "The blue line is the Pareto front of the proxy estimates; hover a mark for its config.</p>\n</section>\n";
}

std::string sensitivity_section(const Json& b) {
  std::string s = "<section id=\"sensitivity\">\n<h2>Sensitivity (KLD per unit x precision)</h2>\n";
  const Json& sens = b.at("sensitivity");
  if (b.at("final").at("path") == "direct_ptq") return s + na("Not applicable: a fixed recipe measures no sensitivity.") + "</section>\n";
  if (sens.is_null()) return s + na("Not measured in this session.") + "</section>\n";
  HeatSpec spec{{}, {}, {}, "KLD (nats), log scale"};
  auto add = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const char* k : {"units", "precisions"})
    if (sens.contains(k) && sens.at(k).is_array())
      for (const auto& v : sens.at(k))
        if (v.is_string()) add(k[0] == 'u' ? spec.rows : spec.cols, v.get<std::string>());
  for (const auto& e : sens.at("entries")) {
    HeatCell c{e.at("unit").get<std::string>(), e.at("precision").get<std::string>(), e.at("kld").get<double>(), ""};
    add(spec.rows, c.row), add(spec.cols, c.col);
    c.tooltip = c.row + " @ " + c.col + ": KLD " + fmt_sig(*c.value, 4);
    if (e.contains("kld_stderr") && e.at("kld_stderr").is_number()) c.tooltip += " ± " + fmt_sig(e.at("kld_stderr").get<double>(), 3);
    if (e.contains("top1") && e.at("top1").is_number()) c.tooltip += ", top-1 agreement " + fmt_sig(e.at("top1").get<double>(), 4);
    spec.cells.push_back(std::move(c));
  }
  return s + svg_heatmap(spec) +
         "<p class=\"caption\">KL divergence of the model output when only that unit drops to that precision, "
         "measured on calibration text; hover a cell for its value.</p>\n</section>\n";
}

Bar bar_of(const std::string& role, const Json& value, const Json& measurements) {
  Bar bar{role, value.get<double>(), std::nullopt, std::nullopt, {}, ""};
  size_t n = 0;
  for (const auto& m : measurements) {
    if (m.at("role") != role) continue;
    ++n;
    bool had_runs = false;
    if (m.contains("runs") && m.at("runs").is_array())
      for (const auto& r : m.at("runs"))
        if (r.is_object() && r.contains("tokens_per_s") && r.at("tokens_per_s").is_number())
          bar.samples.push_back(r.at("tokens_per_s").get<double>()), had_runs = true;
    if (!had_runs) bar.samples.push_back(m.at("tokens_per_s").get<double>());
  }
  if (!bar.samples.empty()) {
    bar.lo = *std::min_element(bar.samples.begin(), bar.samples.end());
    bar.hi = *std::max_element(bar.samples.begin(), bar.samples.end());
  }
  bar.tooltip = role + ": " + fmt_fixed(bar.value, 1) + " tokens/s (geometric mean of " + std::to_string(n) +
                " measurements" + (bar.lo ? "; runs " + fmt_fixed(*bar.lo, 1) + "–" + fmt_fixed(*bar.hi, 1) : "") + ")";
  return bar;
}

std::string throughput_section(const Json& b) {
  const Json& p = b.at("final").at("performance");
  std::string s = "<section id=\"throughput\">\n<h2>Throughput</h2>\n";
  if (p.at("mode") == "off") return s + na("Not applicable: --performance-mode off.") + "</section>\n";
  if (p.at("baseline_tokens_per_s").is_null() || p.at("quantized_tokens_per_s").is_null())
    return s + na("Not run: no throughput measurement was recorded (status " + p.at("status").get<std::string>() + ").") +
           "</section>\n";
  const Json& ms = b.at("performance").at("measurements");
  BarSpec spec{"tokens / s", {bar_of("baseline", p.at("baseline_tokens_per_s"), ms),
                              bar_of("quantized", p.at("quantized_tokens_per_s"), ms)}, ""};
  spec.note = "gain " + num(p.at("gain"), 2) + "x";
  if (p.at("target_gain").is_number())
    spec.note += " (target " + num(p.at("target_gain"), 2) + "x: " + (p.at("target_met").get<bool>() ? "met" : "missed") + ")";
  if (p.at("runtime").is_string()) spec.note += " · runtime " + p.at("runtime").get<std::string>();
  if (p.at("abba").is_object()) spec.note += " · ABBA order";
  return s + svg_bars(spec) +
         "<p class=\"caption\">Bars: geometric mean of each model's measurements (median tokens/s of the timed runs); "
         "whiskers: min–max over the timed runs (dots).</p>\n</section>\n";
}

std::string candidates_section(const Json& b) {
  if (b.at("candidates").empty()) return "";
  std::string t = "<section id=\"candidates\">\n<h2>Candidates</h2>\n<table>\n<tr><th>Rank</th><th>Config</th><th>Bits/w</th>"
                  "<th>Proxy gap</th><th>Real gap</th><th>Status</th><th>Front</th></tr>\n";
  for (const auto& c : b.at("candidates")) {
    std::string mark = c.at("pareto").get<bool>() ? "Pareto" : "";
    if (c.at("winner").get<bool>()) mark += mark.empty() ? "winner" : ", winner";
    t += std::string(c.at("winner").get<bool>() ? "<tr class=\"winner\">" : "<tr>") + "<td class=\"num\">" +
         display(c.at("rank")) + "</td><td>" + code(config_label(c.at("config"))) + "</td><td class=\"num\">" +
         num(c.at("bits_per_weight"), 3) + "</td><td class=\"num\">" + pct(c.at("relative_change")) +
         "</td><td class=\"num\">" + pct(c.at("real_gap")) + "</td><td>" + esc(c.at("status").get<std::string>()) +
         "</td><td>" + esc(mark) + "</td></tr>\n";
  }
  return t + "</table>\n</section>\n";
}

std::string tail_sections(const Json& f, const std::string& generated_at) {
  std::string s = "<section id=\"warnings\">\n<h2>Warnings</h2>\n";
  if (f.at("warnings").empty()) s += na("None.");
  else {
    s += "<ul>\n";
    for (const auto& w : f.at("warnings")) s += "<li>" + esc(w.get<std::string>()) + "</li>\n";
    s += "</ul>\n";
  }
  const Json& r = f.at("reproduction");
  s += "</section>\n<section id=\"reproduce\">\n<h2>Reproduce</h2>\n<pre>" + esc(r.at("command").get<std::string>()) +
       "</pre>\n<p>Resume:</p>\n<pre>" + esc(r.at("resume").get<std::string>()) + "</pre>\n";
  if (r.at("report").is_string()) s += "<p>Rebuild the reports:</p>\n<pre>" + esc(r.at("report").get<std::string>()) + "</pre>\n";
  const Json& v = f.at("versions");
  return s + "</section>\n<footer>qloom " + esc(v.at("qloom").get<std::string>()) + " (" +
         esc(v.at("git_commit").get<std::string>()) + ", " + esc(v.at("build_type").get<std::string>()) +
         ") · generated " + esc(generated_at) + "</footer>\n";
}

}  // namespace

std::string render_report_html(const Json& breakdown) {
  const Json& b = check_breakdown_facts(breakdown, "session_breakdown.json");
  const Json& f = b.at("final");
  const std::string result = f.at("result").get<std::string>();
  const std::string cls = result == "success" || result == "perf_below_target" ? result : "fail";
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>qloom perf — session " +
                  esc(b.at("session_id").get<std::string>()) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<header>\n<h1>qloom perf — session " + code(b.at("session_id").get<std::string>()) + "</h1>\n";
  h += "<span class=\"result result-" + cls + "\">" + esc(result) + "</span>\n<p class=\"sub\">" + code(f.at("model").get<std::string>()) +
       "</p>\n</header>\n";
  h += "<section id=\"facts\">\n<h2>Facts</h2>\n" + facts_table(f) + "</section>\n";
  h += pareto_section(b) + sensitivity_section(b) + throughput_section(b) + candidates_section(b);
  h += tail_sections(f, b.at("generated_at").get<std::string>());
  return h + "</body>\n</html>\n";
}

}  // namespace qloom::perf
