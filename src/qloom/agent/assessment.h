// assessment.json (mission.md §2): the structured account of a `qloom run` —
// what was asked, one entry per workspace artifact (present, schema-valid
// where a schema exists, key facts), every attempt with its outcome and
// phase timings, the final outcome id and class, the model sizes, the
// validation steps, the eval gap against its threshold, and a verdict.
// Validated against schemas/assessment.schema.json; render_summary gives the
// human summary printed at the end.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/agent/attempt.h"
#include "qloom/agent/outcomes.h"
#include "qloom/agent/workflow.h"
#include "qloom/agent/workspace.h"

namespace qloom::agent {

struct AssessmentInput {
  std::string prompt;
  const RunOptions* options = nullptr;
  const Workspace* workspace = nullptr;
  std::vector<AttemptReport> attempts;
  Classification final;     // the classifier's reading of the workspace after the last attempt
  std::string verdict;      // success | success_unverified | failed | aborted
  double seconds = 0;
};

nlohmann::ordered_json build_assessment(const AssessmentInput& in);
std::string render_summary(const nlohmann::ordered_json& assessment);

}  // namespace qloom::agent
