// The algorithm "rotation" as `--quant_algo` names it (algorithm_registry.h).
// Unlike GPTQ / AWQ / SmoothQuant it is not a per-layer calibration stage but
// a pass over the whole float model before calibration (quant/rotation.h):
// job/quantize_job.cpp takes it out of the stage list (it must come first,
// as rotating weights an earlier algorithm has already fitted would undo that
// fit), writes the rotated model and quantizes it with the remaining stages.
// Its algo_config() is Quark's RotationConfig dict.
#pragma once

#include <memory>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/rotation_config.h"

namespace qloom::quant {

class RotationStage final : public AlgorithmStage {
 public:
  explicit RotationStage(RotationConfig config) : config_(std::move(config)) {}
  std::string name() const override { return "rotation"; }
  nlohmann::ordered_json algo_config() const override { return config_.to_json(); }
  // Never called: the pipeline does not run the rotation per layer.
  void process_layer(LayerSession& session) override;
  const RotationConfig& config() const { return config_; }

 private:
  RotationConfig config_;
};

std::unique_ptr<AlgorithmStage> make_rotation_stage(const RotationConfig& config);

}  // namespace qloom::quant
