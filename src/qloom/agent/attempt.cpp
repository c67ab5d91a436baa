// One attempt of the phase chain. See attempt.h and workflow.h.
#include "qloom/agent/attempt.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <new>
#include <sstream>
#include <system_error>

#include "qloom/agent/checkpoint.h"
#include "qloom/agent/environment.h"
#include "qloom/agent/eval_phase.h"
#include "qloom/agent/intent.h"
#include "qloom/agent/model_analysis.h"
#include "qloom/agent/outcomes.h"
#include "qloom/agent/quant_plan.h"
#include "qloom/agent/quantized_dir_repair.h"
#include "qloom/agent/resource_estimate.h"
#include "qloom/agent/run_manifest.h"
#include "qloom/build_info.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/job/quantize_args.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/hub.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/hub_error.h"
#include "qloom/model/gguf_convert.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/report.h"
#include "qloom/validate/self_test.h"
#include "qloom/validate/validator.h"

namespace qloom::agent {
namespace fs = std::filesystem;

namespace {

// Stops the attempt with an outcome (and, for the retry class, a fix).
struct StopAttempt {
  std::string outcome_id;
  std::string reason;
  std::optional<FixHypothesis> fix;
};

// Size fields of config.json against the safetensors headers present
// (io/config_sizes.h; headers only, never tensor data), before the analysis
// derives layers from them: a config claiming more layers than the weights
// hold cannot be loaded, whatever the plan.
void check_sizes_against_weights(const fs::path& dir) {
  try {
    const io::ModelDir d = io::ModelDir::open(dir);
    if (!d.weight_files().empty()) (void)d.weights();
  } catch (const Error& e) {
    // Only the size check's own error (io/config_sizes.h: "config.json <field> = ...").
    if (e.kind() == ErrorKind::kInvalidInput && e.message().rfind("config.json ", 0) == 0)
      throw StopAttempt{"exec_model_load_failed", "the model's config.json does not match its weights: " + e.message(), {}};
    // Other problems with the weights are found (and classified) where they are read.
  }
}



// Thrown by a checkpoint answer that changes the intent: restart from a phase.
struct Restart {
  std::string from;  // "intake" or "plan"
};

std::string flatten_newlines(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string error_text(const Error& e) {
  std::string s = e.what();
  return flatten_newlines(s);
}

bool under(const fs::path& p, const fs::path& dir) {
  if (p.empty() || dir.empty()) return false;
  const auto a = fs::absolute(p).lexically_normal().string();
  const auto d = fs::absolute(dir).lexically_normal().string();
  return a == d || a.rfind(d.back() == '/' ? d : d + "/", 0) == 0;
}

class AttemptRunner {
 public:
  AttemptRunner(const std::string& prompt, const RunOptions& opts, const Workspace& ws, int attempt,
                const std::optional<FixHypothesis>& fix)
      : prompt_(prompt), opts_(opts), ws_(ws), fix_(fix), log_(opts.log ? *opts.log : std::cerr) {
    report_.attempt = attempt;
    cio_.in = opts.in;
    cio_.out = &log_;
    cio_.interactive = resolve_interactive(opts.interactive, opts.stdin_is_tty) == Interactive::kOn;
  }

  AttemptReport run() {
    try {
      timed("pre", [&] { phase_pre(); });
      std::string from = "intake";
      for (int restarts = 0;; ++restarts) {
        if (restarts > 20) throw StopAttempt{"checkpoint_aborted", "too many changes at the checkpoints (20)", {}};
        try {
          if (from == "intake") timed("intake", [&] { phase_intake(); });
          timed("plan", [&] { phase_plan(); });
          timed("manifest", [&] { phase_manifest(); });
          timed("exec", [&] { phase_exec(); });
          timed("export", [&] { phase_export(); });
          timed("validate", [&] { phase_validate(); });
          break;
        } catch (const Restart& r) {
          from = r.from;
        }
      }
      timed("eval", [&] { phase_eval(); });
      self_check();
    } catch (const StopAttempt& s) {
      stop(s);
    } catch (const std::bad_alloc&) {
      stop({ws_.last_phase() == "eval" ? "eval_oom" : "exec_oom", "out of memory in the " + ws_.last_phase() + " phase", {}});
    } catch (const Error& e) {
      // A qloom bug (kInternal) needs a change of qloom itself, not of the workspace.
      if (e.kind() == ErrorKind::kInternal)
        stop({"upstream_change_required", "a qloom bug in the " + ws_.last_phase() + " phase (report it): " + error_text(e), {}});
      else
        stop({"unclassified_failure", "in the " + ws_.last_phase() + " phase: " + error_text(e), {}});
    } catch (const std::exception& e) {
      stop({"unclassified_failure", "in the " + ws_.last_phase() + " phase: internal error: " + flatten_newlines(e.what()), {}});
    }
    return report_;
  }

 private:
  template <class F>
  void timed(const char* phase, F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    auto record = [&] {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (auto& p : report_.phases)
        if (p.phase == phase) {
          p.seconds += s;
          return;
        }
      report_.phases.push_back({phase, s});
    };
    try {
      f();
    } catch (...) {
      record();
      throw;
    }
    record();
  }

  void stop(const StopAttempt& s) {
    report_.outcome_id = s.outcome_id;
    report_.reason = s.reason;
    try {
      ws_.write_blocked(s.outcome_id, s.reason);
      const OutcomeInfo* info = find_outcome(s.outcome_id);
      if (s.fix && info && info->cls == OutcomeClass::kRetry) {
        FixHypothesis f = *s.fix;
        f.attempt = report_.attempt + 1;
        ws_.write_text(fix_hypothesis_file_name(f.attempt), render_fix_hypothesis(f));
        report_.fix_written = true;
      }
    } catch (const Error& e) {
      report_.notes.push_back("could not record the outcome in the workspace: " + error_text(e));
    }
    log_ << "qloom run: attempt " << report_.attempt << " stopped: " << s.outcome_id << ": " << s.reason << "\n";
  }

  void enter(const char* phase) {
    ws_.set_phase(phase);
    if (opts_.on_phase) opts_.on_phase(phase, report_.attempt, ws_.dir(), quantized_dir_);
  }

  void recovered(const std::string& id, const std::string& what) {
    report_.recovered.push_back(id + ": " + what);
    log_ << "qloom run: auto-recover " << id << ": " << what << "\n";
  }

  // Asks an open question (interactive) or stops with checkpoint_aborted.
  void ask_open_question(const std::string& field, const std::string& question, const char* restart_from) {
    if (!cio_.interactive)
      throw StopAttempt{"checkpoint_aborted", "open question (" + field + "): " + question +
                                                  " Restate the request with the answer (interactive=off cannot ask).",
                        {}};
    const Answer a = run_checkpoint(cio_, restart_from, "a question", question, "Your answer?");
    if (a.kind != AnswerKind::kChange)
      throw StopAttempt{"checkpoint_aborted", "open question (" + field + ") not answered: " + question, {}};
    apply_change(a.text, restart_from);
  }

  void apply_change(const std::string& text, const std::string& at) {
    const Intent before = intent_;
    intent_ = apply_intent_change(intent_, text, ictx_);
    log_ << "[quark-checkpoint] change applied: \"" << text << "\"\n";
    changes_.push_back(at + ": " + text);
    write_session_context();
    const bool model_changed = before.model.value != intent_.model.value || before.model_path != intent_.model_path;
    throw Restart{model_changed || at == "intake" ? "intake" : "plan"};
  }

  void write_session_context() {
    nlohmann::ordered_json j = to_json(intent_);
    j["workspace"] = fs::absolute(ws_.dir()).lexically_normal().string();
    j["attempt_number"] = report_.attempt;
    j["interactive"] = interactive_name(opts_.interactive);
    if (opts_.acceptable_eval_gap) j["acceptable_eval_gap"] = *opts_.acceptable_eval_gap;
    else j["acceptable_eval_gap"] = nullptr;  // resolved at eval: eval_gap_threshold.txt, then 0.03
    j["max_requantize_attempts"] = opts_.max_requantize_attempts;
    j["qloom_version"] = build::kVersion;
    ws_.write_json("session_context.json", j, "session_context");
  }

  // ---- pre ----
  void phase_pre() {
    enter("pre");
    ictx_.demo_model_dir = bundled_demo_model().string();
    ictx_.output_root = fs::absolute(ws_.dir()).lexically_normal().string();
    if (opts_.model_root) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(*opts_.model_root, ec))
        if (e.is_directory()) ictx_.local_model_dirs.push_back(e.path().string());
      std::sort(ictx_.local_model_dirs.begin(), ictx_.local_model_dirs.end());
    }
    intent_ = parse_intent(prompt_, ictx_);
    if (intent_.quant_scheme.source == Source::kDefault && !intent_.quant_scheme.value.empty())
      recovered("intent_parse_failed", "the prompt names no scheme; the default " + intent_.quant_scheme.value +
                                           " is taken (" + intent_.reasons["quant_scheme"] + ")");
    if (intent_.output_dir.source == Source::kDefault)
      recovered("intent_parse_failed", "the prompt names no output directory; " + intent_.output_dir.value);
    write_session_context();
    // Seed 000 §5.4: the prompt's tolerance goes to eval_gap_threshold.txt before eval.
    if (intent_.eval_gap_threshold.value) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g\n", *intent_.eval_gap_threshold.value);
      ws_.write_text("eval_gap_threshold.txt", buf);
    }
  }

  // ---- intake ----
  void phase_intake() {
    enter("intake");
    for (const auto& q : intent_.open_questions)
      if (q.field == "model") ask_open_question(q.field, q.question, "intake");
    const std::string spec = intent_.model.value;
    if (spec.empty()) ask_open_question("model", "Which model should I quantize (a Hugging Face id or a local directory)?", "intake");
    if (intent_.model_kind == "hub") {
      try {
        io::HubResolveOptions ho;
        ho.fetch = io::HubFetch::kConfigOnly;
        ho.log = &log_;
        ho.log_is_tty = opts_.log_is_tty;
        config_dir_ = io::resolve_model_path(spec, ho);
      } catch (const io::HubError& e) {
        const auto& o = outcome_for_hub_failure(e.failure(), "intake");
        throw StopAttempt{std::string(o.id), error_text(e), {}};
      }
      model_source_ = "hub";
      model_arg_ = spec;
    } else {
      fs::path p = intent_.model_path.empty() ? fs::path(spec) : fs::path(intent_.model_path);
      p = fs::absolute(p).lexically_normal();
      std::error_code ec;
      if (model::is_gguf_file(p)) {
        intake_gguf(p);
        return;
      }
      if (!fs::is_directory(p, ec))
        throw StopAttempt{"model_path_unreachable", p.string() + " is not a readable directory", {}};
      if (!fs::exists(p / "config.json", ec))
        throw StopAttempt{"model_path_unreachable", (p / "config.json").string() + " does not exist", {}};
      config_dir_ = p;
      source_dir_ = p;
      model_source_ = intent_.model_kind == "demo" ? "demo" : "local";
      model_arg_ = p.string();
    }
    report_.source_dir = model_source_ == "hub" ? spec : source_dir_.string();
    finish_intake([&] { return analyze_model(spec, config_dir_, environment_); });
  }

  // A .gguf file: the analysis reads its metadata only (config.json built in
  // memory); exec converts it once into the GGUF cache and quantizes that.
  void intake_gguf(const fs::path& p) {
    const std::string spec = intent_.model.value;
    gguf_path_ = p;
    config_dir_ = p;
    source_dir_ = p.parent_path();  // the directory qloom must not write into
    model_source_ = "local";
    model_arg_ = p.string();
    report_.source_dir = p.string();
    finish_intake([&] {
      return analyze_config(model::gguf_config_json(p), p.string(), spec, "local", p.string(), environment_);
    });
  }

  template <class Analyze>
  void finish_intake(Analyze analyze) {
    if (environment_.is_null()) environment_ = collect_environment_json();
    check_sizes_against_weights(config_dir_);
    for (int tries = 0;; ++tries) {
      try {
        analysis_ = analyze();
      } catch (const Error& e) {
        throw StopAttempt{"model_path_unreachable", "intake cannot read the model's config: " + error_text(e), {}};
      }
      ws_.write_json("model_analysis.json", analysis_, "model_analysis");
      try {
        analysis_ = ws_.read_json("model_analysis.json", "model_analysis");
        break;
      } catch (const Error& e) {
        if (tries >= 1) throw StopAttempt{"analysis_artifact_invalid_or_missing", error_text(e), {}};
        recovered("analysis_artifact_invalid_or_missing", "model_analysis.json did not read back; intake re-run");
      }
    }
    const Answer a = run_checkpoint(cio_, "intake", "model analysis", render_analysis_summary(analysis_),
                                    "Is this model analysis correct?");
    decide("intake", a);
    if (analysis_.value("compatibility", "") == "unsupported") {
      std::string why;
      if (analysis_.contains("risks"))
        for (const auto& r : analysis_["risks"])
          if (r.value("severity", "") == "high") why += " " + r.value("message", r.value("id", "")) + ";";
      ask_open_question("model", "The model cannot be quantized as it is:" + why +
                                     " Which model (or which fix) should I use instead?",
                        "intake");
    }
  }

  void decide(const std::string& id, const Answer& a) {
    if (a.kind == AnswerKind::kYes) {
      decisions_[id] = cio_.interactive ? "accepted" : "auto-accepted";
      return;
    }
    if (a.kind == AnswerKind::kNo) {
      decisions_[id] = "declined";
      throw StopAttempt{"checkpoint_aborted", "the operator declined at the " + id + " checkpoint", {}};
    }
    decisions_[id] = "changed: " + a.text;
    apply_change(a.text, id == "intake" ? "intake" : "plan");
  }

  // ---- plan ----
  void phase_plan() {
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
  void apply_fix(nlohmann::ordered_json& plan, const FixHypothesis& f) {
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

  static ResourceRequest resource_request(const nlohmann::json& plan) {
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
  std::optional<uint64_t> memory_budget() const {
    std::optional<uint64_t> b = usable_memory_bytes(environment_);
    if (opts_.memory_limit_bytes) b = b ? std::min(*b, *opts_.memory_limit_bytes) : *opts_.memory_limit_bytes;
    return b;
  }

  // ---- manifest ----
  void phase_manifest() {
    enter("manifest");
    const fs::path out = fs::absolute(plan_.value("output_dir", "")).lexically_normal();
    if (under(out, source_dir_) && !source_dir_.empty())
      throw StopAttempt{"checkpoint_aborted", "the output directory " + out.string() +
                                                  " is inside the source model directory, which qloom never writes",
                        {}};
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
    cmd_ = command_from_plan(plan_, model_arg_, analysis_["model"].value("model_type", ""), overwrite);
    quantized_dir_ = cmd_.options.output_dir;
    const unsigned threads = fix_threads_ ? *fix_threads_ : opts_.threads;
    cmd_.options.threads = threads;
    ManifestInputs in;
    in.model = intent_.model.value;
    in.model_source = model_source_;
    in.model_path = config_dir_;
    in.workspace = fs::absolute(ws_.dir()).lexically_normal();
    in.attempt = report_.attempt;
    auto cps = default_checkpoints();
    for (auto& c : cps)
      if (decisions_.count(c.id)) c.decision = decisions_[c.id];
    const nlohmann::json estimates = plan_.contains("resource_estimate") ? nlohmann::json(plan_["resource_estimate"])
                                                                          : nlohmann::json::object();
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

  static std::string render_estimates(const nlohmann::json& e) {
    if (!e.is_object() || e.empty()) return "(none)";
    std::string s;
    for (const auto& [k, v] : e.items()) {
      if (v.is_object() && v.contains("human")) s += k + " " + v["human"].get<std::string>() + "; ";
      else if (v.is_string()) s += k + " " + v.get<std::string>() + "; ";
    }
    return s.empty() ? e.dump() : s.substr(0, s.size() - 2);
  }

  // ---- exec ----
  void phase_exec() {
    enter("exec");
    // Exactly the recorded command, through the same parser as `qloom quantize`.
    const auto manifest = read_run_manifest(ws_.dir());
    recorded_args_ = manifest_quantize_args(manifest);
    job::QuantizeCommand qc = job::parse_quantize_args(recorded_args_);
    check_algo_config_files(manifest);
    job::QuantizeOptions o = qc.options;
    if (model_source_ == "hub") {
      try {
        io::HubResolveOptions ho;
        ho.fetch = io::HubFetch::kModel;
        ho.log = &log_;
        ho.log_is_tty = opts_.log_is_tty;
        source_dir_ = io::resolve_model_path(o.model_dir.string(), ho);
      } catch (const io::HubError& e) {
        const auto& oc = outcome_for_hub_failure(e.failure(), "exec");
        fail_run(e);
        throw StopAttempt{std::string(oc.id), error_text(e), {}};
      }
      report_.source_dir = source_dir_.string();
    }
    if (!gguf_path_.empty()) {
      try {
        source_dir_ = model::resolve_gguf_model(gguf_path_, &log_);
      } catch (const Error& e) {
        fail_run(e);
        throw StopAttempt{"model_path_unreachable", "cannot convert " + gguf_path_.string() + ": " + error_text(e), {}};
      }
      report_.source_dir = source_dir_.string();
    }
    o.model_dir = source_dir_;
    quantized_dir_ = o.output_dir;
    // The plan's peak-memory estimate against the budget: stop before a run
    // that cannot fit (exec_oom), with the smaller calibration as the fix.
    if (const auto budget = memory_budget(); budget && plan_.contains("resource_estimate")) {
      const auto& pm = plan_["resource_estimate"]["peak_memory"];
      if (pm.is_object() && pm["bytes"].is_number_unsigned() && pm["bytes"].get<uint64_t>() > *budget) {
        const uint64_t peak = pm["bytes"].get<uint64_t>();
        fail_run_text("out of memory (predicted): peak " + format_bytes(peak) + " > budget " + format_bytes(*budget), 3);
        throw exec_oom(o, "the plan's peak-memory estimate " + format_bytes(peak) + " exceeds the memory budget " +
                              format_bytes(*budget));
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const bool show = opts_.log_is_tty;
    try {
      summary_ = job::quantize_model(
          o,
          show ? job::ProgressFn([this](const job::TensorProgress& p) {
            char line[256];
            std::snprintf(line, sizeof line, "[%zu/%zu] %-48s %5s -> %-10s ETA %s\n", p.index, p.total, p.name.c_str(),
                          p.from.c_str(), p.to.c_str(), format_duration(p.eta_seconds).c_str());
            log_ << line << std::flush;
          })
               : job::ProgressFn(),
          show ? job::CalibrationProgressFn([this](size_t done, size_t total, double s) {
            log_ << "[calibration " << done << "/" << total << "] " << format_duration(s) << "\n" << std::flush;
          })
               : job::CalibrationProgressFn());
    } catch (const std::system_error& e) {
      // Thread or mapping creation refused for lack of memory is an OOM too.
      if (e.code() != std::errc::resource_unavailable_try_again && e.code() != std::errc::not_enough_memory) throw;
      throw exec_oom(o, "thread or memory creation refused: " + std::string(e.what()));
    } catch (const std::bad_alloc&) {
      throw exec_oom(o, "an allocation failed");
    } catch (const Error& e) {
      fail_run(e);
      throw classify_exec_error(e, o);
    }
    exec_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  StopAttempt exec_oom(const job::QuantizeOptions& o, const std::string& what) {
    {
      if (manifest_.contains("run") && manifest_["run"].value("status", "") == "pending") fail_run_text("out of memory: " + what, 3);
      const bool calibrated = plan_.value("needs_calibration", false) && o.num_calib_data > 1;
      if (!calibrated)
        return StopAttempt{"exec_oom", "out of memory while quantizing (" + o.quant_scheme + "): " + what +
                                           "; no calibration to shrink, so no fix this workspace can apply",
                           {}};
      FixHypothesis f;
      f.root_cause = "Quantization ran out of memory with " + std::to_string(o.num_calib_data) + " calibration samples of " +
                     std::to_string(o.seq_len) + " tokens.";
      const uint64_t n = std::max<uint64_t>(1, o.num_calib_data / 2);
      f.actions = {"halve --num_calib_data to " + std::to_string(n) + " (calibration activations scale with it)",
                   "use 1 worker thread to lower per-thread buffers"};
      f.risk = "static scales and algorithm statistics from fewer samples are noisier; the accuracy gap may grow";
      f.plan_overrides = {{"num_calib_data", n}, {"threads", 1}, {"overwrite_output", true}};
      return StopAttempt{"exec_oom", "out of memory while quantizing (" + o.quant_scheme + "): " + what, f};
    }
  }

  StopAttempt classify_exec_error(const Error& e, const job::QuantizeOptions& o) {
    const std::string file = e.file(), item = e.item(), text = error_text(e);
    const bool dataset = item.find("dataset") != std::string::npos || item.find("calib") != std::string::npos ||
                         (!o.dataset.empty() && file == o.dataset) || file.find("calibration") != std::string::npos;
    if (dataset) return {"exec_calibration_data_missing", text, {}};
    const bool flag = item.rfind("--", 0) == 0;  // a choice of the command, not a file's content
    if (e.kind() == ErrorKind::kUsage)
      return {"unclassified_failure", "qloom quantize refused the planned command: " + text, {}};
    if (!flag && (under(file, source_dir_) || (model_source_ == "hub" && file.find("models--") != std::string::npos)))
      return {"exec_model_load_failed", text, {}};
    if (e.kind() == ErrorKind::kUnsupported || e.kind() == ErrorKind::kInternal)
      // qloom cannot do this (a dtype, an architecture, a layout): only a change of qloom fixes it.
      return {"upstream_change_required", "qloom quantize cannot do this without a change of qloom: " + text, {}};
    if (e.kind() == ErrorKind::kIo) {
      // Writing the output failed (disk full, permission): no fix the workspace can apply.
      return {"export_crashed", text, {}};
    }
    return {"unclassified_failure", "qloom quantize failed: " + text, {}};
  }

  void fail_run(const Error& e) { fail_run_text(error_text(e), e.exit_code()); }
  void fail_run_text(const std::string& error, int exit_status) {
    try {
      nlohmann::ordered_json obs = {{"exit_status", exit_status}, {"error", error}};
      update_run_status(manifest_, recorded_args_, "failed", obs);
      write_run_manifest(ws_.dir(), manifest_);
    } catch (const Error& e) {
      report_.notes.push_back("could not record the failed run in run_manifest.yaml: " + error_text(e));
    }
  }

  // ---- export ----
  void phase_export() {
    enter("export");
    const fs::path q = quantized_dir_;
    std::error_code ec;
    auto weights_present = [&] {
      for (const auto& e : fs::directory_iterator(q, ec))
        if (e.path().extension() == ".safetensors") return true;
      return false;
    };
    if (!fs::is_directory(q, ec) || !weights_present()) {
      FixHypothesis f;
      f.root_cause = "The exported directory " + q.string() + " holds no weights although the run reported success.";
      f.actions = {"re-run the same command with --overwrite so the export is redone from scratch"};
      f.risk = "if the filesystem loses files again the retry fails the same way";
      f.plan_overrides = {{"overwrite_output", true}};
      throw StopAttempt{"must_have_weights_missing", "no *.safetensors in " + q.string(), f};
    }
    for (const auto& r : repair_config(source_dir_, q)) recovered("must_have_config_missing_or_invalid", r);
    for (const auto& r : repair_tokenizer(source_dir_, q)) recovered("must_have_tokenizer_missing", r);
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    uint64_t total = 0;
    std::vector<std::pair<std::string, uint64_t>> list;
    for (const auto& e : fs::directory_iterator(q, ec))
      if (e.is_regular_file()) list.emplace_back(e.path().filename().string(), e.file_size());
    std::sort(list.begin(), list.end());
    for (const auto& [n, b] : list) {
      files.push_back({{"name", n}, {"bytes", b}});
      total += b;
    }
    nlohmann::ordered_json summary = {{"layers_quantized", summary_.layers_quantized},
                                      {"layers_excluded", summary_.layers_excluded},
                                      {"bytes_before", summary_.bytes_before},
                                      {"bytes_after", summary_.bytes_after},
                                      {"bits_per_weight", summary_.bits_per_weight},
                                      {"calibrated", summary_.calibrated},
                                      {"calib_samples", summary_.calib_samples},
                                      {"calib_tokens", summary_.calib_tokens},
                                      {"warnings", summary_.warnings}};
    nlohmann::ordered_json obs = {{"exit_status", 0}, {"seconds", exec_seconds_}, {"files", files},
                                  {"size_bytes", total}, {"summary", summary}};
    update_run_status(manifest_, recorded_args_, "succeeded", obs);
    write_run_manifest(ws_.dir(), manifest_);
    report_.quantized_dir = q.string();
    report_.model = {{"source_dir", source_dir_.string()},
                     {"quantized_dir", q.string()},
                     {"quant_scheme", cmd_.options.quant_scheme},
                     {"kv_cache_dtype", cmd_.options.kv_cache_dtype},
                     {"quant_algo", cmd_.options.quant_algo},
                     {"weights_bytes_before", summary_.bytes_before},
                     {"weights_bytes_after", summary_.bytes_after},
                     {"size_ratio", summary_.bytes_after ? double(summary_.bytes_before) / double(summary_.bytes_after) : 0.0},
                     {"bits_per_weight", summary_.bits_per_weight},
                     {"layers_quantized", summary_.layers_quantized},
                     {"layers_excluded", summary_.layers_excluded},
                     {"output_bytes", total}};
  }

  // ---- validate ----
  void phase_validate() {
    enter("validate");
    {
      // The validator's self-test (seed 000 #13) runs on a generated model in
      // a scratch directory under $TMPDIR.
      std::string tmpl;
      try {
        tmpl = (fs::temp_directory_path() / "qloom-validator-self-test-XXXXXX").string();
      } catch (const std::exception& e) {
        throw StopAttempt{"validator_self_test_failed", std::string("no scratch directory for the self-test: ") + flatten_newlines(e.what()), {}};
      }
      const char* dir = ::mkdtemp(tmpl.data());
      if (dir == nullptr)
        throw StopAttempt{"validator_self_test_failed", "cannot create a scratch directory for the self-test: " + tmpl, {}};
      bool ok = false;
      std::string why;
      try {
        ok = validate::run_validator_self_test(dir).passed();
        if (!ok) why = "the validator's self-test reported a failed check";
      } catch (const std::exception& e) {
        why = flatten_newlines(e.what());
      }
      std::error_code ec;
      fs::remove_all(dir, ec);
      if (!ok) throw StopAttempt{"validator_self_test_failed", why, {}};
    }
    validate::ValidationReport rep;
    for (int round = 0;; ++round) {
      rep = run_validator();
      if (round >= 2) break;
      bool fixed = false;
      for (const auto& s : rep.steps) {
        if (s.status != validate::StepResult::Status::kFail) continue;
        if (s.number == 1)
          for (const auto& r : repair_auxiliary(source_dir_, quantized_dir_)) {
            recovered("should_have_aux_missing", r);
            fixed = true;
          }
        if (s.number == 3)
          for (const auto& r : repair_config_mismatch(source_dir_, quantized_dir_)) {
            recovered("must_validate_config_mismatch", r);
            fixed = true;
          }
      }
      if (!fixed) break;
    }
    if (!ws_.exists("validation_report.md")) {
      recovered("validation_report_absent", "validation_report.md missing after the validator ran; re-run once");
      validate::write_validation_report(rep, ws_.dir());
    }
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& s : rep.steps)
      steps.push_back({{"step", s.number}, {"title", s.title}, {"status", validate::status_name(s.status)},
                       {"summary", s.summary}});
    report_.validation = {{"passed", rep.passed()}, {"steps", steps}};
    for (const auto& s : rep.steps) {
      const bool fail = s.status == validate::StepResult::Status::kFail;
      const bool skipped = s.status == validate::StepResult::Status::kSkipped;
      if (fail && s.number == 4) {
        FixHypothesis f;
        f.root_cause = "Validator step 4 found tensor-name patterns that differ from the source: " + flatten_newlines(s.summary);
        f.actions = {"re-export from scratch with --overwrite (same plan)"};
        f.risk = "a systematic naming bug in the exporter fails the same way; then it is an upstream change";
        f.plan_overrides = {{"overwrite_output", true}};
        throw StopAttempt{"fuzzy_check_failed", "validation step 4 FAIL: " + flatten_newlines(s.summary), f};
      }
      if (fail && s.number == 2)
        throw StopAttempt{"must_validate_md5_mismatch", "validation step 2 FAIL: " + flatten_newlines(s.summary), {}};
      if (fail && s.number == 3) {
        // The repair (source business fields + quantization_config) did not
        // make step 3 pass, e.g. quantization_config itself is gone: only a
        // fresh export restores it (seed §8 #30: a fix inside the workspace).
        FixHypothesis f;
        f.root_cause = "config.json of the export still differs from the source after the repair: " + flatten_newlines(s.summary);
        f.actions = {"re-export from scratch with --overwrite (same plan), which rewrites config.json with its quantization_config"};
        f.risk = "if the exporter itself writes a wrong config the retry fails the same way";
        f.plan_overrides = {{"overwrite_output", true}};
        throw StopAttempt{"unclassified_failure", "validation step 3 still FAIL after the auto-recover fix: " + flatten_newlines(s.summary), f};
      }
      if (fail && s.number == 1)
        throw StopAttempt{"should_have_aux_missing", "validation step 1 still FAIL after repair: " + flatten_newlines(s.summary), {}};
      if (fail && s.number == 5) {
        const std::string t = flatten_newlines(s.summary);
        // qloom's engine lacks a feature the model needs (e.g. a RoPE type):
        // the checkpoint may be fine; only a change of qloom lets it verify.
        if (s.data.value("engine_error_kind", "") == "unsupported")
          throw StopAttempt{"upstream_change_required",
                            "validation step 5: qloom's engine cannot run this model, so the export cannot be verified "
                            "numerically; it needs a qloom change: " + t,
                            {}};
        // The engine part of step 5 failed (load error or non-finite logits):
        // the model cannot serve; otherwise dequantized weights are off.
        if (t.find("engine: FAIL") != std::string::npos || t.find("non-finite logits") != std::string::npos)
          throw StopAttempt{"quantized_load_failed", "validation step 5 FAIL: the quantized model does not load: " + t, {}};
        throw StopAttempt{"unclassified_failure", "validation step 5 FAIL: " + t, {}};
      }
      // Step 6: vLLM's Quark loader would refuse (or misload) the export.
      if (fail && s.number == 6)
        throw StopAttempt{"quantized_load_failed", "validation step 6 FAIL: " + flatten_newlines(s.summary), {}};
      if (skipped && (s.number == 4 || s.number == 2 || s.number == 3))
        recovered("must_validate_skipped", "step " + std::to_string(s.number) + " skipped: " + flatten_newlines(s.summary));
      if (skipped && (s.number == 1 || s.number == 5 || s.number == 6)) {
        recovered("nice_to_have_skipped", "step " + std::to_string(s.number) + " skipped: " + flatten_newlines(s.summary));
        auto text = ws_.read_text("validation_report.md").value_or("");
        text += "\n## Notes\n- step " + std::to_string(s.number) + " skipped: " + flatten_newlines(s.summary) + "\n";
        ws_.write_text("validation_report.md", text);
      }
    }
    // Checkpoint 4 (seed 003): the verified result.
    std::string facts = "output: " + quantized_dir_.string() + "\n";
    if (report_.model.is_object())
      facts += "size: " + format_bytes(report_.model.value("output_bytes", uint64_t(0))) + " (weights " +
               format_bytes(summary_.bytes_before) + " -> " + format_bytes(summary_.bytes_after) + ")\n";
    for (const auto& s : rep.steps)
      facts += "validation step " + std::to_string(s.number) + " (" + s.title + "): " + validate::status_name(s.status) + "\n";
    const Answer a = run_checkpoint(cio_, "result", "verified result", facts, "Accept this result?");
    decide("result", a);
    set_checkpoint_decision(manifest_, "result", decisions_["result"]);
    write_run_manifest(ws_.dir(), manifest_);
  }

  validate::ValidationReport run_validator() {
    validate::ValidateOptions vo;
    vo.threads = opts_.threads;
    if (opts_.numeric_validation) vo.numeric_step = validate::check_dequantized_weights;
    auto rep = validate::validate_checkpoint(source_dir_, quantized_dir_, vo);
    validate::write_validation_report(rep, ws_.dir());
    return rep;
  }

  // Seed 000 §10: before the attempt ends, every MUST-have is checked the way
  // the runner's classifier reads it; what an auto-recover fix can restore
  // (an artifact, the quantized dir's config / tokenizer, the validation
  // report) is restored and checked again.
  void self_check() {
    for (int round = 0; round < 4; ++round) {
      const auto c = classify_workspace(ws_.dir(), opts_.acceptable_eval_gap);
      if (!c.outcome) return;
      const std::string id(c.outcome->id);
      const std::string why = " (self-check: " + c.reason + ")";
      if (id == "analysis_artifact_invalid_or_missing") {
        ws_.write_json("model_analysis.json", analysis_, "model_analysis");
        recovered(id, "model_analysis.json rewritten from the intake" + why);
      } else if (id == "plan_artifact_invalid_or_missing") {
        ws_.write_json("quant_plan.json", plan_, "quant_plan");
        recovered(id, "quant_plan.json rewritten from the confirmed plan" + why);
      } else if (id == "manifest_artifact_invalid_or_missing") {
        write_run_manifest(ws_.dir(), manifest_);
        recovered(id, "run_manifest.yaml rewritten (same command, observed status)" + why);
      } else if (id == "must_have_config_missing_or_invalid") {
        for (const auto& r : repair_config(source_dir_, quantized_dir_)) recovered(id, r + why);
        run_validator();
      } else if (id == "must_have_tokenizer_missing") {
        for (const auto& r : repair_tokenizer(source_dir_, quantized_dir_)) recovered(id, r + why);
        run_validator();
      } else if (id == "validation_report_absent") {
        run_validator();
        recovered(id, "validator re-run once" + why);
      } else {
        return;  // not an artifact the attempt can restore: the runner reports it
      }
    }
  }

  // ---- eval ----
  void phase_eval() {
    enter("eval");
    ws_.remove("eval_skipped.txt");
    if (!plan_.value("eval_requested", intent_.eval_requested.value)) {
      ws_.write_text("eval_skipped.txt", "evaluation not requested: the prompt asked to skip it\n");
      recovered("eval_env_unavailable", "evaluation skipped as the prompt asked");
      report_.eval_skipped = true;
      return;
    }
    // Both models are evaluated with fp32 weights (the quantized one
    // dequantized): when that cannot fit the budget, eval_oom up front.
    if (const auto budget = memory_budget()) {
      const uint64_t params = analysis_["model"].value("estimated_parameters", uint64_t(0));
      const uint64_t need = params * 4 * 2;
      if (need > *budget) {
        ws_.write_text("eval_skipped.txt", "oom: evaluating needs both models' fp32 weights, ~" + format_bytes(need) +
                                               ", more than the memory budget " + format_bytes(*budget) + "\n");
        report_.eval_skipped = true;
        report_.eval = {{"skipped", true}, {"reason", "oom: predicted " + format_bytes(need) + " > " + format_bytes(*budget)}};
        throw StopAttempt{"eval_oom", "evaluation needs ~" + format_bytes(need) + " for both models' fp32 weights, more than the memory budget " +
                                          format_bytes(*budget) + "; no fix this workspace can apply (raise the limit)",
                          {}};
      }
    }
    EvalPhaseOptions eo;
    eo.workspace = ws_.dir();
    eo.source_dir = source_dir_;
    eo.quantized_dir = quantized_dir_;
    eo.metric_name = plan_.value("metric_name", intent_.metric_name.value);
    eo.eval_dataset = plan_.value("eval_dataset", std::string());
    if (plan_.contains("eval_limit") && plan_["eval_limit"].is_number_integer()) eo.limit = plan_["eval_limit"].get<int64_t>();
    eo.time_budget_s = fix_eval_budget_ ? *fix_eval_budget_ : opts_.eval_time_budget_s;
    eo.caller_threshold = opts_.acceptable_eval_gap;
    eo.threads = opts_.threads;
    eo.source_server = opts_.eval_server;
    eo.quantized_server = opts_.quantized_eval_server;
    eo.server_api_key = opts_.eval_server_api_key;
    eo.log = &log_;
    eo.log_is_tty = opts_.log_is_tty;
    const EvalPhaseResult r = run_eval_phase(eo);
    if (r.skipped) {
      report_.eval_skipped = true;
      report_.eval = {{"skipped", true}, {"reason", r.skip_reason}};
      const OutcomeInfo* c = find_outcome(r.skip_outcome);
      if (c && c->cls != OutcomeClass::kAutoRecover) {
        FixHypothesis f;
        std::optional<FixHypothesis> fix;
        if (c->id == "eval_oom") {
          f.root_cause = "Evaluation ran out of memory.";
          f.actions = {"evaluate with 1 worker thread and half the time budget (fewer windows / questions)"};
          f.risk = "a smaller sample widens the gap's standard error; the gate may stay unresolved";
          f.plan_overrides = {{"threads", 1}, {"eval_time_budget_s", std::max(10.0, eo.time_budget_s / 2)}};
          fix = f;
        }
        throw StopAttempt{std::string(c->id), r.skip_reason, fix};
      }
      recovered("eval_env_unavailable", r.skip_reason);
      return;
    }
    report_.eval = {{"metric_name", r.gap.metric_name},
                    {"source_score", r.gap.source_score},
                    {"quantized_score", r.gap.quantized_score},
                    {"relative_gap", r.gap.relative_gap},
                    {"gap_stderr", r.gap.gap_stderr},
                    {"n", r.gap.n},
                    {"threshold", r.threshold.value},
                    {"threshold_source", r.threshold.source},
                    {"verdict", verdict_name(r.verdict)},
                    {"source_cached", r.source_cached}};
    if (r.verdict == GateVerdict::kFail)
      throw StopAttempt{"eval_gap_exceeded", "relative_gap " + std::to_string(r.gap.relative_gap) + " (± " +
                                                 std::to_string(r.gap.gap_stderr) + ") > threshold " +
                                                 std::to_string(r.threshold.value) + " (" + r.threshold.source + ")",
                        {}};
    if (r.verdict == GateVerdict::kUnresolved) report_.eval_unresolved = true;
  }

  const std::string& prompt_;
  const RunOptions& opts_;
  const Workspace& ws_;
  const std::optional<FixHypothesis>& fix_;
  std::ostream& log_;
  CheckpointIo cio_;
  AttemptReport report_;

  IntentContext ictx_;
  Intent intent_;
  std::vector<std::string> changes_;
  std::map<std::string, std::string> decisions_;
  fs::path config_dir_, source_dir_, quantized_dir_;
  fs::path gguf_path_;  // the model is this .gguf file (converted at exec)
  std::string model_source_, model_arg_;
  nlohmann::ordered_json environment_, analysis_, plan_, manifest_;
  job::QuantizeCommand cmd_;
  std::vector<std::string> recorded_args_;
  job::QuantizeSummary summary_;
  double exec_seconds_ = 0;
  std::optional<unsigned> fix_threads_;
  std::optional<double> fix_eval_budget_;
  bool fix_overwrite_ = false;
};

}  // namespace

AttemptReport run_attempt(const std::string& prompt, const RunOptions& opts, const Workspace& ws, int attempt,
                          const std::optional<FixHypothesis>& fix) {
  AttemptRunner runner(prompt, opts, ws, attempt, fix);
  return runner.run();
}

}  // namespace qloom::agent
