// Runs a command line through /bin/sh and captures stdout, stderr and the exit
// code. For tests that drive the qloom CLI as a user would.
#pragma once

#include <string>
#include <vector>

namespace qloom::test {

struct CommandResult {
  int exit_code = -1;  // the process's exit status; 128+N when killed by signal N
  std::string out;
  std::string err;
};

// Quotes one argument for /bin/sh.
std::string shell_quote(const std::string& arg);

// Runs argv (each element quoted) and waits for it.
CommandResult run_command(const std::vector<std::string>& argv);

// Runs the qloom CLI built with the tests (QLOOM_CLI_PATH) with these arguments.
CommandResult run_qloom(const std::vector<std::string>& args);

// Re-runs this test binary under QLOOM_MAX_ISA=avx2 and =scalar with
// --gtest_filter=`filter`, so an AVX-512 machine exercises the fallback
// paths too; one gtest failure per cap that fails (naming it, with the
// child's output). Skips when this process already runs under a cap.
void expect_passes_under_isa_caps(const std::string& filter);

}  // namespace qloom::test
