// Self-attention for one decoder layer: q/k/v projections (+ optional per-head
// q/k RMSNorm), RoPE, KV-cache append, causal (optionally sliding-window)
// grouped-query attention with optional logit softcapping, o_proj.
#pragma once

#include <cstdint>

#include "qloom/engine/attention_probs.h"
#include "qloom/engine/forward_context.h"
#include "qloom/engine/layer_weights.h"
#include "qloom/engine/rope.h"

namespace qloom::engine {

struct AttentionShape {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;      // multiplies q·k
  float softcap = 0.0f;    // 0: off
  int64_t window = 0;      // 0: full causal; else a query at p sees keys (p - window, p]
  float norm_eps = 1e-6f;  // for q/k norm
  // > 0: the KV cache is fp8 e4m3 with these scales: K (after RoPE) and V are
  // rounded to fp8 (fp8_kv_round, kv_cache.h) before they enter the cache.
  float kv_k_scale = 0.0f, kv_v_scale = 0.0f;
};

// Scores and mixes values for T queries at positions [pos0, pos0 + T) against
// keys/values [0, pos0 + T) already in `k`, `v` (row stride kv_heads*head_dim).
// q, out: [T, heads*head_dim].
// attend(): blocked — for each KV head and block of queries, the scores of
// all its query heads are one GEMM through linear() (Q·Kᵀ), softmax per row,
// then one GEMM for P·V; parallel over (KV head, query block).
// attend_ref(): the plain reference, one (query, head) at a time with double
// accumulation; tests/engine/attention_test.cpp compares the two.
// `probs` (optional) sees each block of normalized softmax rows before they
// weigh the values (attention_probs.h); attend_ref offers it one row at a time.
void attend(const AttentionShape& s, const float* q, int64_t T, int64_t pos0, const float* k,
            const float* v, float* out, ThreadPool& pool, const AttentionProbsHook* probs = nullptr);
void attend_ref(const AttentionShape& s, const float* q, int64_t T, int64_t pos0, const float* k,
                const float* v, float* out, ThreadPool& pool, const AttentionProbsHook* probs = nullptr);

// The whole attention sub-block: h [T, hidden] -> out [T, hidden]. Writes
// this layer's K/V at positions [pos0, pos0 + T) of `kc` / `vc` (this layer's
// key / value buffers, row stride kv_heads*head_dim, holding positions
// [0, pos0) already) and attends over [0, pos0 + T). It is
// attention_context followed by o_proj on the context.
void attention_block(ForwardContext& ctx, int layer, const AttentionShape& s,
                     const AttentionWeights& w, const Rope& rope, const float* h, int64_t T,
                     int64_t pos0, float* kc, float* vc, float* out);

// Everything before o_proj: q/k/v, q/k norm, RoPE, the K/V append, attend.
// context: [T, heads*head_dim], o_proj's input.
void attention_context(ForwardContext& ctx, int layer, const AttentionShape& s, const AttentionWeights& w,
                       const Rope& rope, const float* h, int64_t T, int64_t pos0, float* kc, float* vc,
                       float* context);

// One decode row of several sequences (batched decode): the row's position
// and its sequence's K/V buffers for this layer (holding [0, pos)).
struct RowSlot {
  int64_t pos = 0;
  float* kc = nullptr;
  float* vc = nullptr;
};

// attention_block for B rows that belong to B different sequences: q/k/v and
// o_proj run once over all rows; each row then takes RoPE at its own
// position, appends its K/V to its own buffers and attends over them. Row b
// gets exactly what attention_block(h_b, T = 1, rows[b].pos, ...) computes,
// as long as the linears give a row the same result whatever the row count
// (the GEMV kernels below 128 rows do; the hooks must not mix rows).
void attention_block_rows(ForwardContext& ctx, int layer, const AttentionShape& s, const AttentionWeights& w,
                          const Rope& rope, const float* h, int64_t B, const RowSlot* rows, float* out);

}  // namespace qloom::engine
