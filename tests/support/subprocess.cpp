#include "support/subprocess.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>

namespace qloom::test {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

CommandResult run_command(const std::vector<std::string>& argv) {
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("qloom-cmd-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  const auto out_path = base.string() + ".out", err_path = base.string() + ".err";
  std::string cmd;
  for (const auto& a : argv) cmd += shell_quote(a) + " ";
  cmd += "</dev/null >" + shell_quote(out_path) + " 2>" + shell_quote(err_path);
  const int status = std::system(cmd.c_str());
  CommandResult r;
  if (status == -1) r.exit_code = -1;
  else if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

CommandResult run_qloom(const std::vector<std::string>& args) {
  std::vector<std::string> argv{QLOOM_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

void expect_passes_under_isa_caps(const std::string& filter) {
  if (std::getenv("QLOOM_MAX_ISA") != nullptr) GTEST_SKIP() << "already capped";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (const char* cap : {"avx2", "scalar"}) {
    const CommandResult r = run_command({"env", std::string("QLOOM_MAX_ISA=") + cap, self, "--gtest_filter=" + filter});
    EXPECT_EQ(r.exit_code, 0) << "QLOOM_MAX_ISA=" << cap << "\n" << r.out << r.err;
  }
}

}  // namespace qloom::test
