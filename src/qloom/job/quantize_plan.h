// The planning steps of a quantize job (job/quantize_job.h): which linear
// gets which Quark spec, which layers the Quark layout cannot hold, the
// quantization_config, and the modules whose tensors the checkpoint writes.
// Internal to job/; quantize_model runs them in order.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "qloom/job/quantize_job.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::job {

struct JobPlan {
  quant::Selection selection;
  std::map<std::string, quant::LayerQuantSpec> modules;  // modules whose weight is quantized
  std::vector<std::string> unsupported;                   // dropped by drop_unfit_layers
  exporter::QuarkConfigInput config;                                // quantization_config input
  // Every module with tensors to write: quantized weights and/or static
  // activation / KV scales (excluded KV layers keep only their output spec).
  std::map<std::string, quant::LayerQuantSpec> planned_modules;
};

// --pack_method as a PackOrder; kUsage for an unknown name.
PackOrder pack_order_of(const QuantizeOptions& o);

// Step 1: layer selection (--quant_scheme, --layer_quant_scheme,
// --exclude_layers, the model's default exclusions). kUsage when nothing
// would be quantized. Adds selection warnings and counts to `sum`.
JobPlan select_modules(const QuantizeOptions& o, const io::ModelDir& src, QuantizeSummary& sum);

// Step 2: modules whose shape the scheme's Quark layout cannot hold (a group
// size that does not divide in_features, int4 out_features % 8 != 0): one
// kUnsupported error naming them all by pattern, or, with
// --exclude_unsupported, excluded with a warning.
void drop_unfit_layers(const QuantizeOptions& o, const io::WeightIndex& w, DType model_dtype, PackOrder order,
                       JobPlan& plan, QuantizeSummary& sum);

// Step 3: the quantization_config input and the planned modules resolved
// through it (so the checkpoint and its config cannot disagree). kUnsupported
// when --kv_cache_dtype matches no linear.
void plan_config(const QuantizeOptions& o, const io::ModelDir& src, JobPlan& plan);

}  // namespace qloom::job
