#include "qloom/engine/mlp.h"

#include <vector>

namespace qloom::engine {

void mlp_inner(ForwardContext& ctx, int layer, const MlpWeights& w, Activation act, const float* h, int64_t rows,
               float* mid) {
  if (rows == 0) return;
  const int64_t inter = w.down.w.in;
  if (w.gate.name.empty()) {
    std::vector<float> gu(static_cast<size_t>(rows * 2 * inter));
    ctx.run_linear(w.gate_up, layer, h, rows, gu.data());
    gated_activation(act, gu.data(), 2 * inter, gu.data() + inter, 2 * inter, mid, rows,
                     inter, ctx.pool);
  } else {
    std::vector<float> g(static_cast<size_t>(rows * inter)), u(static_cast<size_t>(rows * inter));
    ctx.run_linear(w.gate, layer, h, rows, g.data());
    ctx.run_linear(w.up, layer, h, rows, u.data());
    gated_activation(act, g.data(), inter, u.data(), inter, mid, rows, inter, ctx.pool);
  }
}

void mlp_block(ForwardContext& ctx, int layer, const MlpWeights& w, Activation act, const float* h,
               int64_t rows, float* out) {
  if (rows == 0) return;
  std::vector<float> mid(static_cast<size_t>(rows * w.down.w.in));
  mlp_inner(ctx, layer, w, act, h, rows, mid.data());
  ctx.run_linear(w.down, layer, mid.data(), rows, out);
}

}  // namespace qloom::engine
