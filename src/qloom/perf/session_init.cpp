// Session start: a new state.json (run_spec, runtime_context, invocation) or
// a resumed one (the stored run_spec wins, differences become warnings), the
// reopen actions (--retry-accuracy-gate, --recheck-baseline) and the input
// checks.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "qloom/agent/environment.h"
#include "qloom/build_info.h"
#include "qloom/core/error.h"
#include "qloom/model/model_config.h"
#include "qloom/job/algo_config_file.h"
#include "qloom/job/quantize_args.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/session_ctx.h"

extern char** environ;

namespace qloom::perf {
namespace fs = std::filesystem;

namespace {

// Environment variables that change what a session computes or where it reads.
bool recorded_env(std::string_view name) {
  for (std::string_view prefix : {"QLOOM_", "OPENBLAS_", "OMP_", "HF_", "GOTO_"})
    if (name.substr(0, prefix.size()) == prefix) return name != "HF_TOKEN" && name != "QLOOM_HF_TOKEN";
  return false;
}

nlohmann::ordered_json invocation_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || !recorded_env(kv.substr(0, eq))) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return env;
}

nlohmann::ordered_json runtime_context(const RunSpec& spec) {
  const agent::EnvironmentFacts facts = agent::collect_environment();
  unsigned threads = spec.threads ? spec.threads : std::max(1u, std::thread::hardware_concurrency());
  nlohmann::ordered_json j;
  j["qloom_version"] = build::kVersion;
  j["engine"] = std::string("qloom CPU engine (") + build::kCompiler + ", " + build::kBuildType + ")";
  j["runtime"] = spec.runtime;
  j["runtime_note"] =
      spec.runtime == "native"
          ? "quantized linears run on qloom's native kernels (int8 VNNI, fp8 / bf16 dot products, packed 4-bit), "
            "linears without a kernel for their spec dequantized with simulated activation quantization, unquantized "
            "linears with bf16 compute; throughput figures compare that runtime with the baseline on the same runtime"
          : "quantized checkpoints run with weights dequantized to fp32 and activation / KV quantization simulated "
            "(--runtime simulate); throughput figures compare that runtime with the baseline";
  j["threads"] = threads;
  j["isa"] = facts.qloom_isa;
  j["cpu_model"] = facts.cpu_model;
  j["fingerprint"] = job::sha256_hex(std::string(build::kVersion) + "|" + build::kFlags + "|" +
                                          facts.qloom_isa + "|" + std::to_string(threads));
  return j;
}

std::string new_session_id(const fs::path& dir) {
  return session_dir_stamp() + "-" + job::sha256_hex(dir.string()).substr(0, 4);
}

nlohmann::ordered_json new_state(const SessionCtx& ctx, const RunSpec& spec) {
  nlohmann::ordered_json s;
  s["schema_version"] = 1;
  s["session_id"] = new_session_id(ctx.dir());
  s["stage"] = "quantize";
  s["path"] = spec.quant_strategy.empty() ? "mix_precision_search" : "direct_ptq";
  s["run_spec"] = to_json(spec);
  s["runtime_context"] = runtime_context(spec);
  s["invocation"] = {{"argv", ctx.options.argv},
                     {"spec", job::shell_join(ctx.options.argv)},
                     {"env", invocation_env()}};
  s["quant_ckpt_dir"] = nullptr;
  s["best_candidate"] = nullptr;
  s["mix_precision_search"] = nullptr;
  s["baseline_reference"] = nullptr;
  s["accuracy_validation"] = nullptr;
  s["accuracy_attempts"] = nlohmann::ordered_json::array();
  s["performance_measurements"] = nlohmann::ordered_json::array();
  s["performance_status"] = spec.performance_mode == "off" ? "not_requested" : "pending";
  s["performance_validation"] = {{"timed_samples", 3}, {"max_timed_samples", 4}, {"stability_relative_mad", 0.015}};
  s["phase_timeline"] = nlohmann::ordered_json::array();
  s["terminal_stage"] = nullptr;
  s["terminal_result"] = nullptr;
  s["reporting"] = {{"status", "pending"}, {"paths", nlohmann::ordered_json::object()}, {"error", nullptr},
                    {"generated_at", nullptr}};
  s["warnings"] = nlohmann::ordered_json::array();
  s["invocations"] = 1;
  s["fixed_recipe"] = nullptr;
  s["failure"] = nullptr;
  return s;
}

std::string absolute_model(const std::string& m) {
  std::error_code ec;
  if (fs::exists(m, ec)) return fs::absolute(m).lexically_normal().string();
  return m;  // a hub id: resolved by the steps that read it
}

}  // namespace

void init_or_resume_state(SessionCtx& ctx, const RunSpec& given_raw) {
  RunSpec given = given_raw;
  given.model = absolute_model(given.model);
  given.base_model = absolute_model(given.base_model);
  if (!ctx.store.has_state()) {
    ctx.st() = new_state(ctx, given);
    ctx.spec = given;
    ctx.store.save();
    ctx.store.progress({{"session_id", ctx.st()["session_id"]}, {"stage", "quantize"}, {"stage_detail", "starting"}});
    return;
  }
  ctx.store.load();
  ctx.spec = run_spec_from_json(ctx.st()["run_spec"]);
  ctx.st()["invocations"] = ctx.st().value("invocations", 1) + 1;
  ctx.store.save();
  ctx.say("resuming session " + ctx.st()["session_id"].get<std::string>() + " at stage " +
          ctx.st()["stage"].get<std::string>());
  for (const std::string& d : run_spec_differences(ctx.spec, given))
    ctx.store.warn("resume: the stored run_spec wins over this invocation's option (" + d + ")");
}

void apply_reopen_actions(SessionCtx& ctx, bool retry_accuracy_gate, bool recheck_baseline) {
  auto& s = ctx.st();
  const std::string terminal = s["terminal_stage"].is_null() ? "" : s["terminal_stage"].get<std::string>();
  if (recheck_baseline && terminal == "base_unhealthy") {
    s["terminal_stage"] = nullptr;
    s["terminal_result"] = nullptr;
    s["failure"] = nullptr;
    s["baseline_reference"] = nullptr;
    s["reporting"]["status"] = "pending";
    ctx.set_stage("quantize", "--recheck-baseline: re-measuring the baseline");
  }
  if (retry_accuracy_gate && (terminal == "failed" || terminal == "done")) {
    s["terminal_stage"] = nullptr;
    s["terminal_result"] = nullptr;
    s["failure"] = nullptr;
    s["accuracy_validation"] = nullptr;
    s["reporting"]["status"] = "pending";
    s["performance_measurements"] = nlohmann::ordered_json::array();
    s["performance_status"] = ctx.spec.performance_mode == "off" ? "not_requested" : "pending";
    if (s["mix_precision_search"].is_object()) {
      // Every candidate goes back to the queue (the search's end marks the
      // ones it did not gate "skipped"); proxy scores stay.
      for (auto& c : s["mix_precision_search"]["candidate_queue"])
        if (c["status"] != "pending") {
          c["status"] = "pending";
          c["real_gate"] = nullptr;
        }
      s["mix_precision_search"]["status"] = "running";
      s["mix_precision_search"]["termination_reason"] = nullptr;
      s["mix_precision_search"]["result"] = nullptr;
      s["quant_ckpt_dir"] = nullptr;  // the winner is re-exported and re-gated
      s["best_candidate"] = nullptr;
    }
    ctx.set_stage("land", "--retry-accuracy-gate: reopening the session at the accuracy gate");
  } else if (retry_accuracy_gate && !terminal.empty()) {
    ctx.store.warn("--retry-accuracy-gate: the session ended " + terminal + ", not at the gate; nothing to retry");
  }
}

void require_model_dirs(const RunSpec& spec) {
  for (const std::string& m : {spec.model, spec.base_model})
    if (!fs::is_directory(m))
      throw Error(ErrorKind::kNotFound, m, m == spec.model ? "--model" : "--base-model", "not a model directory",
                  "pass a local HF model directory (qloom convert makes one from a GGUF; hub ids: download first)");
}

void validate_inputs(SessionCtx& ctx) {
  if (!ctx.st()["phase_timeline"].empty()) return;  // validated by an earlier invocation
  ctx.timed("validate_inputs", [&] {
    require_model_dirs(ctx.spec);
    for (const std::string& m : {ctx.spec.model, ctx.spec.base_model}) {
      io::ModelDir dir = io::ModelDir::open(m);
      model::ModelConfig::parse(dir.config(), (fs::path(m) / "config.json").string());
    }
    for (const auto& [name, value] : ctx.spec.not_applicable)
      ctx.store.warn("--" + name + " " + value + ": a GPU serving option of quark-quant-perf, not applicable to "
                     "qloom's CPU engine (recorded in run_spec.not_applicable)");
  });
}

}  // namespace qloom::perf
