// Worked examples at the end of `qloom <command> --help`: one table, command ->
// examples, each a one-line comment and the command line. main() attaches them
// as each subcommand's footer after registration.
//
// The docs tests (tests/docs/run_docs.py --help-examples, CTest
// docs.help_examples) run every example from `qloom <command> --help`, in the
// order `qloom --help` lists the commands, in one temporary directory holding
// `models` (the repository's models/), so an example may use what an earlier
// command's example wrote (validate checks the out/fp8 that quantize wrote).
// An example that cannot run there (network, a GPU, a server it would wait
// for) names what it needs in `needs`; its comment line then ends with
// "[needs <what>]" and the harness lists it instead of running it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace qloom::cli {

struct HelpExample {
  std::string_view comment;  // what it does, one line
  std::string_view command;  // "qloom <command> ...", one line
  std::string_view needs;    // empty: runnable on the bundled demo model alone
};

struct CommandExamples {
  std::string_view command;  // the subcommand's name
  std::vector<HelpExample> examples;
};

// Every subcommand's examples, in the order of `qloom --help`.
const std::vector<CommandExamples>& help_examples();

// The footer text for `command`: "Examples ...:" then, per example, the
// comment as "  # ..." and the command indented by two spaces, examples
// separated by a blank line. Empty when the table has no entry for it.
std::string help_examples_footer(std::string_view command);

// Sets the footer of each of app's subcommands that the table lists.
void attach_help_examples(CLI::App& app);

}  // namespace qloom::cli
