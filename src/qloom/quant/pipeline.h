// CalibrationPipeline: sequential (layer-by-layer) calibration, so a
// calibrated quantization never holds more than one decoder layer:
//
//   start:  embed every calibration sample -> the inputs of layer 0, held in
//           fp32 (samples x seq_len x hidden x 4 bytes; the only buffer that
//           grows with the data, never with the depth)
//   layer i (run_layer, in order 0..N-1):
//     load only layer i's weights (engine::LayerRunner, mmap-backed source)
//     each AlgorithmStage in order processes it (runs the samples through
//       the layer with its hooks, folds scales, quantizes linears it claims)
//     unquantized tensors a stage changed (folded norms, producer linears'
//       rows and biases) are rounded to their checkpoint dtype and handed to
//       the exporter with the layer (LayerResult::float_tensors)
//     linears no stage claimed: round-to-nearest
//     every quantized linear's weight is replaced by its dequantized form
//     the samples run once more through the quantized layer, in place:
//       these are layer i+1's inputs, and this pass observes the static
//       activation / KV amax (max |x|) of the modules asked for
//     the QuantizedTensors and amax go to the caller (the exporter), the
//       layer is freed
//   finish: the final norm's output observed for non-layer modules (lm_head)
//           when asked; each stage's finish()
//
// The float stream (only when a stage wants_float_stream(): GPTAQ, Qronos,
// which compare the quantized model's layer inputs with the float model's,
// as Quark's _use_original_weight processors do): a second copy of the
// samples' activations, embedded with the first, run through each layer
// with its float weights (snapshotted before the first such stage touches
// the layer, restored around LayerSession::with_float_weights) after the
// stages, so layer i+1 sees both the quantized model's inputs and the float
// model's. Twice the activation memory; one more layer pass per layer
// unless a stage advances the float stream itself (float_layer_io).
//
// So static scales are observed on the model as exported (earlier layers and
// this layer quantized), as Quark calibrates after running its algorithm.
// Activations are not fake-quantized while calibrating.
// Samples run one at a time from position 0 (batch_size only matters for
// progress), as in activation_observer.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/engine/layer_runner.h"
#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/calib_data.h"
#include "qloom/quant/layer_tensors.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

struct PipelineRequest {
  std::filesystem::path model_dir;
  const engine::WeightSource* weights = nullptr;  // default: the directory's safetensors
  // Decoder-layer linears to quantize (module -> weight spec); modules
  // outside the decoder layers are the caller's (RTN).
  std::map<std::string, QuantSpec> weight_specs;
  // Their input specs, for those whose input is quantized (QuantTarget::input).
  std::map<std::string, QuantSpec> input_specs;
  // Modules whose input / output max |x| is observed (static scales);
  // "lm_head" (or any module of layer -1) is observed in finish().
  std::set<std::string> observe_inputs, observe_outputs;
  // k projections whose output amax is observed on the keys after RoPE (what
  // the KV cache holds; Quark's kv_cache_post_rope) instead of the linear's
  // output; recorded as their output amax.
  std::set<std::string> observe_rotated_keys;
  // Attention modules ("model.layers.N.self_attn") whose softmax output max
  // is observed (--attention_dtype: prob_output_scale).
  std::set<std::string> observe_probs;
  // --data_type bfloat16: the calibration pass rounds what it observes as
  // torch does in a bf16 model (quant/bf16_calibration.h); false: fp32.
  bool bf16_activations = false;
  DType model_dtype = DType::kBF16;  // decides scale dtypes and rounding rules
  // Checkpoint dtype of each tensor (a tensor not listed: model_dtype): an
  // unquantized tensor a stage changes is rounded to it (mark_modified).
  std::map<std::string, DType> tensor_dtypes;
  unsigned threads = 0;
};

// What one decoder layer hands to the exporter.
struct LayerResult {
  int64_t layer = -1;
  std::map<std::string, QuantizedTensor> weights;
  std::map<std::string, float> input_amax, output_amax;  // modules observed in this layer
  std::map<std::string, float> probs_amax;                // attention modules (observe_probs)
  // Unquantized tensors the stages changed (LayerSession::mark_modified), by
  // checkpoint name, in checkpoint form, exactly representable in the
  // checkpoint's dtype: the exporter writes these instead of the source's.
  std::map<std::string, FloatTensor> float_tensors;
};

// Called after each layer: layers done, total, seconds so far.
using PipelineProgress = std::function<void(size_t, size_t, double)>;

class CalibrationPipeline {
 public:
  // Opens the model (config, embedding, final norm) and embeds every sample.
  // Throws kUsage when `data` has no sample; errors of LayerRunner::open.
  CalibrationPipeline(PipelineRequest request, const CalibrationData& data,
                      std::vector<std::unique_ptr<AlgorithmStage>> stages, PipelineProgress progress = {});
  ~CalibrationPipeline();
  CalibrationPipeline(const CalibrationPipeline&) = delete;
  CalibrationPipeline& operator=(const CalibrationPipeline&) = delete;

  int64_t num_layers() const;
  int64_t next_layer() const;  // the layer run_layer() expects next
  // Runs decoder layer `i`, which must be next_layer(); kUsage otherwise.
  LayerResult run_layer(int64_t i);
  // After the last layer (kUsage before): input amax of the observed
  // non-layer modules (lm_head); calls every stage's finish(). Once.
  std::map<std::string, float> finish();

  const PipelineSummary& summary() const;
  const std::vector<std::unique_ptr<AlgorithmStage>>& stages() const;

  struct Impl;  // opaque (pipeline.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace qloom::quant
