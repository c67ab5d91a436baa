#include "qloom/quant/rotation_stage.h"

#include "qloom/core/error.h"

namespace qloom::quant {

void RotationStage::process_layer(LayerSession& session) {
  throw Error(ErrorKind::kInternal, "", "layer " + std::to_string(session.layer()),
              "the rotation pass was handed to the per-layer pipeline",
              "run it before calibration (job/quantize_job.cpp)");
}

std::unique_ptr<AlgorithmStage> make_rotation_stage(const RotationConfig& config) {
  return std::make_unique<RotationStage>(config);
}

}  // namespace qloom::quant
