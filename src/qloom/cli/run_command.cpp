// qloom run "<prompt>" --workspace DIR [--interactive auto|on|off]
//   [--acceptable_eval_gap X] [--max_requantize_attempts N] [--model_root DIR]
//   [--threads N] [--eval_time_budget S] [--json]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/agent/workflow.h"
#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"

namespace qloom::cli {

void register_run(CLI::App& app, CommandFn& run) {
  struct Options {
    std::string prompt, workspace, interactive = "auto", model_root;
    std::optional<double> gap;
    int max_requantize_attempts = 1;
    unsigned threads = 0;
    double eval_time_budget = 300;
    std::string eval_server, quantized_eval_server, eval_server_api_key;
    std::optional<uint64_t> max_memory;
    bool json = false, no_numeric = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "run", "Quantize from a plain-language request: intake, plan, manifest, execution, export, validation and "
             "evaluation with checkpoints, retries and assessment.json in the workspace");
  sub->add_option("prompt", o->prompt, "the request, e.g. \"quantize the bundled model to int4 g32, accept a 10% gap\"")
      ->required();
  sub->add_option(flag_names("workspace"), o->workspace, "the directory for the run's artifacts (created)")->required();
  sub->add_option(flag_names("interactive"), o->interactive,
                  "checkpoints: on (ask on stderr, read stdin), off (accept defaults), auto (on with a terminal)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub->add_option(flag_names("acceptable_eval_gap"), o->gap,
                  "accepted relative eval gap (wins over the prompt's and eval_gap_threshold.txt; default 0.03)");
  sub->add_option(flag_names("max_requantize_attempts"), o->max_requantize_attempts,
                  "re-quantizations after a retryable failure")
      ->capture_default_str();
  sub->add_option(flag_names("model_root"), o->model_root, "a directory whose subdirectories are models a prompt may name");
  sub->add_option(flag_names("threads"), o->threads, "worker threads (0 = all cores)");
  sub->add_option(flag_names("eval_time_budget"), o->eval_time_budget, "seconds of evaluation per model")
      ->capture_default_str();
  sub->add_option(flag_names("eval_server"), o->eval_server,
                  "evaluate the source model through this OpenAI-compatible server (vLLM, SGLang, qloom serve)");
  sub->add_option(flag_names("quantized_eval_server"), o->quantized_eval_server,
                  "evaluate the quantized model through this OpenAI-compatible server");
  sub->add_option(flag_names("eval_server_api_key"), o->eval_server_api_key,
                  "sent to the evaluation servers as 'Authorization: Bearer KEY'");
  sub->add_option(flag_names("max_memory"), o->max_memory,
                  "memory budget in bytes (default: available memory / cgroup limit); a plan that cannot fit stops with exec_oom");
  sub->add_flag(flag_names("no_numeric"), o->no_numeric,
                "skip validation step 5 (dequantize every weight, load in the engine); noted in the report");
  sub->add_flag(flag_names("json"), o->json, "print assessment.json instead of the summary");
  sub->callback([o, &run] {
    run = [o] {
      agent::RunOptions ro;
      ro.workspace = o->workspace;
      if (!o->model_root.empty()) ro.model_root = o->model_root;
      ro.interactive = agent::parse_interactive(o->interactive);
      ro.acceptable_eval_gap = o->gap;
      ro.max_requantize_attempts = o->max_requantize_attempts;
      ro.threads = o->threads;
      ro.eval_time_budget_s = o->eval_time_budget;
      ro.eval_server = o->eval_server;
      ro.quantized_eval_server = o->quantized_eval_server;
      ro.eval_server_api_key = o->eval_server_api_key;
      ro.memory_limit_bytes = o->max_memory;
      ro.numeric_validation = !o->no_numeric;
      ro.in = &std::cin;
      ro.log = &std::cerr;
      ro.stdin_is_tty = ::isatty(STDIN_FILENO);
      ro.log_is_tty = ::isatty(STDERR_FILENO);
      const agent::RunResult r = agent::quantize_via_prompt(o->prompt, ro);
      if (o->json)
        std::cout << r.assessment.dump(2) << "\n";
      else
        std::cout << r.summary;
      if (r.outcome_id == "exec_oom" || r.outcome_id == "eval_oom") {
        // Memory is exhausted: leave without library destructors (OpenBLAS's
        // exit-time thread shutdown spins on a failing allocation then).
        std::cout.flush();
        std::cerr.flush();
        std::fflush(nullptr);
        std::_Exit(r.exit_code);
      }
      return r.exit_code;
    };
  });
}

}  // namespace qloom::cli
