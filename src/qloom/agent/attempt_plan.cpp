// The attempt's plan and manifest phases: the quantization plan from the
// intent and the analysis (checkpoint 2, a fix hypothesis's overrides
// applied), then the exact command recorded in run_manifest.yaml
// (checkpoint 3, the execution gate). See attempt_runner.h.
#include <algorithm>
#include <string>
#include <system_error>

#include "qloom/agent/attempt_runner.h"
#include "qloom/agent/environment.h"
#include "qloom/agent/quant_plan.h"
#include "qloom/agent/run_manifest.h"

namespace qloom::agent::detail {
namespace fs = std::filesystem;

// ---- plan ----
void AttemptRunner::phase_plan() {
  enter("plan");
  plan_ = build_quant_plan(intent_, analysis_);
  if (fix_) {
    apply_fix(plan_, *fix_);
    plan_["resource_estimate"] = estimate_resources(analysis_, resource_request(plan_));
  }
  if (plan_.contains("open_questions"))
    for (const auto& q : plan_["open_questions"]) {
      const std::string field = q.value("field", "");
      if (field == "model") continue;  // asked at intake
      ask_open_question(field, q.value("question", ""), "plan");
    }
  for (int tries = 0;; ++tries) {
    ws_.write_json("quant_plan.json", plan_, "quant_plan");
    try {
      ws_.read_json("quant_plan.json", "quant_plan");
      break;
    } catch (const Error& e) {
      if (tries >= 1) throw StopAttempt{"plan_artifact_invalid_or_missing", error_text(e), {}};
      recovered("plan_artifact_invalid_or_missing", "quant_plan.json did not read back; plan re-run");
    }
  }
  const Answer a = run_checkpoint(cio_, "plan", "quantization plan", render_plan_table(plan_),
                                  "Confirm this plan, or say what to change?");
  decide("plan", a);
  plan_["requires_confirmation"] = false;
  ws_.write_json("quant_plan.json", plan_, "quant_plan");
}

// Applies fix_hypothesis plan_overrides to the plan (flat fields and the
// decision rows), recording the source.
void AttemptRunner::apply_fix(nlohmann::ordered_json& plan, const FixHypothesis& f) {
  const std::string why = "fix_hypothesis_attempt_" + std::to_string(f.attempt) + ".md: " + f.root_cause;
  for (const auto& [k, v] : f.plan_overrides.items()) {
    if (k == "threads") {
      fix_threads_ = v.get<unsigned>();
      continue;
    }
    if (k == "eval_time_budget_s") {
      fix_eval_budget_ = v.get<double>();
      continue;
    }
    if (k == "overwrite_output") {
      fix_overwrite_ = v.get<bool>();
      continue;
    }
    std::string decision = k;
    if (k == "exclude_layers") {
      for (const auto& e : v) plan["exclude_layers"].push_back(e);
    } else {
      plan[k] = v;
    }
    if (k == "quant_algo") decision = "algorithm";
    if (plan.contains("decisions"))
      for (auto& d : plan["decisions"])
        if (d.value("decision", "") == decision || d.value("decision", "") == k) {
          d["value"] = plan[k];
          d["reason"] = why;
          if (d.contains("source")) d["source"] = "fix";
        }
  }
  report_.notes.push_back("applied " + fix_hypothesis_file_name(f.attempt) + ": " + f.plan_overrides.dump());
}

ResourceRequest AttemptRunner::resource_request(const nlohmann::json& plan) {
  ResourceRequest r;
  auto str = [&](const char* k) { return plan.contains(k) && plan[k].is_string() ? plan[k].get<std::string>() : std::string(); };
  r.quant_scheme = str("quant_scheme");
  r.kv_cache_dtype = str("kv_cache_dtype");
  r.quant_algo = str("quant_algo");
  if (plan.contains("exclude_layers"))
    for (const auto& e : plan["exclude_layers"]) r.exclude_layers.push_back(e.get<std::string>());
  if (plan.contains("layer_quant_scheme") && plan["layer_quant_scheme"].is_object())
    for (const auto& [k, v] : plan["layer_quant_scheme"].items()) r.layer_quant_scheme.emplace_back(k, v.get<std::string>());
  r.num_calib_data = plan.value("num_calib_data", r.num_calib_data);
  r.seq_len = plan.value("seq_len", r.seq_len);
  return r;
}

// The memory budget: RunOptions::memory_limit_bytes, available memory and
// the cgroup limit, whichever is smallest; nullopt when none is known.
std::optional<uint64_t> AttemptRunner::memory_budget() const {
  std::optional<uint64_t> b = usable_memory_bytes(environment_);
  if (opts_.memory_limit_bytes) b = b ? std::min(*b, *opts_.memory_limit_bytes) : *opts_.memory_limit_bytes;
  return b;
}

// ---- manifest ----
void AttemptRunner::phase_manifest() {
  enter("manifest");
  const fs::path out = fs::absolute(plan_.value("output_dir", "")).lexically_normal();
  if (under(out, source_dir_) && !source_dir_.empty())
    throw StopAttempt{"checkpoint_aborted", "the output directory " + out.string() +
                                                " is inside the source model directory, which qloom never writes",
                      {}};
  const bool overwrite = may_replace_output(out);
  cmd_ = command_from_plan(plan_, model_arg_, analysis_["model"].value("model_type", ""), overwrite);
  quantized_dir_ = cmd_.options.output_dir;
  const unsigned threads = fix_threads_ ? *fix_threads_ : opts_.threads;
  cmd_.options.threads = threads;
  const nlohmann::json estimates = plan_.contains("resource_estimate") ? nlohmann::json(plan_["resource_estimate"])
                                                                        : nlohmann::json::object();
  write_manifest_checked(estimates);
  confirm_manifest(overwrite, estimates);
}

// Whether the quantize command may replace `out`: a fix asked for it, the
// directory is absent, or this workspace's own earlier run wrote it;
// otherwise the operator is asked (an open question).
bool AttemptRunner::may_replace_output(const fs::path& out) {
  bool overwrite = fix_overwrite_;
  std::error_code ec;
  if (fs::exists(out, ec) && !overwrite) {
    // An output this workspace's own earlier run wrote may be replaced.
    try {
      const auto prev = read_run_manifest(ws_.dir());
      overwrite = prev["outputs"]["quantized_model_dir"] == out.string();
    } catch (const Error&) {
    }
    if (!overwrite)
      ask_open_question("output_dir", "The output directory " + out.string() +
                                          " already exists and was not written by this workspace; may I replace it, "
                                          "or where else should the model go?",
                        "plan");
  }
  return overwrite;
}

// run_manifest.yaml for cmd_, written and read back (regenerated once when
// it does not read back).
void AttemptRunner::write_manifest_checked(const nlohmann::json& estimates) {
  ManifestInputs in;
  in.model = intent_.model.value;
  in.model_source = model_source_;
  in.model_path = config_dir_;
  in.workspace = fs::absolute(ws_.dir()).lexically_normal();
  in.attempt = report_.attempt;
  auto cps = default_checkpoints();
  for (auto& c : cps)
    if (decisions_.count(c.id)) c.decision = decisions_[c.id];
  for (int tries = 0;; ++tries) {
    manifest_ = build_run_manifest(in, cmd_, cps, environment_, estimates);
    write_run_manifest(ws_.dir(), manifest_);
    try {
      manifest_ = read_run_manifest(ws_.dir());
      break;
    } catch (const Error& e) {
      if (tries >= 1) throw StopAttempt{"manifest_artifact_invalid_or_missing", error_text(e), {}};
      recovered("manifest_artifact_invalid_or_missing", "run_manifest.yaml did not read back; regenerated");
    }
  }
}

// Checkpoint 3, the execution gate: the exact command and its destination.
void AttemptRunner::confirm_manifest(bool overwrite, const nlohmann::json& estimates) {
  std::string facts = "command:\n  " + manifest_["run"]["command_line"].get<std::string>() + "\n";
  facts += "destination: " + cmd_.options.output_dir.string() + (overwrite ? " (replaces this workspace's earlier output)" : "") + "\n";
  facts += "expected outputs: config.json with quantization_config, *.safetensors, tokenizer + auxiliary files\n";
  facts += "remote code: never executed\n";
  facts += "estimates: " + render_estimates(estimates) + "\n";
  facts += "workspace: " + ws_.dir().string() + "\n";
  const Answer a = run_checkpoint(cio_, "manifest", "execution gate", facts, "Shall I run this exact command?");
  decide("manifest", a);
  set_checkpoint_decision(manifest_, "intake", decisions_["intake"]);
  set_checkpoint_decision(manifest_, "plan", decisions_["plan"]);
  set_checkpoint_decision(manifest_, "manifest", decisions_["manifest"]);
  write_run_manifest(ws_.dir(), manifest_);
}

std::string AttemptRunner::render_estimates(const nlohmann::json& e) {
  if (!e.is_object() || e.empty()) return "(none)";
  std::string s;
  for (const auto& [k, v] : e.items()) {
    if (v.is_object() && v.contains("human")) s += k + " " + v["human"].get<std::string>() + "; ";
    else if (v.is_string()) s += k + " " + v.get<std::string>() + "; ";
  }
  return s.empty() ? e.dump() : s.substr(0, s.size() - 2);
}

}  // namespace qloom::agent::detail
