#include "qloom/engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "qloom/engine/kv_cache.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/norms.h"
#include "qloom/engine/vector_exp.h"

namespace qloom::engine {
namespace {

// Max of x[0, n) (exact in any order; four running maxima break the chain).
float max_of(const float* x, int64_t n) {
  float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; ++l) m[l] = std::max(m[l], x[j + l]);
  for (; j < n; ++j) m[0] = std::max(m[0], x[j]);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// Σ x[0, n) in double, in a fixed order: four partial sums over j mod 4
// (the tail into the first), then (s0 + s1) + (s2 + s3). Plain scalar code,
// so the same bits on every ISA.
double sum_of(const float* x, int64_t n) {
  double s[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; ++l) s[l] += x[j + l];
  for (; j < n; ++j) s[0] += x[j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace

void attend_ref(const AttentionShape& s, const float* q, int64_t T, int64_t pos0, const float* k,
                const float* v, float* out, ThreadPool& pool, const AttentionProbsHook* probs) {
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
      double inv = 1.0 / sum;
      if (probs && probs->fn) {  // the hook sees (and may change) the normalized row
        for (int64_t j = lo; j <= p; ++j)
          scores[static_cast<size_t>(j)] = static_cast<float>(scores[static_cast<size_t>(j)] * inv);
        (*probs)(scores.data() + lo, 1, p - lo + 1);
        inv = 1.0;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = lo; j <= p; ++j) {
        const float pj = scores[static_cast<size_t>(j)];
        const float* vv = v + j * kvrow + g * hd;
        for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += static_cast<double>(pj) * vv[i];
      }
      float* o = out + t * qrow + h * hd;
      for (int64_t i = 0; i < hd; ++i) o[i] = static_cast<float>(acc[static_cast<size_t>(i)] * inv);
    }
  });
}

void attend(const AttentionShape& s, const float* q, int64_t T, int64_t pos0, const float* k,
            const float* v, float* out, ThreadPool& pool, const AttentionProbsHook* probs) {
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t qrow = s.heads * hd, kvrow = s.kv_heads * hd;
  // Query block: enough rows for the GEMM kernels, few enough blocks to
  // balance the threads.
  const int64_t qb = T >= 64 ? 64 : T;
  const int64_t nblocks = (T + qb - 1) / qb;
  pool.parallel_for(s.kv_heads * nblocks, [&](int64_t begin, int64_t end) {
    LinearWeight kw, vw;  // keys [nk, hd] and values transposed [hd, nk] of this block
    std::vector<float> qs, scores, mixed;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g = task / nblocks, blk = task % nblocks;
      const int64_t t0 = blk * qb, t1 = std::min(T, t0 + qb), nq = t1 - t0;
      // Keys any query of the block may see: [lo, hi).
      const int64_t hi = pos0 + t1;
      const int64_t lo = s.window > 0 ? std::max<int64_t>(0, pos0 + t0 - s.window + 1) : 0;
      const int64_t nk = hi - lo;
      kw.type = vw.type = WeightType::kF32;
      kw.out = nk;
      kw.in = hd;
      kw.f32.resize(static_cast<size_t>(nk * hd));
      vw.out = hd;
      vw.in = nk;
      vw.f32.resize(static_cast<size_t>(nk * hd));
      for (int64_t j = 0; j < nk; ++j) {
        const float* kr = k + (lo + j) * kvrow + g * hd;
        const float* vr = v + (lo + j) * kvrow + g * hd;
        std::memcpy(kw.f32.data() + j * hd, kr, sizeof(float) * static_cast<size_t>(hd));
        for (int64_t i = 0; i < hd; ++i) vw.f32[static_cast<size_t>(i * nk + j)] = vr[i];
      }
      // Rows: (query head of the group, query) -> [group * nq, hd].
      const int64_t rows = group * nq;
      qs.resize(static_cast<size_t>(rows * hd));
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t t = 0; t < nq; ++t)
          std::memcpy(qs.data() + (hh * nq + t) * hd, q + (t0 + t) * qrow + (g * group + hh) * hd,
                      sizeof(float) * static_cast<size_t>(hd));
      scores.resize(static_cast<size_t>(rows * nk));
      linear(qs.data(), rows, kw, scores.data(), pool);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = pos0 + t0 + r % nq;  // this query's position
        const int64_t first = s.window > 0 ? std::max<int64_t>(0, p - s.window + 1) : 0;
        float* sr = scores.data() + r * nk;
        // The keys this query sees are j in [j0, j1); the others weigh 0.
        const int64_t j0 = std::max<int64_t>(0, first - lo), j1 = std::min<int64_t>(nk, p - lo + 1);
        for (int64_t j = j0; j < j1; ++j) {
          float sc = sr[j] * s.scale;
          if (s.softcap > 0.0f) sc = s.softcap * std::tanh(sc / s.softcap);
          sr[j] = sc;
        }
        const float mx = max_of(sr + j0, j1 - j0);
        for (int64_t j = j0; j < j1; ++j) sr[j] -= mx;
        exp_f32(sr + j0, sr + j0, j1 - j0);
        std::fill(sr, sr + j0, 0.0f);
        std::fill(sr + j1, sr + nk, 0.0f);
        const double sum = sum_of(sr + j0, j1 - j0);
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < nk; ++j) sr[j] *= inv;
      }
      if (probs) (*probs)(scores.data(), rows, nk);
      mixed.resize(static_cast<size_t>(rows * hd));
      linear(scores.data(), rows, vw, mixed.data(), pool);
      for (int64_t hh = 0; hh < group; ++hh)
        for (int64_t t = 0; t < nq; ++t)
          std::memcpy(out + (t0 + t) * qrow + (g * group + hh) * hd, mixed.data() + (hh * nq + t) * hd,
                      sizeof(float) * static_cast<size_t>(hd));
    }
  });
}

namespace {

// q / k / v [T, heads*hd | kv_heads*hd] of h [T, hidden], q/k-normed when the model has the norms.
void project_qkv(ForwardContext& ctx, int layer, const AttentionShape& s, const AttentionWeights& w, const float* h,
                 int64_t T, std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
  const int64_t hd = s.head_dim, qn = s.heads * hd, kn = s.kv_heads * hd;
  q.resize(static_cast<size_t>(T * qn));
  k.resize(static_cast<size_t>(T * kn));
  v.resize(static_cast<size_t>(T * kn));
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
}

// The caller's attention_probs hook for this layer's attention module (the
// parent of o_proj), or an empty hook.
AttentionProbsHook probs_hook(const ForwardContext& ctx, int layer, const AttentionWeights& w) {
  AttentionProbsHook h;
  if (!ctx.hooks || !ctx.hooks->attention_probs) return h;
  h.fn = &ctx.hooks->attention_probs;
  h.site.layer = layer;
  const size_t dot = w.o.name.rfind('.');
  h.site.module = dot == std::string::npos ? w.o.name : w.o.name.substr(0, dot);
  return h;
}

// The caller's rotated_keys hook, with the keys as the cache will hold them.
void report_rotated_keys(const ForwardContext& ctx, int layer, const AttentionWeights& w, const float* k,
                         int64_t rows, int64_t cols) {
  if (!ctx.hooks || !ctx.hooks->rotated_keys) return;
  const LinearSite site{w.k.name.empty() ? w.qkv.name : w.k.name, layer};
  ctx.hooks->rotated_keys(site, k, rows, cols);
}

// An fp8 KV cache stores K and V rounded to fp8 at the layer's scales.
void round_kv(const AttentionShape& s, float* k, float* v, int64_t n) {
  if (s.kv_k_scale <= 0.0f) return;
  fp8_kv_round(k, n, s.kv_k_scale);
  fp8_kv_round(v, n, s.kv_v_scale);
}

}  // namespace

void attention_context(ForwardContext& ctx, int layer, const AttentionShape& s, const AttentionWeights& w,
                       const Rope& rope, const float* h, int64_t T, int64_t pos0, float* kc, float* vc,
                       float* context) {
  const int64_t hd = s.head_dim, qn = s.heads * hd, kn = s.kv_heads * hd;
  std::vector<float> q, k, v;
  project_qkv(ctx, layer, s, w, h, T, q, k, v);
  std::vector<float> cos, sin;
  rope.tables(pos0, T, cos, sin);
  const int64_t half = rope.rotary_dim() / 2;
  ctx.pool.parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      rope.apply(q.data() + t * qn, s.heads, hd, cos.data() + t * half, sin.data() + t * half);
      rope.apply(k.data() + t * kn, s.kv_heads, hd, cos.data() + t * half, sin.data() + t * half);
    }
  });
  report_rotated_keys(ctx, layer, w, k.data(), T, kn);
  round_kv(s, k.data(), v.data(), T * kn);
  std::memcpy(kc + pos0 * kn, k.data(), sizeof(float) * T * kn);
  std::memcpy(vc + pos0 * kn, v.data(), sizeof(float) * T * kn);
  const AttentionProbsHook hook = probs_hook(ctx, layer, w);
  attend(s, q.data(), T, pos0, kc, vc, context, ctx.pool, hook.fn ? &hook : nullptr);
}

void attention_block(ForwardContext& ctx, int layer, const AttentionShape& s,
                     const AttentionWeights& w, const Rope& rope, const float* h, int64_t T,
                     int64_t pos0, float* kc, float* vc, float* out) {
  std::vector<float> context(static_cast<size_t>(T * s.heads * s.head_dim));
  attention_context(ctx, layer, s, w, rope, h, T, pos0, kc, vc, context.data());
  ctx.run_linear(w.o, layer, context.data(), T, out);
}

void attention_block_rows(ForwardContext& ctx, int layer, const AttentionShape& s, const AttentionWeights& w,
                          const Rope& rope, const float* h, int64_t B, const RowSlot* rows, float* out) {
  const int64_t hd = s.head_dim, qn = s.heads * hd, kn = s.kv_heads * hd;
  std::vector<float> q, k, v;
  project_qkv(ctx, layer, s, w, h, B, q, k, v);
  std::vector<float> context(static_cast<size_t>(B * qn)), cos, sin;
  const AttentionProbsHook hook = probs_hook(ctx, layer, w);
  for (int64_t b = 0; b < B; ++b) {
    const RowSlot& r = rows[b];
    rope.tables(r.pos, 1, cos, sin);
    rope.apply(q.data() + b * qn, s.heads, hd, cos.data(), sin.data());
    rope.apply(k.data() + b * kn, s.kv_heads, hd, cos.data(), sin.data());
    report_rotated_keys(ctx, layer, w, k.data() + b * kn, 1, kn);
    round_kv(s, k.data() + b * kn, v.data() + b * kn, kn);
    std::memcpy(r.kc + r.pos * kn, k.data() + b * kn, sizeof(float) * kn);
    std::memcpy(r.vc + r.pos * kn, v.data() + b * kn, sizeof(float) * kn);
    attend(s, q.data() + b * qn, 1, r.pos, r.kc, r.vc, context.data() + b * qn, ctx.pool, hook.fn ? &hook : nullptr);
  }
  ctx.run_linear(w.o, layer, context.data(), B, out);
}

}  // namespace qloom::engine
