// AlgorithmStage: one calibrated algorithm (GPTQ, AWQ, SmoothQuant) as a
// stage of the layer-by-layer calibration pipeline (pipeline.h). Lifecycle,
// driven by the pipeline:
//
//   start(config)             once, before layer 0
//   process_layer(session)    for every decoder layer 0..N-1 in turn, in the
//                             order the stages were given (smoothquant, then
//                             gptq): the layer is loaded with float weights
//                             (as left by the previous stages), the session
//                             runs the calibration samples through it
//   finish(summary)           once, after the last layer
//
// A stage may rewrite the layer's float weights (folding scales: AWQ,
// SmoothQuant; quant/awq_stage.h, quant/smoothquant_stage.h) and/or claim
// the quantization of linears (LayerSession::set_quantized: GPTQ). Linears
// no stage claimed are quantized by round-to-nearest after the last stage,
// from the float weights as the stages left them. An unquantized tensor a
// stage changes (a norm or producer linear a scale was folded into) is
// reported with LayerSession::mark_modified, and the exporter writes its
// changed value instead of the source's. Configuration is strict: a stage is
// built from Quark's algo_config dict (make_algorithm_stage in
// algorithm_registry.h), unknown keys are errors, and algo_config() gives
// back the dict Quark writes into quantization_config.algo_config.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/core/thread_pool.h"
#include "qloom/engine/layer_runner.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::quant {

// What the pipeline reports (also filled in by stages).
struct PipelineSummary {
  uint64_t layers = 0, samples = 0, tokens = 0;
  uint64_t activation_bytes = 0;          // held layer inputs (fp32)
  uint64_t algo_linears = 0;              // quantized by a stage (e.g. GPTQ)
  uint64_t rtn_linears = 0;               // quantized by round-to-nearest
  uint64_t algo_fallbacks = 0;            // a stage fell back to RTN (e.g. Cholesky failure)
  uint64_t unrouted_experts = 0;          // MoE expert linears with no calibration token (RTN)
  uint64_t scaled_groups = 0;             // scaling groups a stage folded scales into (AWQ, SmoothQuant), per layer
  uint64_t unscaled_groups = 0;           // scaling groups left unscaled: no calibration token (MoE experts)
  std::vector<double> layer_seconds;      // wall time per decoder layer
  // Wall seconds per named phase of a stage, summed over layers (e.g.
  // "awq.grid.mlp_in.loss"): where a stage's time goes, for reports and benches.
  std::map<std::string, double> phase_seconds;
  std::map<std::string, double> phase_cpu_seconds;  // the same phases, process CPU seconds (all threads)
  std::vector<std::string> warnings;
  double seconds = 0;
};

// A linear of the current layer that is to be quantized.
struct QuantTarget {
  engine::LayerLinear linear;
  QuantSpec spec;       // its weight spec
  DType scale_dtype;    // quark_scale_dtype(spec, model_dtype)
  // Its input (activation) spec when the scheme quantizes its input (W8A8,
  // fp8, int4_fp8...): what a stage that simulates the served activations
  // while it searches uses (autosmoothquant). Empty: weight-only.
  std::optional<QuantSpec> input = std::nullopt;
};

class LayerSession {
 public:
  virtual ~LayerSession() = default;
  virtual int64_t layer() const = 0;
  virtual engine::LayerRunner& runner() = 0;  // the loaded layer
  virtual ThreadPool& pool() = 0;
  virtual DType model_dtype() const = 0;
  // Runs every calibration sample's input to this layer through the layer's
  // current weights with `hooks`; the inputs are not changed.
  virtual void run(const engine::ForwardHooks& hooks, engine::LayerPart part = engine::LayerPart::kFull) = 0;
  // The number of calibration samples; run() is run_sample(s) for s in order.
  virtual size_t samples() const = 0;
  // Sample s alone (its input is not changed: kFull runs on a copy).
  virtual void run_sample(size_t s, const engine::ForwardHooks& hooks,
                          engine::LayerPart part = engine::LayerPart::kFull) = 0;
  // run_on for one state: `state` stands for sample s (its size is checked).
  virtual void run_state(size_t s, std::vector<float>& state, const engine::ForwardHooks& hooks,
                         engine::LayerPart part) = 0;
  // Copies of every sample's input to this layer, [T_s, hidden] fp32 each,
  // in sample order (what run() feeds the layer).
  virtual std::vector<std::vector<float>> inputs() const = 0;
  // Runs states[s] (sample s: inputs()[s], or kFirstHalf's result of it for
  // kFeedForward) through `part` of the layer's current weights with
  // `hooks`: in place for kFull / kFirstHalf, unchanged for kAttention /
  // kFeedForward. So a stage can keep the first half's output and run the
  // feed-forward half alone, as long as it changes no weight the first half
  // reads. Throws kInternal when states do not match the samples' sizes.
  virtual void run_on(std::vector<std::vector<float>>& states, const engine::ForwardHooks& hooks,
                      engine::LayerPart part) = 0;
  // For a stage that runs the layer's final weights itself (GPTQ's
  // stage-by-stage pass quantizes each linear before it runs): the samples'
  // inputs to this layer, to be replaced in place by the layer's outputs,
  // so the pipeline need not run the layer once more. Null unless the
  // calling stage is the layer's last. A stage that takes them must, before
  // it returns, have quantized every pending linear (set_quantized), written
  // every sample's output computed with the quantized weights, run each
  // linear exactly once per sample with propagation_hooks() (they observe
  // static-scale amax), and called outputs_written(); or leave them
  // untouched and not call it.
  virtual std::vector<std::vector<float>>* layer_io() = 0;
  virtual engine::ForwardHooks propagation_hooks() = 0;
  virtual void outputs_written() = 0;
  // The float-model stream, carried only when a stage wants_float_stream()
  // (GPTAQ, Qronos: they compare the quantized model's layer inputs with the
  // float model's). float_inputs(): every sample's input to this layer in
  // the model with no linear quantized, [T_s, hidden] fp32, in sample order
  // (each earlier layer run with its float weights as they stood when the
  // first such stage began it: after earlier stages' folds, before any
  // quantization). Throws kUsage when the stream is not carried.
  virtual const std::vector<std::vector<float>>& float_inputs() const = 0;
  // Runs fn with the layer's linears holding those float weights, then puts
  // the current (partly quantized) ones back, also when fn throws. fn must
  // not call set_quantized. kUsage when the stream is not carried.
  virtual void with_float_weights(const std::function<void()>& fn) = 0;
  // As layer_io() for the float stream: non-null only for the layer's last
  // stage while the stream is carried; a stage that advances these in place
  // to the float layer's outputs (with_float_weights) calls
  // float_outputs_written(); otherwise the pipeline runs the float layer over
  // them after the stages.
  virtual std::vector<std::vector<float>>* float_layer_io() = 0;
  virtual void float_outputs_written() = 0;
  // Targets not quantized yet, in forward order.
  virtual std::vector<QuantTarget> pending() const = 0;
  // Records module's quantized weight and puts `dequantized` ([out, in],
  // F32) in its place, so later passes see the quantized layer. kUsage for
  // a module that is not pending.
  virtual void set_quantized(const std::string& module, QuantizedTensor qt, std::vector<float> dequantized) = 0;
  // True when module's weight was already quantized by a stage (set_quantized).
  virtual bool quantized(const std::string& module) const = 0;
  // Records that a stage changed the unquantized tensor `tensor` of this
  // layer (checkpoint name: a norm weight, the weight of a linear that is not
  // quantized, or a linear's bias; quant/layer_tensors.h). Its held value is
  // rounded at once to the checkpoint's dtype (so every later pass computes
  // with what will be exported), and its value after the last stage goes to
  // the exporter with the layer (LayerResult::float_tensors). Call it again
  // after changing the tensor again. Throws Error(kNotFound) for a tensor the
  // layer lacks, Error(kUsage) for the weight of a linear that is (to be)
  // quantized: its quantized form is what is exported.
  virtual void mark_modified(const std::string& tensor) = 0;
  virtual PipelineSummary& summary() = 0;
  virtual void warn(const std::string& message) = 0;
};

class AlgorithmStage {
 public:
  virtual ~AlgorithmStage() = default;
  virtual std::string name() const = 0;
  // The dict Quark writes for this algorithm (keys in Quark's order).
  virtual nlohmann::ordered_json algo_config() const = 0;
  // True when the stage needs the float model's activations beside the
  // quantized ones: the pipeline then carries both streams layer to layer
  // (LayerSession::float_inputs; twice the activation memory).
  virtual bool wants_float_stream() const { return false; }
  virtual void start(const model::ModelConfig& /*config*/) {}
  virtual void process_layer(LayerSession& session) = 0;
  virtual void finish(PipelineSummary& /*summary*/) {}
};

}  // namespace qloom::quant
