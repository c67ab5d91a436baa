#include "qloom/agent/fix_hypothesis.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"

namespace qloom::agent {
namespace {

TEST(FixHypothesis, RendersTheSeedLayoutAndParsesBack) {
  FixHypothesis f;
  f.attempt = 2;
  f.root_cause = "Quantization ran out of memory with 512 calibration samples.";
  f.actions = {"halve --num_calib_data to 256", "use 1 worker thread"};
  f.risk = "noisier scales";
  f.plan_overrides = {{"num_calib_data", 256}, {"threads", 1}, {"overwrite_output", true}};
  const std::string text = render_fix_hypothesis(f);
  EXPECT_EQ(text.rfind("# Fix hypothesis for attempt 2\n\n## Root cause\n", 0), 0u) << text;
  EXPECT_NE(text.find("## Concrete fix\n- halve --num_calib_data to 256\n- use 1 worker thread\n"), std::string::npos);
  EXPECT_NE(text.find("## Risk\nnoisier scales\n"), std::string::npos);
  const auto back = parse_fix_hypothesis(text, "fix_hypothesis_attempt_2.md");
  EXPECT_EQ(back.attempt, 2);
  EXPECT_EQ(back.root_cause, f.root_cause);
  EXPECT_EQ(back.actions, f.actions);
  EXPECT_EQ(back.risk, f.risk);
  EXPECT_EQ(back.plan_overrides.dump(), f.plan_overrides.dump());
  EXPECT_EQ(fix_hypothesis_file_name(3), "fix_hypothesis_attempt_3.md");
}

TEST(FixHypothesis, RefusesUnknownOrMistypedOverridesAndMissingSections) {
  FixHypothesis f;
  f.root_cause = "x";
  f.actions = {"y"};
  f.risk = "z";
  f.plan_overrides = {{"num_calib_data", 0}};
  auto e = test::catch_error([&] { parse_fix_hypothesis(render_fix_hypothesis(f), "f.md"); });
  EXPECT_EQ(e.item(), "plan_overrides.num_calib_data");
  f.plan_overrides = {{"learning_rate", 1}};
  e = test::catch_error([&] { parse_fix_hypothesis(render_fix_hypothesis(f), "f.md"); });
  EXPECT_EQ(e.item(), "plan_overrides.learning_rate");
  e = test::catch_error([] { parse_fix_hypothesis("# Fix hypothesis for attempt 2\n\n## Root cause\nx\n", "f.md"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.file(), "f.md");
  e = test::catch_error([] { parse_fix_hypothesis("let me try again", "f.md"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace qloom::agent
