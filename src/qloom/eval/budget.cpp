#include "qloom/eval/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace qloom::eval {

BudgetPlan plan_budget(int64_t total, double first_seconds, int64_t first_tokens,
                       double budget_seconds, const std::string& unit) {
  BudgetPlan p;
  p.units = total;
  first_seconds = std::max(first_seconds, 1e-9);
  p.estimated_total_seconds = first_seconds * double(total);
  if (budget_seconds <= 0 || total <= 0) return p;
  const double fit = std::floor(budget_seconds / first_seconds);
  p.units = std::clamp<int64_t>(fit >= double(total) ? total : int64_t(fit), 1, total);
  p.limited = p.units < total;
  char buf[256];
  std::string rate;
  if (first_tokens > 0) {
    char r[64];
    std::snprintf(r, sizeof r, ", %.0f tokens/s", double(first_tokens) / first_seconds);
    rate = r;
  }
  std::snprintf(buf, sizeof buf,
                "time budget %.0f s: first %s took %.2f s%s; all %lld %s would take ~%.0f s",
                budget_seconds, unit.c_str(), first_seconds, rate.c_str(), (long long)total,
                (unit + "s").c_str(), p.estimated_total_seconds);
  p.message = buf;
  if (p.limited) {
    p.message += " -> limited to the first " + std::to_string(p.units) + " " + unit + (p.units == 1 ? "" : "s");
  } else {
    p.message += " -> all fit";
  }
  return p;
}

}  // namespace qloom::eval
