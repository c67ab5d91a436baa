// The `qloom quantize` command line as a library object: the one definition
// of its flags (Quark's quark-cli torch-llm-ptq / quantize_quark.py names, in
// snake_case and kebab-case), used by the CLI and by the agent, whose exec
// phase parses the exact argument array recorded in run_manifest.yaml through
// this same parser and runs quantize_model on the result — so the manifest's
// command and what runs cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "qloom/job/quantize_job.h"

namespace CLI {
class App;
}

namespace qloom::job {

struct QuantizeCommand {
  QuantizeOptions options;  // model_dir holds the model argument as given (a dir or hub id)
  std::string progress = "auto";  // auto | on | off
  bool no_trust_remote_code = false;
};

// Registers every `qloom quantize` flag on `sub`, storing into `cmd` (which
// must outlive the parse).
void add_quantize_flags(CLI::App& sub, QuantizeCommand& cmd);

// Parses the arguments that follow `qloom quantize` (argv[2:]); throws
// Error(kUsage) naming the offending argument for anything the CLI would
// refuse.
QuantizeCommand parse_quantize_args(const std::vector<std::string>& args);

// The arguments (after `qloom quantize`) that parse back to `cmd`: required
// flags first, then every option that differs from its default, in a fixed
// order. Values are separate array elements (argument-array safe).
std::vector<std::string> quantize_args(const QuantizeCommand& cmd);

// POSIX shell quoting of one word ('...' with embedded quotes escaped) when
// it holds anything but [A-Za-z0-9_./:=@%+,-]; a command line for display.
std::string shell_quote(const std::string& word);
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace qloom::job
