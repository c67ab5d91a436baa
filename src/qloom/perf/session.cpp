#include "qloom/perf/session.h"

#include <unistd.h>

#include <chrono>

#include "qloom/core/error.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/perf/session_ctx.h"

namespace qloom::perf {
namespace fs = std::filesystem;

void SessionCtx::say(const std::string& text) const {
  if (log) *log << "qloom perf: " << text << "\n" << std::flush;
}

void SessionCtx::set_stage(const std::string& stage, const std::string& text) {
  st()["stage"] = stage;
  store.save();
  store.progress({{"stage", stage}, {"stage_detail", text}, {"pid", int64_t(::getpid())}});
  say("[" + stage + "] " + text);
}

void SessionCtx::detail(const std::string& text) {
  store.progress({{"stage_detail", text}});
  say("[" + st()["stage"].get<std::string>() + "] " + text);
}

void SessionCtx::timed(const std::string& step, const std::function<void()>& work) {
  const std::string started = utc_timestamp();
  const auto t0 = std::chrono::steady_clock::now();
  work();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st()["phase_timeline"].push_back({{"stage", st()["stage"]},
                                    {"step", step},
                                    {"started_at", started},
                                    {"ended_at", utc_timestamp()},
                                    {"seconds", s},
                                    {"invocation", st().value("invocations", 1)}});
  store.save();
}

void SessionCtx::terminate(const std::string& terminal_stage, const std::string& result, const std::string& why) {
  st()["terminal_stage"] = terminal_stage;
  st()["terminal_result"] = result;
  if (!why.empty())
    st()["failure"] = result == "success" ? nlohmann::ordered_json(nullptr)
                                          : nlohmann::ordered_json{{"stage", st()["stage"]}, {"reason", why}};
  st()["stage"] = terminal_stage;
  store.save();
  store.progress({{"stage", terminal_stage}, {"stage_detail", why}, {"terminal_result", result}});
  say("[" + terminal_stage + "] " + result + (why.empty() ? "" : ": " + why));
}

int perf_exit_code(const std::string& terminal_result) { return terminal_result == "success" ? 0 : 6; }

namespace {

fs::path resolve_session_dir(const PerfCommand& cmd) {
  if (!cmd.session_dir.empty()) return cmd.session_dir;
  return fs::path("runs") / session_dir_stamp();
}

PerfOutcome outcome_of(SessionCtx& ctx) {
  PerfOutcome out;
  out.session_dir = ctx.dir();
  const fs::path final_json = ctx.dir() / "reports" / "final.json";
  if (fs::exists(final_json)) out.final_json = read_session_file(ctx.dir() / "reports", "final.json");
  out.terminal_result = ctx.st().value("terminal_result", nlohmann::ordered_json(nullptr)).is_null()
                            ? ""
                            : ctx.st()["terminal_result"].get<std::string>();
  out.exit_code = perf_exit_code(out.terminal_result);
  return out;
}

// The work between the baseline and FINAL, skipped once terminal.
void run_work_steps(SessionCtx& ctx) {
  const bool search = ctx.spec.quant_strategy.empty();
  if (!ctx.terminal()) {
    if (search) mixed_precision_search_step(ctx);
    else direct_recipe_step(ctx);
  }
  if (!ctx.terminal() && !search) direct_gate_step(ctx);
  if (!ctx.terminal()) performance_step(ctx);
}

}  // namespace

PerfOutcome run_perf_session(const PerfRunOptions& options) {
  const fs::path dir = resolve_session_dir(options.command);
  // A new session for a model that is not there leaves no directory behind.
  if (!fs::exists(dir / "state.json")) require_model_dirs(options.command.spec);
  // The session never writes inside (or around) a model it reads.
  for (const std::string& m : {options.command.spec.model, options.command.spec.base_model})
    if (fs::is_directory(m)) exporter::check_output_location(fs::absolute(dir), fs::absolute(m));
  SessionStore store(dir);
  SessionCtx ctx{store, options.command.spec, options, options.log};
  ctx.say("session " + store.dir().string());
  init_or_resume_state(ctx, options.command.spec);  // ctx.spec becomes the stored run_spec
  apply_reopen_actions(ctx, options.command.retry_accuracy_gate, options.command.recheck_baseline);
  if (!ctx.terminal()) validate_inputs(ctx);
  if (!ctx.terminal()) baseline_health_step(ctx, options.command.recheck_baseline);
  run_work_steps(ctx);
  final_reports_step(ctx);
  return outcome_of(ctx);
}

nlohmann::ordered_json perf_status(const fs::path& session_dir) {
  nlohmann::ordered_json out = read_session_file(session_dir, "progress.json");
  if (fs::exists(session_dir / "state.json")) {
    nlohmann::ordered_json state = read_session_file(session_dir, "state.json");
    out["state_stage"] = state.value("stage", "");
    out["terminal_result"] = state.value("terminal_result", nlohmann::ordered_json(nullptr));
  }
  return out;
}

PerfOutcome rebuild_perf_reports(const fs::path& session_dir, std::ostream* log) {
  if (!fs::exists(session_dir / "state.json"))
    throw Error(ErrorKind::kNotFound, (session_dir / "state.json").string(), "", "no session state here",
                "pass the directory a qloom perf run created (--session DIR)");
  SessionStore store(session_dir);
  store.load();
  if (store.state()["terminal_stage"].is_null())
    throw Error(ErrorKind::kUsage, (session_dir / "state.json").string(), "terminal_stage",
                "the session has not reached a terminal stage (it is at '" +
                    store.state()["stage"].get<std::string>() + "'); its reports would describe unfinished work",
                "resume it with the same qloom perf command and --session-dir");
  PerfRunOptions none;
  none.log = log;
  SessionCtx ctx{store, run_spec_from_json(store.state()["run_spec"]), none, log};
  final_reports_step(ctx);
  return outcome_of(ctx);
}

}  // namespace qloom::perf
