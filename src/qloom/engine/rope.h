// Rotary position embeddings, the rotate_half (non-interleaved) form of
// transformers: for i < r/2, (x[i], x[i + r/2]) is rotated by pos * inv_freq[i],
// r = rotary dims (head_dim * partial_rotary_factor; the rest pass through).
// Frequencies: default theta^(-2i/r); "linear" divides them by factor;
// "llama3" rescales low/medium frequency bands (HF _compute_llama3_parameters).
#pragma once

#include <cstdint>
#include <vector>

#include "qloom/model/model_config.h"

namespace qloom::engine {

class Rope {
 public:
  Rope() = default;
  Rope(const model::ModelConfig::Rope& params, int64_t rotary_dim);

  int64_t rotary_dim() const { return rotary_dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }

  // cos/sin for positions [pos0, pos0 + n): each [n][rotary_dim / 2].
  void tables(int64_t pos0, int64_t n, std::vector<float>& cos, std::vector<float>& sin) const;

  // Rotates `heads` vectors of head_dim floats (one token) in place, with the
  // table rows of that token's position.
  void apply(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin) const;

 private:
  int64_t rotary_dim_ = 0;
  std::vector<float> inv_freq_;
};

}  // namespace qloom::engine
