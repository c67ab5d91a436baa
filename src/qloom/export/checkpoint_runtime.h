// CheckpointRuntime (reading a Quark checkpoint back, hence export/): what the engine needs to evaluate a model directory
// exactly as it would compute when served: the weight source (plain
// safetensors, or a Quark checkpoint's packed weights dequantized) and the
// hooks that simulate its activation / KV-cache quantization.
#pragma once

#include <memory>
#include <string>

#include "qloom/engine/model.h"
#include "qloom/engine/weight_source.h"
#include "qloom/io/model_dir.h"

namespace qloom::exporter {

struct CheckpointRuntime {
  std::unique_ptr<engine::WeightSource> weights;
  engine::ForwardHooks hooks;  // empty functions when nothing is simulated
  std::string description;     // e.g. "bf16", "quark int4_wo_128 (weights dequantized)"
  // False when a simulated activation / output quantization takes its scale
  // over all rows of a call (dynamic per_tensor): a token's result then
  // depends on the other rows of the pass, so several sequences must not
  // share one (Model::forward_batch).
  bool rows_independent = true;
};

// `dir` must outlive the result. Throws qloom::Error (kUnsupported for a
// quantization config qloom cannot simulate, naming the field).
CheckpointRuntime open_checkpoint_runtime(const io::ModelDir& dir);

// Convenience: ModelDir + runtime + loaded Model in one object.
struct LoadedModel {
  std::unique_ptr<io::ModelDir> dir;
  CheckpointRuntime runtime;
  std::unique_ptr<engine::Model> model;
};
LoadedModel load_for_eval(const std::filesystem::path& model_dir, const engine::LoadOptions& options = {});

}  // namespace qloom::exporter
