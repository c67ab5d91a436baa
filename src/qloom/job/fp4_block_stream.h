// The fp4 block weights of a quantize job (nvfp4, amdfp4*; quant/fp4_block.h):
// quantizes a planned weight with its second stage's global scale, taken
// over the shared-scale group Quark's template gives the scheme
// (quant/shared_scale_groups.h: q/k/v and gate/up for nvfp4), so siblings get
// the same weight_scale_2. The siblings' max |w| are read from the source
// (memory-mapped) once each. Internal to job/ (quantize_stream.cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/export/quark_exporter.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/quantized_tensor.h"
#include "qloom/quant/shared_scale_groups.h"

namespace qloom::job {

class Fp4BlockWeights {
 public:
  // `plan`: the exporter's plan; `quant_scheme`: --quant_scheme (decides the
  // shared-scale groups, as in Quark).
  Fp4BlockWeights(const io::ModelDir& src, const std::vector<exporter::PlannedTensor>& plan, std::string_view quant_scheme);

  static bool handles(const exporter::PlannedTensor& p);
  // The global scale of p's weight (two-stage specs; 1 otherwise).
  float global_scale(const exporter::PlannedTensor& p);
  // p's weight `w` ([out, in] f32 values of the source) quantized.
  quant::QuantizedTensor quantize(const exporter::PlannedTensor& p, const float* w, DType model_dtype, unsigned threads);

 private:
  float weight_amax(const std::string& module);

  const io::ModelDir& src_;
  std::vector<std::string> two_stage_;  // planned two-stage weights, plan order
  quant::SharedScaleGroups groups_;
  std::map<std::string, float> amax_;
};

}  // namespace qloom::job
