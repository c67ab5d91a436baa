#include "qloom/engine/forward_context.h"

#include <algorithm>

namespace qloom::engine {

void ForwardContext::run_linear(const std::string& name, const LinearWeight& w, int layer,
                                const float* x, int64_t rows, float* y) {
  const LinearSite site{name, layer};
  if (hooks && hooks->linear_input) {
    input_copy_.assign(x, x + rows * w.in);
    hooks->linear_input(site, input_copy_.data(), rows, w.in);
    linear(input_copy_.data(), rows, w, y, pool);
  } else {
    linear(x, rows, w, y, pool);
  }
  if (hooks && hooks->linear_output) hooks->linear_output(site, y, rows, w.out);
}

}  // namespace qloom::engine
