#include "qloom/perf/report_markdown.h"

#include "qloom/perf/report_facts.h"
#include "qloom/perf/report_format.h"
#include "qloom/perf/report_markdown_internal.h"

namespace qloom::perf {

using Json = nlohmann::ordered_json;

std::string md_result_line(const Json& f) {
  return "**" + md_text(f.at("result").get<std::string>()) + "** — terminal stage " +
         md_code(f.at("terminal_stage").get<std::string>()) + ", path " + md_code(f.at("path").get<std::string>());
}

std::string md_gap_line(const Json& a) {
  if (a.is_null()) return "not run";
  std::string s = fmt_percent(a.at("gap").get<double>(), 2) + " ± " + fmt_percent(a.at("stderr").get<double>(), 2) +
                  " (n = " + display(a.at("n")) + ") against a threshold of " +
                  fmt_percent(a.at("threshold").get<double>(), 2) + ": " +
                  (a.at("passed").get<bool>() ? "passed" : "failed");
  if (a.at("verdict").is_string()) s += " (verdict " + md_text(a.at("verdict").get<std::string>()) + ")";
  return s;
}

std::string md_gain_line(const Json& p) {
  const std::string mode = p.at("mode").get<std::string>();
  if (mode == "off") return "not applicable (--performance-mode off)";
  if (p.at("gain").is_null()) {
    const std::string st = p.at("status").get<std::string>();
    return st == "measurement_failed" ? "not measured (the measurement failed)"
                                      : "not run (the session ended before the throughput stage; status " +
                                            md_code(st) + ")";
  }
  std::string s = "**" + fmt_fixed(p.at("gain").get<double>(), 2) + "x**";
  if (p.at("target_gain").is_number())
    s += " (target " + fmt_fixed(p.at("target_gain").get<double>(), 2) + "x: " +
         (p.at("target_met").get<bool>() ? "met" : "missed") + ")";
  if (p.at("runtime").is_string()) s += " on runtime " + md_code(p.at("runtime").get<std::string>());
  if (p.at("abba").is_object()) s += ", ABBA order";
  return s;
}

namespace mdr {

std::string heading(const std::string& text, int level) { return std::string(size_t(level), '#') + " " + text + "\n\n"; }

std::string accuracy_table(const Json& a) {
  if (a.is_null()) return "Not run: the session ended before the real accuracy gate.\n\n";
  MdTable t{{"Task", "Metric", "Baseline", "Quantized", "Gap", "", "Stderr", "Threshold", "n", "Passed"},
            "llrrrcrrrc",
            {}};
  t.rows.push_back({md_cell(a.at("task")), md_cell(a.at("metric")), md_num(a.at("baseline"), 4),
                    md_num(a.at("quantized"), 4), fmt_percent(a.at("gap").get<double>(), 2), "±",
                    fmt_percent(a.at("stderr").get<double>(), 2), fmt_percent(a.at("threshold").get<double>(), 2),
                    display(a.at("n")), display(a.at("passed"))});
  return t.str() + "\nGap " + md_gap_line(a) + "; attempts: " + display(a.at("attempts")) + ".\n\n";
}

std::string winner_line(const Json& f) {
  const Json& b = f.at("best_candidate");
  if (b.is_null()) return "none (no candidate passed the gate)";
  std::string s = md_code(config_label(b.at("config")));
  if (b.at("kind") == "fixed_recipe" && b.at("quant_strategy").is_string())
    s = "fixed recipe " + md_code(b.at("quant_strategy").get<std::string>()) + " → " + s;
  std::string extra;
  if (b.at("rank").is_number()) extra += "rank " + display(b.at("rank"));
  if (b.at("bits_per_weight").is_number())
    extra += (extra.empty() ? "" : ", ") + fmt_fixed(b.at("bits_per_weight").get<double>(), 3) + " bits/weight";
  return extra.empty() ? s : s + " (" + extra + ")";
}

std::string search_line(const Json& f) {
  const Json& s = f.at("search");
  if (f.at("path") == "direct_ptq") return "not applicable (fixed recipe)";
  if (s.is_null()) return "not run";
  std::string out = md_text(s.at("status").get<std::string>()) + ": " + display(s.at("total_configs_evaluated")) +
                    " of " + display(s.at("total_configs_available")) + " configurations evaluated";
  if (s.at("search_time_seconds").is_number())
    out += " in " + fmt_fixed(s.at("search_time_seconds").get<double>(), 1) + " s";
  out += ", " + display(s.at("gated")) + " of " + display(s.at("candidates")) + " queued candidates gated";
  if (s.at("termination_reason").is_string()) out += "; termination " + md_code(s.at("termination_reason").get<std::string>());
  return out;
}

std::string throughput_table(const Json& p) {
  if (p.at("baseline_tokens_per_s").is_null() && p.at("quantized_tokens_per_s").is_null()) return "";
  MdTable t{{"Model", "tokens/s"}, "lr", {}};
  t.rows.push_back({"baseline", md_num(p.at("baseline_tokens_per_s"), 1)});
  t.rows.push_back({"quantized", md_num(p.at("quantized_tokens_per_s"), 1)});
  return t.str() + "\n";
}

std::string reproduce_block(const Json& r) {
  std::string s = md_code_block(r.at("command").get<std::string>(), "sh") + "\nResume (same command, same session):\n\n" +
                  md_code_block(r.at("resume").get<std::string>(), "sh");
  if (r.at("report").is_string())
    s += "\nRebuild these reports without re-running work:\n\n" + md_code_block(r.at("report").get<std::string>(), "sh");
  return s + "\n";
}

std::string warnings_list(const Json& w) {
  if (w.empty()) return "None.\n\n";
  std::string s;
  for (const auto& x : w) s += "- " + md_text(x.get<std::string>()) + "\n";
  return s + "\n";
}

std::string summary_table(const Json& f) {
  MdTable t{{"Fact", "Value"}, "ll", {}};
  t.rows.push_back({"Model", md_code(f.at("model").get<std::string>())});
  if (f.at("base_model") != f.at("model")) t.rows.push_back({"Base model", md_code(f.at("base_model").get<std::string>())});
  t.rows.push_back({"Winner", winner_line(f)});
  t.rows.push_back({"Checkpoint", f.at("quant_ckpt_dir").is_string() ? md_code(f.at("quant_ckpt_dir").get<std::string>())
                                                                    : "none"});
  t.rows.push_back({"Accuracy gap", md_gap_line(f.at("accuracy"))});
  t.rows.push_back({"Search", search_line(f)});
  t.rows.push_back({"Gain", md_gain_line(f.at("performance"))});
  return t.str() + "\n";
}

}  // namespace mdr

std::string render_final_md(const Json& final_facts) {
  const Json& f = check_final_facts(final_facts, "final.json");
  using namespace mdr;
  std::string s = heading("qloom perf — session " + md_code(f.at("session_id").get<std::string>()), 1);
  s += "Result: " + md_result_line(f) + ".\n\n" + summary_table(f);
  s += heading("Accuracy gate", 2) + accuracy_table(f.at("accuracy"));
  s += heading("Throughput", 2) + throughput_table(f.at("performance")) + "Gain: " + md_gain_line(f.at("performance")) + ".\n\n";
  s += heading("Reproduce", 2) + reproduce_block(f.at("reproduction"));
  s += heading("Warnings", 2) + warnings_list(f.at("warnings"));
  s += "qloom " + md_text(f.at("versions").at("qloom").get<std::string>()) + " (" +
       md_code(f.at("versions").at("git_commit").get<std::string>()) + "), generated " +
       md_text(f.value("generated_at", std::string("—"))) + ".\n";
  return s;
}

}  // namespace qloom::perf
