// Model: a decoder-only transformer loaded from a HF model directory and run
// on the CPU with fp32 activations/accumulation. Architectures: llama,
// mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, mixtral,
// qwen2_moe, qwen3_moe.
//
// forward() appends `tokens` to the sequence held in `cache` (batched prefill
// when the cache is empty, one token per call when generating) and returns
// logits. Hooks let layers above observe or rewrite every linear layer's
// input and output (calibration observers, activation / KV fake-quant)
// without the engine knowing about quantization.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qloom/core/thread_pool.h"
#include "qloom/engine/attention_probs.h"
#include "qloom/model/model_config.h"
#include "qloom/engine/weight_source.h"

namespace qloom::engine {

// One linear layer call site, named as in the checkpoint minus ".weight",
// e.g. "model.layers.3.self_attn.k_proj", "model.layers.0.mlp.experts.5.up_proj".
struct LinearSite {
  const std::string& module;
  int layer;  // decoder layer index, -1 for lm_head
};

// Every linear runs through the hooks, lm_head (layer -1) and MoE routers
// included; MoE experts see only the rows routed to them, phi3 its fused
// qkv_proj / gate_up_proj. An input hook gets a private copy of x: rewriting
// it affects only that linear (not q/k/v siblings or the residual stream).
struct ForwardHooks {
  // Called with the linear's input x[rows, cols] before the matmul; may modify it.
  std::function<void(const LinearSite&, float* x, int64_t rows, int64_t cols)> linear_input;
  // Called with the linear's output y[rows, cols] after matmul (+bias); may modify it.
  std::function<void(const LinearSite&, float* y, int64_t rows, int64_t cols)> linear_output;
  // Called with each attention module's softmax output before it weighs the
  // values; may modify it (attention_probs.h: thread-safe, row-independent).
  AttentionProbsFn attention_probs;
  // Called with each attention's keys after RoPE (and q/k norms) — what a KV
  // cache stores — [rows, kv_heads * head_dim], before an fp8 KV cache rounds
  // them; `site` names the k projection (k_proj, or phi3's fused qkv_proj).
  // Read-only; called from the forward's own thread.
  std::function<void(const LinearSite&, const float* k, int64_t rows, int64_t cols)> rotated_keys;
};

struct LoadOptions {
  // Keep linear weights as BF16 (halves memory; converted on the fly in the
  // GEMM) or F32. kAuto: BF16 when the checkpoint stores BF16, else F32.
  // The token embedding follows the same choice (a BF16 embedding of a large
  // vocabulary stays half size; looked-up rows are widened to fp32); with
  // tie_word_embeddings lm_head shares it. Norm weights are always fp32.
  enum class Weights { kAuto, kF32, kBF16 } weights = Weights::kAuto;
  unsigned threads = 0;  // 0 = hardware concurrency
  // How unquantized (F32 / BF16) linears compute. kF32: fp32 activations,
  // exact fp32 accumulation (the default; what eval and validate use). kBF16:
  // weights held as bf16 and activations rounded to bf16 on the native bf16
  // dot kernel (native/qlinear.h), as llama.cpp's BF16 does; lm_head too
  // (a tied one gets its own bf16 copy). Linears the weight source hands over
  // natively (WeightSource::load_native) are unaffected.
  enum class Compute { kF32, kBF16 } compute = Compute::kF32;
  // Per decoder layer, the (k, v) scales of an fp8 e4m3 KV cache: when set
  // (one pair per layer), caches store keys (after RoPE) and values as fp8
  // codes, q = e4m3(clamp(x / scale, ±448)), half the bytes of bf16, and
  // attention reads them back as code · scale. Empty: fp32 cache.
  std::vector<std::pair<float, float>> kv_cache_fp8_scales;
};

class KvCache;

class Model {
 public:
  // Reads config.json (ModelConfig) and all weights from `weights` (default:
  // the directory's safetensors). Throws qloom::Error: kUnsupported for an
  // architecture or config feature the engine lacks (naming it); kInvalidInput
  // for missing/mis-shaped tensors (naming the tensor and expected shape).
  static std::unique_ptr<Model> load(const std::filesystem::path& model_dir,
                                     const LoadOptions& options = {},
                                     const WeightSource* weights = nullptr);
  virtual ~Model() = default;

  virtual const model::ModelConfig& config() const = 0;
  virtual ThreadPool& pool() = 0;

  // A cache able to hold up to `max_tokens` positions; its memory is taken
  // as positions are written (KvCacheImpl::grow), not up front.
  virtual std::unique_ptr<KvCache> new_cache(int64_t max_tokens) const = 0;

  // Runs `tokens` after the cache's current length; returns logits
  // [tokens.size(), vocab] row-major, or only the last row when last_only.
  // Throws kInvalidInput when the cache would overflow or a token id is out of range.
  virtual std::vector<float> forward(std::span<const int32_t> tokens, KvCache& cache,
                                     bool last_only = false, const ForwardHooks* hooks = nullptr) = 0;

  // Batched decode: appends tokens[b] to the sequence in caches[b] for every
  // b (distinct caches) in one pass and returns the next-token logits
  // [B, vocab]. Row b is bit for bit forward({tokens[b]}, *caches[b], true)
  // when the hooks treat rows independently (no dynamic per-tensor
  // activation scale) and B < 128 (the GEMV kernels give a row the same
  // result whatever the row count). Throws as forward() does, before any
  // cache changes. This default runs the sequences one after the other.
  virtual std::vector<float> forward_batch(std::span<const int32_t> tokens, std::span<KvCache* const> caches,
                                           const ForwardHooks* hooks = nullptr);

  // Bytes of weights held.
  virtual size_t weight_bytes() const = 0;
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual int64_t size() const = 0;      // positions held
  virtual int64_t capacity() const = 0;
  virtual void clear() = 0;              // back to empty (memory kept)
  virtual void truncate(int64_t n) = 0;  // keep the first n positions
  // Bytes the cache holds per position (all layers, keys and values).
  virtual size_t bytes_per_token() const = 0;
  // Bytes of storage held now: the engine's cache grows with size() (in
  // chunks), so this is about size() · bytes_per_token(), not capacity()'s.
  virtual size_t allocated_bytes() const { return 0; }
  // Bytes the cache holds once `positions` positions are stored (what
  // allocated_bytes() reaches at most for a cache of that capacity).
  virtual size_t bytes_for(int64_t positions) const { return size_t(positions) * bytes_per_token(); }
};

}  // namespace qloom::engine
