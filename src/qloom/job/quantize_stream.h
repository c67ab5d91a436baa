// The writing step of a quantize job (job/quantize_job.h): every planned
// tensor in plan order, quantized by RTN or taken from the layer-by-layer
// calibration pipeline (quant/pipeline.h) when an algorithm or static scales
// need it. Internal to job/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "qloom/engine/weight_source.h"
#include "qloom/job/fp4_block_stream.h"
#include "qloom/job/quantize_job.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/pipeline.h"

namespace qloom::job {

// Decoder layer of a planned tensor ("model.layers.3.mlp..." -> 3); the
// embedding sorts before layer 0, everything else after the last layer.
int64_t layer_key(const exporter::PlannedTensor& p);

// Puts a plan in the order the pipeline produces (layer by layer, stable).
void sort_by_layer(std::vector<exporter::PlannedTensor>& plan);

// The amax one calibrated layer observed: linear inputs, linear outputs,
// attention (softmax) outputs, by module.
struct LayerAmax {
  std::map<std::string, float> input, output, probs;
};

// --data_type: whether calibration rounds activations to bf16
// (quant/bf16_calibration.h): "bfloat16", or "auto" on a bf16 model. "float32"
// (and "auto" on an f32 model): no. kUnsupported for float16 (and "auto" on
// an f16 model): qloom emulates bf16 only.
bool calibration_in_bf16(const std::string& data_type, DType model_dtype);

class TensorStream {
 public:
  // `ex` has its plan. With `pipelined` the calibration pipeline runs
  // (`stages` may be empty: static scales only); its results fill `sum` and
  // `config.algo_config` when it ends. `modules`: the job's quantized
  // modules (JobPlan::modules), whose input specs the stages see.
  TensorStream(const QuantizeOptions& o, const io::ModelDir& src, exporter::QuarkExporter& ex, bool pipelined,
               const std::map<std::string, quant::LayerQuantSpec>& modules,
               std::vector<std::unique_ptr<quant::AlgorithmStage>> stages, exporter::QuarkConfigInput& config,
               QuantizeSummary& sum, const CalibrationProgressFn& calib_progress);
  ~TensorStream();

  // Writes every planned tensor; progress per tensor.
  void write_all(const ProgressFn& progress);
  // Output bytes of the quantized modules (codes + scales + zero points).
  uint64_t quantized_bytes() const { return quantized_bytes_; }

 private:
  using ScaleMap = std::map<std::pair<std::string, exporter::ActivationRole>, float>;
  void run_until(int64_t layer);
  void finish_pipeline();
  void add_scales(int64_t layer, const LayerAmax& amax);
  void write_copy(const exporter::PlannedTensor& p, TensorProgress& tp);
  void write_weight(const exporter::PlannedTensor& p, TensorProgress& tp);
  void write_scale(const exporter::PlannedTensor& p, TensorProgress& tp);

  const QuantizeOptions& o_;
  const io::ModelDir& src_;
  exporter::QuarkExporter& ex_;
  exporter::QuarkConfigInput& config_;
  QuantizeSummary& sum_;
  DType model_dtype_;
  PackOrder order_;
  std::unique_ptr<engine::WeightSource> pipe_source_;
  std::unique_ptr<quant::CalibrationPipeline> pipe_;
  std::optional<quant::LayerResult> layer_out_;
  Fp4BlockWeights fp4_;  // nvfp4 / amdfp4* weights (global scales)
  ScaleMap static_scales_;
  uint64_t scale_fallbacks_ = 0;
  uint64_t total_bytes_ = 0, done_bytes_ = 0, quantized_bytes_ = 0;
  std::vector<float> f32_;
  std::chrono::steady_clock::time_point t_start_;
};

}  // namespace qloom::job
