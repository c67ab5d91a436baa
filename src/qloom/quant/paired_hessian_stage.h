// The pipeline stage shared by the GPTQ variants that compare the quantized
// model's layer inputs with the float model's, GPTAQ (gptaq_stage.h) and
// Qronos (qronos_stage.h), as Quark's BaseHessianProcessor with
// _use_original_weight (quark/torch/algorithm/common.py, amd-quark 0.13):
// the pipeline carries the float stream (wants_float_stream, pipeline.h);
// per layer, the linears to quantize (inside_layer_modules, Quark's "*"
// fnmatch; default every quantized linear) are taken in dependency stages
// (q/k/v, o, gate/up, down: Quark's k, v, q, o, up, gate, down one by one
// give the same statistics, siblings sharing an input); for each stage,
// every sample runs through the layer twice, the quantized stream with the
// current weights (earlier stages quantized) and the float stream with the
// float weights, and the stage's linear inputs x̃ (quantized) and x (float)
// of the same tokens give
//   H = 2/n Σ x̃ x̃ᵀ  and the cross term 2/n Σ a x̃ᵀ, a = x - x̃ (GPTAQ) or x
//   (Qronos),
// from which the derived stage quantizes each linear before the next stage
// runs. A dense layer runs stage by stage once per stream
// (LayerRunner::advance_layer); as the layer's last stage claiming every
// pending linear it also produces both streams' next-layer inputs. An MoE
// layer runs one pass pair per stage, the float pass replaying the router
// logits of the quantized pass (Quark's gate hooks), so each expert sees
// the same tokens in both. An MoE expert with no token is left to RTN (a
// warning), a Cholesky failure falls back to RTN (a warning).
// Memory: the GPTQ stage's (H per distinct input, in double) plus the cross
// term (as much again), and both streams' held activations.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/gptq.h"

namespace qloom::quant {

// The keys GPTAQ and Qronos share (Quark's names and defaults).
struct PairedHessianCommon {
  int64_t block_size = 128;
  bool desc_act = true;
  bool static_groups = true;
  std::vector<std::string> inside_layer_modules;  // empty: every quantized linear
  // Not a config key: Quark's per-model-type default (GPTAQ_MAP / QRONOS_MAP,
  // quark_gptaq_modules), written as inside_layer_modules when the config
  // gives none (the linears run are still every quantized one).
  std::vector<std::string> template_modules;
  std::string model_decoder_layers = "model.layers";
  int damp_retries = 4;  // qloom only (accepted, not written)
  // Not a config key: dense layers stage by stage in one pass per stream
  // (false: one pass pair per stage, what MoE layers do; tests compare).
  bool stepped = true;

  // Parses `key` into these fields; false when it is not one of them.
  // Throws kUsage naming "algo_config.<algo>.<key>" for a bad value.
  bool parse(const std::string& algo, const std::string& key, const nlohmann::json& v);
  // After parsing: model_decoder_layers and desc_act / static_groups checks.
  void check(const std::string& algo) const;
};

class PairedHessianStage : public AlgorithmStage {
 public:
  enum class Cross { kDelta, kFloat };  // a = x - x̃ (GPTAQ) or x (Qronos)
  PairedHessianStage(Cross cross, PairedHessianCommon common) : cross_(cross), common_(std::move(common)) {}
  bool wants_float_stream() const override { return true; }
  void process_layer(LayerSession& s) override;

 protected:
  // Quantizes one target's weight (w: [out, in] float) from H and the cross
  // term (both consumed).
  virtual GptqResult quantize(const QuantTarget& t, const std::vector<float>& w, std::vector<double> H,
                              std::vector<double> cross, LayerSession& s) = 0;
  // inside_layer_modules as written: the configured list, else Quark's
  // template for the model type, else the layer-relative patterns of the
  // linears quantized, in order.
  nlohmann::json inside_layer_modules_json() const;
  const PairedHessianCommon& common() const { return common_; }

 private:
  struct Stats;
  bool selected(const std::string& module) const;
  void run_stepped(LayerSession& s, const std::vector<QuantTarget>& mine);
  void run_passes(LayerSession& s, const std::vector<QuantTarget>& mine);
  void quantize_targets(LayerSession& s, const std::vector<QuantTarget>& targets,
                        const std::map<std::string, Stats*>& of_target);

  Cross cross_;
  PairedHessianCommon common_;
  std::vector<std::string> seen_;
  std::set<std::string> seen_set_;
};

}  // namespace qloom::quant
