// Time budget: after the first unit of work (window, question) has been
// timed, decide how many units fit in the budget, and describe the decision.
#pragma once

#include <cstdint>
#include <string>

namespace qloom::eval {

struct BudgetPlan {
  int64_t units = 0;     // units to run in total (>= 1, <= total)
  bool limited = false;  // fewer than `total`
  double estimated_total_seconds = 0;  // for all `total` units
  std::string message;   // one line for the user
};

// `first_seconds`: time of the first unit; `first_tokens`: tokens it
// processed (for the tokens/s figure; 0 to omit). budget_seconds <= 0 means
// no budget (all units). The first unit always counts as done. `unit` is
// singular ("window"); the plural adds "s".
BudgetPlan plan_budget(int64_t total, double first_seconds, int64_t first_tokens,
                       double budget_seconds, const std::string& unit);

}  // namespace qloom::eval
