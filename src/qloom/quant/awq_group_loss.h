// The AWQ stage's loss for one scaling group (quant/awq_stage.h), per
// calibration sample, as awq_search_scales_pruned (quant/awq.h) takes it:
// the reference pass records, per sample, where its rows of the inspected
// output (and of a single-linear group's inputs) start; a part is one
// sample, its squared error summed in element order.
//   rerun: the candidates are swapped into the layer and the sample runs
//          again (`run`: the attention half, the whole layer, or the
//          feed-forward half on the kept first-half output);
//   direct: a group that inspects its only linear evaluates it on the kept
//          inputs (one GEMM per sample), without a layer pass.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qloom/engine/layer_runner.h"
#include "qloom/quant/awq.h"
#include "qloom/quant/layer_groups.h"

namespace qloom::quant {

// Runs calibration sample s through the layer (or a part of it) with hooks.
using AwqSampleRun = std::function<void(size_t sample, const engine::ForwardHooks& hooks)>;

struct AwqReference {
  std::vector<double> abs_sum;  // sum of |x| per channel at the group's input
  int64_t tokens = 0;           // rows seen there
  std::vector<float> out;       // inspected output, all samples in order
  std::vector<size_t> out_off;  // samples + 1 offsets into out
  bool direct = false;          // xs holds the inputs of the group's only linear
  std::vector<float> xs;
  std::vector<size_t> xs_off;   // samples + 1 offsets into xs (direct only)
  // Gram form (quant/awq_gram_loss.h): Σ_t x_tᵀ x_t of the only linear's
  // inputs, [channels, channels]; then out, xs and direct stay empty / false.
  bool gram = false;
  std::vector<double> gram_sum;
};

// The reference pass of a layer's scaling groups, all at once: one pass over
// the calibration samples with the layer's current (float) weights, the
// hooks of every group in it. Per group: mean |x| at its input site, the
// inspected output (per sample, in order), and, for a group that inspects
// its only linear (v -> o, up -> down, MoE experts), the Gram matrix of that
// linear's inputs when it fits in direct_bytes (12 bytes per entry while
// summed), else those inputs themselves while they fit (else direct is false
// and xs empty).
class AwqReferenceCollector {
 public:
  struct Group {
    const ScalingGroup* group;
    std::string out_module;
  };
  AwqReferenceCollector(std::vector<Group> groups, uint64_t direct_bytes, ThreadPool* pool);
  ~AwqReferenceCollector();
  // The hooks to run every sample with; call begin_sample() before each
  // sample (in order). Throws kInternal when an input width is not the
  // group's channel count.
  engine::ForwardHooks hooks();
  void begin_sample();
  // Per group, in the constructor's order; the collector is spent.
  std::vector<AwqReference> finish();

 private:
  struct State;
  std::vector<Group> groups_;
  std::vector<std::unique_ptr<State>> st_;
  uint64_t direct_bytes_;
  ThreadPool* pool_;
};

// Token parts: when every token's loss depends on that token alone (a
// direct group; or the feed-forward half, given its inputs `ff_states` =
// the kept first-half output per sample, and one inspected row per token),
// the parts are instead blocks of kTokenPart rows in decreasing order of the
// reference output's squared norm: the tokens that carry most of the error
// come first, so a worse grid point passes the search's bound sooner. The
// rows are permuted copies; the loss is the same sum, re-associated.
class AwqGroupLoss final : public AwqPartLoss {
 public:
  static constexpr int64_t kTokenPart = 128;

  // `runner` holds the linears the candidates replace (rerun); `run` and
  // `ff_states` (may be null) must outlive this.
  AwqGroupLoss(engine::LayerRunner& runner, AwqReference ref, std::string out_module, AwqSampleRun run,
               ThreadPool& pool, const std::vector<std::vector<float>>* ff_states);
  ~AwqGroupLoss() override;
  int64_t parts() const override { return parts_; }
  double count() const override { return static_cast<double>(ref_.out.size()); }
  bool token_parts() const { return tokens_; }
  void begin(const AwqCandidates& candidates) override;
  double part_se(int64_t p) override;
  void end() override;

 private:
  void permute_rows(const std::vector<std::vector<float>>* ff_states);
  double direct_se(size_t x0, size_t x1, size_t o0, size_t o1);
  double rerun_se(size_t p);
  double ff_se(size_t p);

  engine::LayerRunner& runner_;
  AwqReference ref_;
  std::string out_;
  AwqSampleRun run_;
  ThreadPool& pool_;
  int64_t parts_ = 0;
  bool tokens_ = false;
  // Token parts: rows (tokens), width of an inspected-output row and of an
  // input row (the direct linear's in_features, or hidden for the feed-forward half).
  int64_t rows_ = 0, out_cols_ = 0, hidden_ = 0;
  std::vector<float> ff_in_;  // token parts, feed-forward: permuted first-half rows
  const engine::LinearWeight* direct_w_ = nullptr;
  engine::LinearWeight direct_copy_;  // the direct candidate, prepacked
  std::vector<std::pair<engine::LinearWeight*, engine::LinearWeight>> saved_;  // swapped-out originals
  std::vector<float> y_;
};

}  // namespace qloom::quant
