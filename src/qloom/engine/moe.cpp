#include "qloom/engine/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "qloom/engine/mlp.h"

namespace qloom::engine {

void moe_block(ForwardContext& ctx, int layer, const MoeShape& s, const MoeWeights& w,
               Activation act, const float* h, int64_t rows, float* out) {
  const int64_t E = w.router.w.out, D = w.router.w.in, K = s.top_k;
  std::vector<float> logits(static_cast<size_t>(rows * E));
  ctx.run_linear(w.router, layer, h, rows, logits.data());

  // Routing: per row, softmax then top-k (ties: lower expert index first, as torch.topk).
  std::vector<int64_t> chosen(static_cast<size_t>(rows * K));
  std::vector<float> weight(static_cast<size_t>(rows * K));
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t r = 0; r < rows; ++r) {
    float* l = logits.data() + r * E;
    const float mx = *std::max_element(l, l + E);
    double sum = 0.0;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(l[e] - mx));
    for (int64_t e = 0; e < E; ++e) l[e] = static_cast<float>(std::exp(static_cast<double>(l[e] - mx)) / sum);
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = e;
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int64_t a, int64_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    float ksum = 0.0f;
    for (int64_t i = 0; i < K; ++i) ksum += l[order[static_cast<size_t>(i)]];
    for (int64_t i = 0; i < K; ++i) {
      const int64_t e = order[static_cast<size_t>(i)];
      chosen[static_cast<size_t>(r * K + i)] = e;
      weight[static_cast<size_t>(r * K + i)] = s.norm_topk_prob ? l[e] / ksum : l[e];
    }
  }

  std::memset(out, 0, sizeof(float) * rows * D);
  std::vector<int64_t> routed;
  std::vector<float> routed_w, xin, yout;
  for (int64_t e = 0; e < E; ++e) {
    routed.clear();
    routed_w.clear();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < K; ++i) {
        if (chosen[static_cast<size_t>(r * K + i)] == e) {
          routed.push_back(r);
          routed_w.push_back(weight[static_cast<size_t>(r * K + i)]);
        }
      }
    }
    if (routed.empty()) continue;
    const int64_t n = static_cast<int64_t>(routed.size());
    xin.resize(static_cast<size_t>(n * D));
    yout.resize(static_cast<size_t>(n * D));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(xin.data() + i * D, h + routed[static_cast<size_t>(i)] * D, sizeof(float) * D);
    mlp_block(ctx, layer, w.experts[static_cast<size_t>(e)], act, xin.data(), n, yout.data());
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + routed[static_cast<size_t>(i)] * D;
      const float* y = yout.data() + i * D;
      const float wt = routed_w[static_cast<size_t>(i)];
      for (int64_t d = 0; d < D; ++d) o[d] += wt * y[d];
    }
  }

  if (w.has_shared) {
    std::vector<float> shared(static_cast<size_t>(rows * D)), gate(static_cast<size_t>(rows));
    mlp_block(ctx, layer, w.shared, act, h, rows, shared.data());
    ctx.run_linear(w.shared_gate, layer, h, rows, gate.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float g = 1.0f / (1.0f + std::exp(-gate[static_cast<size_t>(r)]));
      for (int64_t d = 0; d < D; ++d) out[r * D + d] += g * shared[static_cast<size_t>(r * D + d)];
    }
  }
}

}  // namespace qloom::engine
