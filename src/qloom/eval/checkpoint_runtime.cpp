#include "qloom/eval/checkpoint_runtime.h"

namespace qloom::eval {

CheckpointRuntime open_checkpoint_runtime(const io::ModelDir& dir) {
  CheckpointRuntime rt;
  rt.weights = engine::plain_weight_source(dir);
  rt.description = "plain";
  return rt;
}

LoadedModel load_for_eval(const std::filesystem::path& model_dir, const engine::LoadOptions& options) {
  LoadedModel m;
  m.dir = std::make_unique<io::ModelDir>(io::ModelDir::open(model_dir));
  m.runtime = open_checkpoint_runtime(*m.dir);
  m.model = engine::Model::load(model_dir, options, m.runtime.weights.get());
  return m;
}

}  // namespace qloom::eval
