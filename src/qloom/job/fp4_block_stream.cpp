#include "qloom/job/fp4_block_stream.h"

#include <algorithm>
#include <cmath>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/quant/fp4_block.h"

namespace qloom::job {

Fp4BlockWeights::Fp4BlockWeights(const io::ModelDir& src, const std::vector<exporter::PlannedTensor>& plan,
                                 std::string_view quant_scheme)
    : src_(src),
      groups_(quant::default_shared_scale_groups(quant_scheme, src.config().value("model_type", std::string()))) {
  for (const auto& p : plan)
    if (p.kind == exporter::PlannedKind::kQuantizedWeight && handles(p) && p.spec2) two_stage_.push_back(p.module);
}

bool Fp4BlockWeights::handles(const exporter::PlannedTensor& p) {
  return p.kind == exporter::PlannedKind::kQuantizedWeight && quant::is_fp4_block_spec(p.spec);
}

float Fp4BlockWeights::weight_amax(const std::string& module) {
  if (auto it = amax_.find(module); it != amax_.end()) return it->second;
  const io::WeightIndex& w = src_.weights();
  const std::string name = module + ".weight";
  const io::TensorView v = w.view(name);
  std::vector<float> f(v.numel());
  to_f32(v.dtype(), v.data.data(), f.data(), f.size());
  for (size_t i = 0; i < f.size(); ++i)
    if (!std::isfinite(f[i]))
      throw Error(ErrorKind::kInvalidInput, "", name,
                  "element " + std::to_string(i) + " is not finite", "fix or exclude this weight");
  const float a = quant::abs_max(f.data(), f.size());
  amax_.emplace(module, a);
  return a;
}

float Fp4BlockWeights::global_scale(const exporter::PlannedTensor& p) {
  if (!p.spec2) return 1.0f;
  float amax = 0.0f;
  for (const auto& m : quant::shared_scale_members(p.module, two_stage_, groups_)) amax = std::max(amax, weight_amax(m));
  return quant::fp4_global_scale(amax, *p.spec2);
}

quant::QuantizedTensor Fp4BlockWeights::quantize(const exporter::PlannedTensor& p, const float* w, DType model_dtype,
                                                 unsigned threads) {
  return quant::quantize_fp4_block(w, p.weight_shape[0], p.weight_shape[1], p.spec, p.spec2, global_scale(p),
                                   p.module + ".weight", model_dtype, threads);
}

}  // namespace qloom::job
