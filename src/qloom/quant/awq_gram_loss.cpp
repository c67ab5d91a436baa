#include "qloom/quant/awq_gram_loss.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "qloom/core/error.h"

namespace qloom::quant {

AwqGramLoss::AwqGramLoss(std::string module, const engine::LinearWeight& w, const std::vector<double>& gram,
                         int64_t tokens, ThreadPool& pool)
    : module_(std::move(module)), w_(w), w_f32_(w.values_f32()), tokens_(tokens), pool_(pool) {
  const size_t n = static_cast<size_t>(w.in);
  if (tokens < 1 || gram.size() != n * n)
    throw Error(ErrorKind::kInternal, "", module_, "the AWQ Gram loss needs an [in, in] Gram matrix over >= 1 token");
  gram_.type = engine::WeightType::kF32;
  gram_.out = gram_.in = w.in;
  gram_.f32.resize(gram.size());
  std::transform(gram.begin(), gram.end(), gram_.f32.begin(), [](double v) { return static_cast<float>(v); });
  engine::prepack(gram_);
}

void AwqGramLoss::begin(const AwqCandidates& candidates) {
  const auto it = candidates.find(module_);
  if (it == candidates.end() || it->second.type != engine::WeightType::kF32 || it->second.out != w_.out ||
      it->second.in != w_.in)
    throw Error(ErrorKind::kInternal, "", module_, "no F32 candidate of the Gram loss's linear");
  cand_ = &it->second;
}

double AwqGramLoss::part_se(int64_t p) {
  if (cand_ == nullptr || p < 0 || p >= parts())
    throw Error(ErrorKind::kInternal, "", module_, "AWQ Gram loss part out of range or no candidate");
  const int64_t in = w_.in, r0 = p * kRowPart, rows = std::min(kRowPart, w_.out - r0);
  const size_t off = static_cast<size_t>(r0 * in), m = static_cast<size_t>(rows * in);
  d_.resize(m);
  dg_.resize(m);
  for (size_t i = 0; i < m; ++i) d_[i] = cand_->f32[off + i] - w_f32_[off + i];
  engine::linear(d_.data(), rows, gram_, dg_.data(), pool_);
  double se = 0.0;
  for (size_t i = 0; i < m; ++i) se += static_cast<double>(d_[i]) * static_cast<double>(dg_[i]);
  return se;
}

}  // namespace qloom::quant
