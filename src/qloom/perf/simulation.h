// What a mixed-precision assignment computes, simulated on qloom's engine
// without writing a checkpoint — the shared core of sensitivity.h (one unit
// at a time) and proxy.h (a whole candidate).
//
// Reference: the unquantized model's answers on a few calibration windows,
// computed ONCE: the windows' tokens (quant/calib_data.h: the first
// `windows` documents of the calibration set, each cut to seq_len tokens),
// the base logits of every position, and the activation statistics a static
// scale needs (max |x| of every unit linear's input; of the KV layers'
// outputs), observed on the same windows with the base model — as Quark's
// per-tensor min-max observers calibrate.
//
// evaluate(): loads the model with an engine::WeightSource overlay whose
// assigned linears are fake-quantized — quantize_weight (RTN, exactly the
// codes and scales the exporter writes) then dequantize, to F32 — and
// ForwardHooks that fake-quantize what the served checkpoint quantizes at
// run time (export/checkpoint_runtime does the same from a checkpoint):
// static per-tensor inputs with the min-max scale of the observed amax
// (quant::static_scale_from_amax), dynamic inputs (per token, MX) from the
// data itself, and with kv_fp8 the k/v projections' outputs with one fp8
// scale per attention block (max of k and v, Quark's KV group scale). Every
// scored position's logits are compared with the reference (eval/kld.h
// KldStats: KLD base || simulated, top-1 agreement, NLL of both).
//
// Determinism: the weight quantizer and the engine give the same bits for
// any thread count, windows run in order, statistics accumulate
// sequentially; so results are identical for 1 or N threads.
// Errors: calibration / load errors as thrown (qloom::Error); kUsage for a
// module of the assignment that is not a linear of the model.
// Thread-safety: a Reference is immutable after build; evaluate() may run
// concurrently on distinct threads (each loads its own model).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qloom/eval/kld.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/partitions.h"
#include "qloom/perf/precision.h"

namespace qloom::perf {

struct WindowOptions {
  std::string dataset;       // quant/calib_data.h names: "" = the bundled c4 sample
  uint64_t windows = 4;      // documents
  uint64_t seq_len = 256;    // tokens per window (a shorter document stays shorter)
  unsigned threads = 0;      // engine threads, 0 = hardware concurrency
};

// Returns true to stop (deadline reached or cancelled). Polled between windows.
using StopFn = std::function<bool()>;

class Reference {
 public:
  // Runs the base model over the windows once. Throws what calibration and
  // model loading throw. `plan` names the linears whose input amax is kept.
  static std::shared_ptr<const Reference> build(const io::ModelDir& dir, const PartitionPlan& plan,
                                                const WindowOptions& options);

  const std::vector<std::vector<int32_t>>& windows() const { return windows_; }
  const std::vector<float>& base_logits(size_t window) const { return logits_[window]; }
  int64_t vocab() const { return vocab_; }
  int64_t scored_tokens() const;  // sum over windows of (length - 1)
  // max |input| of a unit linear / |output| of a KV linear over the windows;
  // absent when the linear never ran.
  const std::map<std::string, float>& input_amax() const { return input_amax_; }
  const std::map<std::string, float>& output_amax() const { return output_amax_; }
  const WindowOptions& options() const { return options_; }
  const std::string& source() const { return source_; }  // the calibration file read
  double seconds() const { return seconds_; }

 private:
  WindowOptions options_;
  std::vector<std::vector<int32_t>> windows_;
  std::vector<std::vector<float>> logits_;
  int64_t vocab_ = 0;
  std::map<std::string, float> input_amax_, output_amax_;
  std::string source_;
  double seconds_ = 0;
};

// A precision per linear module (modules absent stay native) and the KV cache.
struct Assignment {
  std::map<std::string, const Precision*> modules;
  bool kv_fp8 = false;
};

struct SimulationResult {
  eval::KldSummary summary;
  int64_t windows_done = 0;
  bool stopped = false;   // `stop` said stop before every window ran
  double seconds = 0;
};

// As the file comment says. `plan` gives the modules' shapes and the model
// dtype; `threads` the engine and quantizer threads (0 = all).
SimulationResult simulate(const io::ModelDir& dir, const PartitionPlan& plan, const Reference& ref,
                          const Assignment& assignment, unsigned threads, const StopFn& stop = {});

}  // namespace qloom::perf
