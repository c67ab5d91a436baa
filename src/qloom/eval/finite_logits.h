// finite_forward: the one place the eval metrics (ppl, kld, multiple-choice
// log-likelihoods) get their logits (issue 30 item 5: `eval` of a model with
// an inf weight printed `PPL = -nan` and exited 0). A non-finite logit is an
// error naming the layer where the values first turn non-finite.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/engine/model.h"

namespace qloom::eval {

// model.forward(tokens, cache, /*last_only=*/false, hooks) from a cleared
// cache, the logits checked. On a NaN / inf logit the tokens run once more
// with observing hooks (around `hooks`) to find the first linear whose input
// or output is non-finite, and kInvalidInput is thrown with item = that
// module ("logits" when every linear stayed finite) and a message naming
// `metric` (e.g. "ppl").
std::vector<float> finite_forward(engine::Model& model, std::span<const int32_t> tokens, engine::KvCache& cache,
                                  const engine::ForwardHooks* hooks, std::string_view metric);

// The first module (in the forward's call order) whose linear input or
// output holds NaN / inf when `tokens` run from a cleared `cache`, as
// "the input of M" / "the output of M"; "" when none does.
std::string locate_non_finite(engine::Model& model, std::span<const int32_t> tokens, engine::KvCache& cache,
                              const engine::ForwardHooks* hooks, std::string* module);

}  // namespace qloom::eval
