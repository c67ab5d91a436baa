// The attention-probability hook: the softmax output of each attention
// module (Quark's softmax_quant_spec quantizes it), offered to a caller that
// observes it (calibration of prob_output_scale) or rewrites it (simulated
// fp8 attention) before it multiplies the values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace qloom::engine {

struct AttentionSite {
  int layer = -1;
  std::string module;  // the attention module, e.g. "model.layers.3.self_attn"
};

// probs [rows, cols]: rows of softmax probabilities (query rows of one KV
// head's query heads), cols keys; keys a query cannot see hold 0. Called
// from the attention's parallel tasks, concurrently for disjoint blocks:
// the function must be thread-safe and treat rows independently.
using AttentionProbsFn = std::function<void(const AttentionSite&, float* probs, int64_t rows, int64_t cols)>;

// What attend() needs to call the hook: the function and the site.
struct AttentionProbsHook {
  const AttentionProbsFn* fn = nullptr;
  AttentionSite site;
  void operator()(float* probs, int64_t rows, int64_t cols) const {
    if (fn && *fn) (*fn)(site, probs, rows, cols);
  }
};

}  // namespace qloom::engine
