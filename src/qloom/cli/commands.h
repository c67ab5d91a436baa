// Each subcommand registers itself on the app and sets the callback that runs
// it: one library call plus printing. Callbacks throw qloom::Error on failure;
// main() turns that into a message and an exit code.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace qloom::cli {

// The chosen subcommand's body, run after parsing succeeds. Returns the exit code.
using CommandFn = std::function<int()>;

void register_inspect(CLI::App& app, CommandFn& run);
void register_quantize(CLI::App& app, CommandFn& run);
void register_validate(CLI::App& app, CommandFn& run);
void register_eval(CLI::App& app, CommandFn& run);
void register_run(CLI::App& app, CommandFn& run);
void register_convert(CLI::App& app, CommandFn& run);
void register_serve(CLI::App& app, CommandFn& run);
void register_perf(CLI::App& app, CommandFn& run);

// The process arguments as typed (main() records them before parsing), for
// commands that store their own invocation (perf's state.json).
const std::vector<std::string>& invocation_argv();
void set_invocation_argv(int argc, char** argv);

}  // namespace qloom::cli
