#include "qloom/agent/assessment.h"

#include <cstdio>

#include "qloom/agent/artifact_schema.h"
#include "qloom/agent/yaml_json.h"
#include "qloom/build_info.h"
#include "qloom/core/format.h"

namespace qloom::agent {
namespace fs = std::filesystem;

namespace {

struct ArtifactDef {
  const char* file;
  const char* schema;  // "" = none
  const char* phase;   // the phase that writes it
};

constexpr ArtifactDef kArtifacts[] = {
    {"session_context.json", "session_context", "pre"},
    {"model_analysis.json", "model_analysis", "intake"},
    {"quant_plan.json", "quant_plan", "plan"},
    {"run_manifest.yaml", "run_manifest", "manifest"},
    {"validation_report.md", "", "validate"},
    {"validation_report.json", "", "validate"},
    {"source_eval.md", "", "eval"},
    {"quantized_eval.md", "", "eval"},
    {"eval_report.json", "eval_report", "eval"},
    {"eval_skipped.txt", "", "eval"},
    {"eval_gap_threshold.txt", "", "pre"},
    {"blocked.md", "", ""},
    {"requantize_attempts.txt", "", ""},
    {"last_phase.txt", "", ""},
};

std::string first_line(const std::string& s) {
  const auto n = s.find('\n');
  return n == std::string::npos ? s : s.substr(0, n);
}

nlohmann::ordered_json facts_of(const std::string& file, const nlohmann::json& j, const std::string& text) {
  nlohmann::ordered_json f = nlohmann::ordered_json::object();
  auto copy = [&](const char* k) {
    if (j.is_object() && j.contains(k)) f[k] = j[k];
  };
  if (file == "session_context.json") {
    copy("model");
    copy("quant_scheme");
    copy("kv_cache_dtype");
    copy("quant_algo");
    copy("metric_name");
  } else if (file == "model_analysis.json") {
    copy("model_type");
    copy("analysis_status");
    copy("compatibility");
    copy("num_hidden_layers");
    copy("estimated_linear_layers");
  } else if (file == "quant_plan.json") {
    copy("quant_scheme");
    copy("kv_cache_dtype");
    copy("quant_algo");
    copy("num_calib_data");
    copy("seq_len");
    copy("requires_confirmation");
  } else if (file == "run_manifest.yaml") {
    if (j.is_object() && j.contains("run")) {
      f["command_line"] = j["run"].value("command_line", "");
      f["status"] = j["run"].value("status", "");
    }
    if (j.is_object() && j.contains("outputs")) f["quantized_model_dir"] = j["outputs"].value("quantized_model_dir", "");
  } else if (file == "eval_report.json") {
    for (const char* k : {"metric_name", "source_score", "quantized_score", "relative_gap", "n", "gap_stderr"}) copy(k);
  } else if (file == "validation_report.md") {
    int fails = 0, oks = 0, skipped = 0;
    for (size_t at = 0; (at = text.find("**Step ", at)) != std::string::npos; ++at) {
      const auto colon = text.find("**:", at);
      if (colon == std::string::npos) break;
      const std::string rest = text.substr(colon + 3, 10);
      if (rest.find("FAIL") != std::string::npos) ++fails;
      else if (rest.find("ok") != std::string::npos) ++oks;
      else if (rest.find("skipped") != std::string::npos) ++skipped;
    }
    f["steps_ok"] = oks;
    f["steps_failed"] = fails;
    f["steps_skipped"] = skipped;
  } else if (!text.empty()) {
    f["first_line"] = first_line(text);
  }
  return f;
}

}  // namespace

nlohmann::ordered_json build_assessment(const AssessmentInput& in) {
  const Workspace& ws = *in.workspace;
  nlohmann::ordered_json a;
  a["qloom_version"] = build::kVersion;
  a["user_prompt"] = in.prompt;
  a["workspace"] = fs::absolute(ws.dir()).lexically_normal().string();
  a["interactive"] = interactive_name(in.options->interactive);
  if (in.options->quark_root) a["quark_root"] = in.options->quark_root->string();
  a["verdict"] = in.verdict;
  nlohmann::ordered_json outcome;
  if (in.final.outcome) {
    outcome["id"] = std::string(in.final.outcome->id);
    outcome["number"] = in.final.outcome->number;
    outcome["class"] = outcome_class_name(in.final.outcome->cls);
  } else {
    outcome["id"] = nullptr;
    outcome["number"] = nullptr;
    outcome["class"] = "success";
  }
  outcome["reason"] = in.final.reason;
  outcome["last_phase"] = in.final.last_phase;
  a["outcome"] = outcome;

  nlohmann::ordered_json attempts = nlohmann::ordered_json::array();
  for (const auto& r : in.attempts) {
    nlohmann::ordered_json at;
    at["attempt"] = r.attempt;
    at["outcome_id"] = r.outcome_id.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.outcome_id);
    at["reason"] = r.reason;
    at["fix_hypothesis"] = r.fix_written ? nlohmann::ordered_json(fix_hypothesis_file_name(r.attempt + 1))
                                         : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json phases = nlohmann::ordered_json::array();
    for (const auto& p : r.phases) phases.push_back({{"phase", p.phase}, {"seconds", p.seconds}});
    at["phases"] = phases;
    at["auto_recovered"] = r.recovered;
    at["notes"] = r.notes;
    attempts.push_back(at);
  }
  a["attempts"] = attempts;
  a["requantize_attempts"] = ws.requantize_attempts();
  a["max_requantize_attempts"] = in.options->max_requantize_attempts;

  const AttemptReport* last = in.attempts.empty() ? nullptr : &in.attempts.back();
  a["model"] = last && last->model.is_object() ? last->model : nlohmann::ordered_json(nullptr);
  a["validation"] = last && last->validation.is_object() ? last->validation : nlohmann::ordered_json(nullptr);
  a["eval"] = last && last->eval.is_object() ? last->eval : nlohmann::ordered_json(nullptr);

  nlohmann::ordered_json arts = nlohmann::ordered_json::array();
  std::vector<std::string> names;
  for (const auto& d : kArtifacts) names.push_back(d.file);
  std::error_code ec;
  std::vector<std::string> fixes;
  for (const auto& e : fs::directory_iterator(ws.dir(), ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("fix_hypothesis_attempt_", 0) == 0 || n.rfind("blocked_attempt_", 0) == 0) fixes.push_back(n);
  }
  std::sort(fixes.begin(), fixes.end());
  for (const auto& d : kArtifacts) {
    nlohmann::ordered_json e;
    e["file"] = d.file;
    const auto text = ws.read_text(d.file);
    e["present"] = text.has_value();
    nlohmann::json parsed;
    if (*d.schema && text) {
      try {
        parsed = std::string(d.file).ends_with(".yaml") ? nlohmann::json(yaml_to_json(*text, d.file))
                                                        : nlohmann::json::parse(*text);
        const auto v = check_artifact(d.schema, parsed);
        e["schema_valid"] = v.empty();
        if (!v.empty()) e["schema_errors"] = v.front().path + ": " + v.front().message;
      } catch (const std::exception& ex) {
        e["schema_valid"] = false;
        e["schema_errors"] = first_line(ex.what());
      }
    } else {
      e["schema_valid"] = nullptr;
    }
    e["facts"] = text ? facts_of(d.file, parsed, *text) : nlohmann::ordered_json::object();
    arts.push_back(e);
  }
  for (const auto& n : fixes) {
    const auto text = ws.read_text(n);
    arts.push_back({{"file", n}, {"present", true}, {"schema_valid", nullptr},
                    {"facts", {{"first_line", first_line(text.value_or(""))}}}});
  }
  if (last && !last->quantized_dir.empty()) {
    nlohmann::ordered_json e;
    e["file"] = last->quantized_dir;
    const bool present = fs::is_directory(last->quantized_dir, ec);
    e["present"] = present;
    e["schema_valid"] = nullptr;
    nlohmann::ordered_json f;
    uint64_t bytes = 0, shards = 0;
    bool config = false, tokenizer = false;
    if (present)
      for (const auto& x : fs::directory_iterator(last->quantized_dir, ec)) {
        if (!x.is_regular_file()) continue;
        const std::string n = x.path().filename().string();
        bytes += x.file_size();
        if (x.path().extension() == ".safetensors") ++shards;
        if (n == "config.json") config = true;
        if (n == "tokenizer.json" || n == "tokenizer_config.json" || n == "tokenizer.model" || n == "vocab.json")
          tokenizer = true;
      }
    f["bytes"] = bytes;
    f["safetensors_files"] = shards;
    f["config_json"] = config;
    f["tokenizer"] = tokenizer;
    e["facts"] = f;
    arts.push_back(e);
  }
  a["artifacts"] = arts;
  a["seconds"] = in.seconds;
  return a;
}

std::string render_summary(const nlohmann::ordered_json& a) {
  std::string s;
  char buf[512];
  auto line = [&](const char* k, const std::string& v) {
    std::string label = "  ";
    label += k;
    label.resize(std::max<size_t>(label.size() + 1, 21), ' ');
    s += label;
    s += v;
    s += '\n';
  };
  s += "\nqloom run — summary\n";
  line("asked", a.value("user_prompt", ""));
  const auto& m = a["model"];
  if (m.is_object()) {
    std::string done = m.value("quant_scheme", "");
    if (!m.value("kv_cache_dtype", "").empty()) done += " + " + m.value("kv_cache_dtype", "") + " KV cache";
    if (!m.value("quant_algo", "").empty()) done += " (" + m.value("quant_algo", "") + ")";
    line("done", done + ": " + std::to_string(m.value("layers_quantized", 0)) + " layers quantized, " +
                     std::to_string(m.value("layers_excluded", 0)) + " excluded");
    std::snprintf(buf, sizeof buf, "%s -> %s weights (%.2fx), %.3f bits/weight",
                  format_bytes(m.value("weights_bytes_before", uint64_t(0))).c_str(),
                  format_bytes(m.value("weights_bytes_after", uint64_t(0))).c_str(), m.value("size_ratio", 0.0),
                  m.value("bits_per_weight", 0.0));
    line("size", buf);
    line("source", m.value("source_dir", ""));
    line("quantized model", m.value("quantized_dir", ""));
  }
  const auto& o = a["outcome"];
  std::string oc = o["id"].is_null() ? std::string("none (success)")
                                     : o["id"].get<std::string>() + " (#" +
                                           (o["number"].is_null() ? std::string("-") : std::to_string(o["number"].get<int>())) +
                                           ", " + o.value("class", "") + ")";
  line("outcome", oc);
  if (!o.value("reason", "").empty()) line("reason", o.value("reason", ""));
  line("verdict", a.value("verdict", ""));
  const auto& v = a["validation"];
  if (v.is_object()) {
    std::string steps;
    for (const auto& st : v["steps"]) {
      if (!steps.empty()) steps += ", ";
      steps += std::to_string(st.value("step", 0));
      steps += ' ';
      steps += st.value("status", "");
    }
    line("validation", steps);
  }
  const auto& e = a["eval"];
  if (e.is_object()) {
    if (e.value("skipped", false)) {
      line("eval", "skipped: " + e.value("reason", ""));
    } else {
      std::snprintf(buf, sizeof buf, "%s: source %.6g, quantized %.6g, gap %.4f ± %.4f vs threshold %.4f (%s) -> %s (n=%lld)",
                    e.value("metric_name", "").c_str(), e.value("source_score", 0.0), e.value("quantized_score", 0.0),
                    e.value("relative_gap", 0.0), e.value("gap_stderr", 0.0), e.value("threshold", 0.0),
                    e.value("threshold_source", "").c_str(), e.value("verdict", "").c_str(),
                    static_cast<long long>(e.value("n", 0)));
      line("eval", buf);
    }
  }
  const auto& at = a["attempts"];
  for (const auto& x : at) {
    std::string ph;
    for (const auto& p : x["phases"]) {
      std::snprintf(buf, sizeof buf, "%s %.1fs", p.value("phase", "").c_str(), p.value("seconds", 0.0));
      if (!ph.empty()) ph += ", ";
      ph += buf;
    }
    line(("attempt " + std::to_string(x.value("attempt", 0))).c_str(),
         (x["outcome_id"].is_null() ? std::string("completed") : x["outcome_id"].get<std::string>()) + " — " + ph);
  }
  line("workspace", a.value("workspace", "") + " (assessment.json)");
  return s;
}

}  // namespace qloom::agent
