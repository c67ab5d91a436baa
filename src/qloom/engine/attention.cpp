#include "qloom/engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "qloom/engine/norms.h"

namespace qloom::engine {

void attend(const AttentionShape& s, const float* q, int64_t T, int64_t pos0, const float* k,
            const float* v, float* out, ThreadPool& pool) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t qrow = s.heads * hd, kvrow = s.kv_heads * hd;
  pool.parallel_for(T * s.heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(pos0 + T));
    std::vector<double> acc(static_cast<size_t>(hd));
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t t = idx / s.heads, h = idx % s.heads, g = h / group;
      const int64_t p = pos0 + t;
      const int64_t lo = s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
      const float* qv = q + t * qrow + h * hd;
      float mx = -INFINITY;
      for (int64_t j = lo; j <= p; ++j) {
        const float* kv = k + j * kvrow + g * hd;
        float dot = 0.0f;
        for (int64_t i = 0; i < hd; ++i) dot += qv[i] * kv[i];
        float sc = dot * s.scale;
        if (s.softcap > 0.0f) sc = s.softcap * std::tanh(sc / s.softcap);
        scores[static_cast<size_t>(j)] = sc;
        mx = std::max(mx, sc);
      }
      double sum = 0.0;
      for (int64_t j = lo; j <= p; ++j) {
        const float e = std::exp(scores[static_cast<size_t>(j)] - mx);
        scores[static_cast<size_t>(j)] = e;
        sum += e;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = lo; j <= p; ++j) {
        const float pj = scores[static_cast<size_t>(j)];
        const float* vv = v + j * kvrow + g * hd;
        for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += static_cast<double>(pj) * vv[i];
      }
      float* o = out + t * qrow + h * hd;
      const double inv = 1.0 / sum;
      for (int64_t i = 0; i < hd; ++i) o[i] = static_cast<float>(acc[static_cast<size_t>(i)] * inv);
    }
  });
}

void attention_block(ForwardContext& ctx, int layer, const AttentionShape& s,
                     const AttentionWeights& w, const Rope& rope, const float* h, int64_t T,
                     int64_t pos0, KvCacheImpl& cache, float* out) {
  const int64_t hd = s.head_dim, qn = s.heads * hd, kn = s.kv_heads * hd;
  std::vector<float> q(static_cast<size_t>(T * qn)), k(static_cast<size_t>(T * kn)),
      v(static_cast<size_t>(T * kn));
  if (w.q.name.empty()) {  // fused qkv_proj: rows [q | k | v]
    std::vector<float> qkv(static_cast<size_t>(T * (qn + 2 * kn)));
    ctx.run_linear(w.qkv, layer, h, T, qkv.data());
    for (int64_t t = 0; t < T; ++t) {
      const float* r = qkv.data() + t * (qn + 2 * kn);
      std::memcpy(q.data() + t * qn, r, sizeof(float) * qn);
      std::memcpy(k.data() + t * kn, r + qn, sizeof(float) * kn);
      std::memcpy(v.data() + t * kn, r + qn + kn, sizeof(float) * kn);
    }
  } else {
    ctx.run_linear(w.q, layer, h, T, q.data());
    ctx.run_linear(w.k, layer, h, T, k.data());
    ctx.run_linear(w.v, layer, h, T, v.data());
  }
  if (!w.q_norm.empty()) {
    rms_norm(q.data(), q.data(), T * s.heads, hd, w.q_norm.data(), s.norm_eps, &ctx.pool);
    rms_norm(k.data(), k.data(), T * s.kv_heads, hd, w.k_norm.data(), s.norm_eps, &ctx.pool);
  }
  std::vector<float> cos, sin;
  rope.tables(pos0, T, cos, sin);
  const int64_t half = rope.rotary_dim() / 2;
  ctx.pool.parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      rope.apply(q.data() + t * qn, s.heads, hd, cos.data() + t * half, sin.data() + t * half);
      rope.apply(k.data() + t * kn, s.kv_heads, hd, cos.data() + t * half, sin.data() + t * half);
    }
  });
  float* kc = cache.keys(layer);
  float* vc = cache.values(layer);
  std::memcpy(kc + pos0 * kn, k.data(), sizeof(float) * T * kn);
  std::memcpy(vc + pos0 * kn, v.data(), sizeof(float) * T * kn);
  std::vector<float> ctx_out(static_cast<size_t>(T * qn));
  attend(s, q.data(), T, pos0, kc, vc, ctx_out.data(), ctx.pool);
  ctx.run_linear(w.o, layer, ctx_out.data(), T, out);
}

}  // namespace qloom::engine
