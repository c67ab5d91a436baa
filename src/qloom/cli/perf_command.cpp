// qloom perf --model M [options]       run or resume a quant-perf session
// qloom perf status --session DIR      print progress.json
// qloom perf report --session DIR      rebuild the FINAL reports (terminal sessions only)
// Options: quark-quant-perf's names (perf/perf_options.h). Prints final.json
// on stdout; exits 0 only when the session's result is success (6 otherwise).
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/perf/perf_options.h"
#include "qloom/perf/session.h"

namespace qloom::cli {

namespace {

int print_outcome(const perf::PerfOutcome& out, bool json_only) {
  std::cout << out.final_json.dump(2) << "\n";
  if (!json_only)
    std::cerr << "qloom perf: result " << (out.terminal_result.empty() ? "none" : out.terminal_result) << " — "
              << (out.session_dir / "reports" / "final.md").string() << "\n";
  return out.exit_code;
}

void register_perf_status(CLI::App& perf, CommandFn& run) {
  auto session = std::make_shared<std::string>();
  CLI::App* sub = perf.add_subcommand("status", "print a session's progress.json (safe while it runs)");
  sub->add_option(flag_names("session"), *session, "the session directory")->required();
  sub->callback([session, &run] {
    run = [session] {
      std::cout << perf::perf_status(*session).dump(2) << "\n";
      return 0;
    };
  });
}

void register_perf_report(CLI::App& perf, CommandFn& run) {
  auto session = std::make_shared<std::string>();
  CLI::App* sub = perf.add_subcommand(
      "report", "rebuild reports/final.json, final.md, report.html, session_breakdown.json and session_report.md "
                "from state.json without re-running work (terminal sessions only)");
  sub->add_option(flag_names("session"), *session, "the session directory")->required();
  sub->callback([session, &run] {
    run = [session] { return print_outcome(perf::rebuild_perf_reports(*session, &std::cerr), false); };
  });
}

}  // namespace

void register_perf(CLI::App& app, CommandFn& run) {
  auto cmd = std::make_shared<perf::PerfCommand>();
  CLI::App* sub = app.add_subcommand(
      "perf", "The managed quant-perf session: baseline health, a fixed recipe or a mixed-precision search, the real "
              "accuracy gate, throughput, resumable state and final reports (quark-quant-perf's options)");
  sub->require_subcommand(0, 1);
  perf::add_perf_flags(*sub, *cmd);
  register_perf_status(*sub, run);
  register_perf_report(*sub, run);
  sub->final_callback([cmd, sub, &run] {
    if (sub->get_subcommands().size() > 0) return;  // status / report set `run`
    run = [cmd, sub] {
      perf::finish_perf_command(*cmd);
      perf::PerfRunOptions o;
      o.command = *cmd;
      o.argv = invocation_argv();
      if (!o.argv.empty()) o.argv.front() = "qloom";  // not the build path of the binary
      o.log = &std::cerr;
      o.log_is_tty = ::isatty(STDERR_FILENO);
      return print_outcome(perf::run_perf_session(o), cmd->json);
    };
  });
}

}  // namespace qloom::cli
