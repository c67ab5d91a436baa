// Running-max observers over calibration data: for each chosen linear, the
// largest |x| of its input (-> static input_scale) and/or of its output
// (k_proj / v_proj -> the KV cache's output_scale), taken over every token
// of every sample, as Quark's PerTensorMinMaxObserver does
// (amax = max(-min, max)). A NaN or inf value is an error naming the module.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "qloom/engine/model.h"
#include "qloom/quant/calib_data.h"

namespace qloom::quant {

struct AmaxObservation {
  std::map<std::string, float> input_amax;   // module -> max |input|
  std::map<std::string, float> output_amax;  // module -> max |output|
  uint64_t samples = 0, tokens = 0;
  double seconds = 0;
};

// max |x_i| over x[0..n), NaN ignored (0 for n == 0).
float abs_max(const float* x, int64_t n);
// max |x_i| of a calibration statistic (`what`: "input", "output", ...) of
// `module`. The one check of the amax observations (the observer's and the
// layer pipeline's): a NaN or inf value throws kInvalidInput naming the
// module (issue 30 item 5: NaN norm weights gave every input_scale the floor).
float observed_amax(const std::string& module, const char* what, const float* x, int64_t n);
// table[module] = max(table[module], amax), inserting when absent.
void record_amax(std::map<std::string, float>& table, const std::string& module, float amax);

// Called after each sample: samples done, total, seconds elapsed.
using CalibrationProgress = std::function<void(size_t, size_t, double)>;

// Runs every sample through `model` (one sequence at a time) and records the
// amax of the inputs of `input_modules` and the outputs of `output_modules`
// (module names as in the checkpoint, e.g. "model.layers.0.mlp.down_proj").
// A module never called (e.g. an MoE expert no token was routed to) is
// absent from the result; the caller decides the fallback.
AmaxObservation observe_activation_amax(engine::Model& model, const CalibrationData& data,
                                        const std::set<std::string>& input_modules,
                                        const std::set<std::string>& output_modules,
                                        const CalibrationProgress& progress = {});

}  // namespace qloom::quant
