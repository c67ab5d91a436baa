// The AWQ loss of a scaling group that inspects its only linear (up_proj ->
// down_proj, v_proj -> o_proj, each MoE expert's up -> down; quant/awq_stage.h)
// from the Gram matrix of that linear's calibration inputs, G = Σ_t x_tᵀ x_t
// [in, in]: the squared error of the candidate's outputs over every token is
//   Σ_t ‖x_t (W_c − W)ᵀ‖² = Σ_o Δw_o G Δw_oᵀ,  Δw_o = row o of W_c − W,
// so a grid point costs one [out, in] x [in, in] product instead of a pass
// over the tokens (SmolLM2-135M down_proj, 13,978 tokens: 1.4 G instead of
// 12.4 G multiply-adds). The bias cancels. A part is a block of kRowPart
// output rows; its error is Σ over its rows of Δw_o · (Δw_o G), the product
// in fp32 (engine::linear), the dot products summed in double in row order.
// The same loss as evaluating the candidate on the kept inputs
// (AwqGroupLoss's direct path), re-associated; count() is tokens x out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qloom/core/thread_pool.h"
#include "qloom/engine/gemm.h"
#include "qloom/quant/awq.h"

namespace qloom::quant {

class AwqGramLoss final : public AwqPartLoss {
 public:
  static constexpr int64_t kRowPart = 128;  // engine::linear takes its packed GEMM from 128 rows

  // w: the linear's original weight (F32 or BF16; must outlive this).
  // gram: Σ_t x_tᵀ x_t, [w.in, w.in] row-major (symmetric), over `tokens`
  // rows. Throws kInternal for a gram of the wrong size or tokens < 1.
  AwqGramLoss(std::string module, const engine::LinearWeight& w, const std::vector<double>& gram, int64_t tokens,
              ThreadPool& pool);
  int64_t parts() const override { return (w_.out + kRowPart - 1) / kRowPart; }
  double count() const override { return static_cast<double>(tokens_) * static_cast<double>(w_.out); }
  void begin(const AwqCandidates& candidates) override;
  double part_se(int64_t p) override;
  void end() override { cand_ = nullptr; }

 private:
  std::string module_;
  const engine::LinearWeight& w_;
  std::vector<float> w_f32_;    // w as floats
  engine::LinearWeight gram_;   // G as an [in, in] F32 "linear": y = d · Gᵀ = d · G
  int64_t tokens_;
  ThreadPool& pool_;
  const engine::LinearWeight* cand_ = nullptr;
  std::vector<float> d_, dg_;   // one part's Δw rows and Δw G
};

}  // namespace qloom::quant
