// qloom command-line entry: parse, run one subcommand, map errors to exit codes.
//   0 success, 1 internal error, 2 bad input or bad command line, 3 I/O failure
//   while writing (disk full, permission), 4 `validate` ran and a check failed
//   or `run` stopped with an outcome (blocked.md), 5 `run` finished unverified
//   (eval skipped or its gap unresolved at the sample size), 6 a `perf` session
//   ended with another result than success (final.json names it).
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "qloom/build_info.h"
#include "qloom/cli/commands.h"
#include "qloom/cli/help_examples.h"
#include "qloom/core/error.h"

namespace qloom::cli {
namespace {
std::vector<std::string>& argv_store() {
  static std::vector<std::string> v;
  return v;
}
}  // namespace
const std::vector<std::string>& invocation_argv() { return argv_store(); }
void set_invocation_argv(int argc, char** argv) { argv_store().assign(argv, argv + argc); }
}  // namespace qloom::cli

int main(int argc, char** argv) {
  using namespace qloom;
  CLI::App app{"qloom — post-training quantization of LLMs into Quark checkpoints", "qloom"};
  app.set_version_flag("--version", std::string("qloom ") + build::kVersion + " (" +
                                        build::kBuildType + ", " + build::kCompiler + ")");
  app.require_subcommand(1);
  cli::set_invocation_argv(argc, argv);
  cli::CommandFn run;
  cli::register_inspect(app, run);
  cli::register_quantize(app, run);
  cli::register_validate(app, run);
  cli::register_eval(app, run);
  cli::register_run(app, run);
  cli::register_convert(app, run);
  cli::register_serve(app, run);
  cli::register_perf(app, run);
  cli::attach_help_examples(app);  // after registration: the footers of `qloom <command> --help`

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and usage hint
    return 2;
  }

  try {
    return run ? run() : 2;
  } catch (const Error& e) {
    std::cerr << "qloom: error (" << error_kind_name(e.kind()) << "): " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::cerr << "qloom: error: out of memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "qloom: internal error: " << e.what() << "\n";
    return 1;
  }
}
