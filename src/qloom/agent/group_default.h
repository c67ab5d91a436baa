// Seed 000 §4: the group size of a per-group 4-bit scheme the prompt did not
// state ("W4A16", "AWQ 4-bit") is a derived default, not a question.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qloom/agent/intent.h"
#include "qloom/agent/model_analysis.h"

namespace qloom::agent {

struct DerivedGroup {
  std::string scheme;  // "int4_wo_64"
  std::string reason;  // for the decision table: why this group, which layer the stated one misses
};

// The largest of 128, 64, 32 whose scheme (same stem: int4_wo_ / uint4_wo_)
// fits every layer the global `scheme` quantizes — not `excluded`, not
// matched by an override pattern — under the exporter's storage rules
// (scheme_layer_problem). With in.exclude_unsupported, layers no group can
// store are left out of "every" (the plan keeps them in the source dtype).
// nullopt when in.group_size_stated, `scheme` is not a per-group 4-bit
// scheme, it already fits, or no group fits.
std::optional<DerivedGroup> derive_group(const Intent& in, const std::string& scheme,
                                         const std::vector<LinearModule>& modules, const std::vector<bool>& excluded,
                                         const std::vector<std::pair<std::string, std::string>>& overrides);

}  // namespace qloom::agent
