// `qloom <command> --help` ends with 2 to 4 worked examples (cli/help_examples.h);
// tests/docs/run_docs.py --help-examples (CTest docs.help_examples) runs them.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/subprocess.h"

namespace qloom {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The names under "Subcommands:" of `qloom --help`.
std::vector<std::string> subcommands() {
  const auto r = test::run_qloom({"--help"});
  std::vector<std::string> names;
  bool inside = false;
  for (const std::string& l : lines_of(r.out)) {
    if (l == "Subcommands:")
      inside = true;
    else if (inside && l.size() > 2 && l.rfind("  ", 0) == 0 && l[2] != ' ')
      names.push_back(l.substr(2, l.find(' ', 2) - 2));
  }
  return names;
}

TEST(HelpExamplesCli, EveryCommandEndsWithTwoToFourCommentedExamples) {
  const auto names = subcommands();
  ASSERT_GE(names.size(), 8u);  // inspect quantize validate eval run convert serve perf, at least
  for (const std::string& name : names) {
    const auto r = test::run_qloom({name, "--help"});
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    const auto lines = lines_of(r.out);
    size_t start = 0;
    while (start < lines.size() && lines[start].rfind("Examples", 0) != 0) ++start;
    ASSERT_LT(start, lines.size()) << "qloom " << name << " --help has no Examples section:\n" << r.out;
    size_t examples = 0;
    for (size_t i = start + 1; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      ASSERT_EQ(lines[i].rfind("  # ", 0), 0u) << name << ": a comment line first, got: " << lines[i];
      ASSERT_LT(i + 1, lines.size()) << name << ": a comment without its command";
      EXPECT_EQ(lines[i + 1].rfind("  qloom " + name + " ", 0), 0u) << name << ": " << lines[i + 1];
      ++examples;
      ++i;
    }
    EXPECT_GE(examples, 2u) << "qloom " << name << " --help";
    EXPECT_LE(examples, 4u) << "qloom " << name << " --help";
  }
}

TEST(HelpExamplesCli, NotRunExamplesSayWhatTheyNeed) {
  const auto r = test::run_qloom({"quantize", "--help"});
  EXPECT_NE(r.out.find("straight from the Hub  [needs network: the Hugging Face Hub]\n"
                       "  qloom quantize --model_dir Qwen/Qwen2.5-0.5B-Instruct"),
            std::string::npos)
      << r.out;
}

TEST(HelpExamplesCli, NestedCommandsAndTheTopLevelHaveNone) {
  EXPECT_EQ(test::run_qloom({"--help"}).out.find("Examples"), std::string::npos);
  EXPECT_EQ(test::run_qloom({"perf", "status", "--help"}).out.find("Examples"), std::string::npos);
}

}  // namespace
}  // namespace qloom
