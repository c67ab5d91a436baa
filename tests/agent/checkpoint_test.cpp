#include "qloom/agent/checkpoint.h"

#include <sstream>

#include <gtest/gtest.h>

#include "support/expect_error.h"

namespace qloom::agent {
namespace {

TEST(Checkpoint, ClassifiesAnswers) {
  for (const char* y : {"y", "Yes", " ok ", "looks good", "Run it!", "execute", "continue", "go"})
    EXPECT_EQ(classify_answer(y).kind, AnswerKind::kYes) << y;
  for (const char* n : {"n", "No", "abort", "stop", "cancel"}) EXPECT_EQ(classify_answer(n).kind, AnswerKind::kNo) << n;
  const Answer c = classify_answer("  use awq  ");
  EXPECT_EQ(c.kind, AnswerKind::kChange);
  EXPECT_EQ(c.text, "use awq");
}

TEST(Checkpoint, OffPrintsFactsAndAutoAccepts) {
  std::istringstream in("n\n");
  std::ostringstream out;
  const Answer a = run_checkpoint({&in, &out, false}, "plan", "quantization plan", "decision | value\nscheme | fp8",
                                  "Confirm?");
  EXPECT_EQ(a.kind, AnswerKind::kYes);
  EXPECT_NE(out.str().find("[quark-checkpoint] scheme | fp8\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("auto-accepted (interactive=off)"), std::string::npos);
}

TEST(Checkpoint, OnReadsAnAnswerAndAsksAgainOnEmptyLines) {
  std::istringstream in("\n\ncalibrate on 256 samples\n");
  std::ostringstream out;
  const Answer a = run_checkpoint({&in, &out, true}, "plan", "plan", "facts", "Confirm?");
  EXPECT_EQ(a.kind, AnswerKind::kChange);
  EXPECT_EQ(a.text, "calibrate on 256 samples");
  std::istringstream eof("");
  EXPECT_EQ(run_checkpoint({&eof, &out, true}, "plan", "plan", "facts", "Confirm?").kind, AnswerKind::kNo);
}

TEST(Checkpoint, InteractiveModes) {
  EXPECT_EQ(resolve_interactive(Interactive::kAuto, true), Interactive::kOn);
  EXPECT_EQ(resolve_interactive(Interactive::kAuto, false), Interactive::kOff);
  EXPECT_EQ(resolve_interactive(Interactive::kOff, true), Interactive::kOff);
  EXPECT_EQ(parse_interactive("on"), Interactive::kOn);
  EXPECT_EQ(test::catch_error([] { parse_interactive("sometimes"); }).kind(), ErrorKind::kUsage);
}

}  // namespace
}  // namespace qloom::agent
