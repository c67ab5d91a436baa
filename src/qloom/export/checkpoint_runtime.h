// CheckpointRuntime (reading a Quark checkpoint back, hence export/): what the engine needs to evaluate a model directory
// exactly as it would compute when served: the weight source (plain
// safetensors, or a Quark checkpoint's packed weights dequantized) and the
// hooks that simulate its activation / KV-cache quantization.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qloom/engine/model.h"
#include "qloom/engine/weight_source.h"
#include "qloom/io/model_dir.h"

namespace qloom::exporter {

// How a Quark checkpoint's quantized linears compute (--runtime):
//   kSimulate: weights dequantized to fp32, activation / KV quantization
//     simulated by hooks: Quark's arithmetic (default of eval and validate);
//   kNative: weights kept quantized on the engine's native kernels
//     (engine/native/qlinear.h) with activations quantized inside them, and
//     an fp8 KV cache for fp8-KV checkpoints (default of serve, throughput,
//     perf). Linears whose spec has no native kernel fall back to simulate.
enum class Runtime { kSimulate, kNative };
const char* runtime_name(Runtime r);  // "simulate" / "native"
// Parses "simulate" / "native"; throws Error(kUsage) naming `flag` otherwise.
Runtime parse_runtime(const std::string& text, const std::string& flag = "--runtime");

struct CheckpointRuntime {
  std::unique_ptr<engine::WeightSource> weights;
  engine::ForwardHooks hooks;  // empty functions when nothing is simulated
  std::string description;     // e.g. "bf16", "quark int4_wo_128 (weights dequantized)"
  // False when a simulated activation / output quantization takes its scale
  // over all rows of a call (dynamic per_tensor): a token's result then
  // depends on the other rows of the pass, so several sequences must not
  // share one (Model::forward_batch).
  bool rows_independent = true;
  Runtime runtime = Runtime::kSimulate;
  size_t native_linears = 0;  // linears on native kernels (kNative)
  // kNative with an fp8 KV cache: one (k, v) scale pair per decoder layer,
  // for engine::LoadOptions::kv_cache_fp8_scales (see apply_to).
  std::vector<std::pair<float, float>> kv_cache_fp8_scales;

  // Copies what the engine must know at load time (the fp8 KV-cache scales)
  // into `options`; call before engine::Model::load(dir, options, weights.get()).
  void apply_to(engine::LoadOptions& options) const;
};

// `dir` must outlive the result. Throws qloom::Error (kUnsupported for a
// quantization config qloom cannot simulate, naming the field).
CheckpointRuntime open_checkpoint_runtime(const io::ModelDir& dir, Runtime runtime = Runtime::kSimulate);

// Convenience: ModelDir + runtime + loaded Model in one object.
struct LoadedModel {
  std::unique_ptr<io::ModelDir> dir;
  CheckpointRuntime runtime;
  std::unique_ptr<engine::Model> model;
};
LoadedModel load_for_eval(const std::filesystem::path& model_dir, const engine::LoadOptions& options = {},
                          Runtime runtime = Runtime::kSimulate);

}  // namespace qloom::exporter
