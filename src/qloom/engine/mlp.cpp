#include "qloom/engine/mlp.h"

#include <vector>

namespace qloom::engine {

void mlp_block(ForwardContext& ctx, int layer, const MlpWeights& w, Activation act, const float* h,
               int64_t rows, float* out) {
  if (rows == 0) return;
  const int64_t inter = w.down.w.in;
  std::vector<float> mid(static_cast<size_t>(rows * inter));
  if (w.gate.name.empty()) {
    std::vector<float> gu(static_cast<size_t>(rows * 2 * inter));
    ctx.run_linear(w.gate_up, layer, h, rows, gu.data());
    gated_activation(act, gu.data(), 2 * inter, gu.data() + inter, 2 * inter, mid.data(), rows,
                     inter, ctx.pool);
  } else {
    std::vector<float> g(static_cast<size_t>(rows * inter)), u(static_cast<size_t>(rows * inter));
    ctx.run_linear(w.gate, layer, h, rows, g.data());
    ctx.run_linear(w.up, layer, h, rows, u.data());
    gated_activation(act, g.data(), inter, u.data(), inter, mid.data(), rows, inter, ctx.pool);
  }
  ctx.run_linear(w.down, layer, mid.data(), rows, out);
}

}  // namespace qloom::engine
