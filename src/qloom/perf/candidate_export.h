// A mixed-precision candidate as a `qloom quantize` job
// (exporter::QuantizeOptions, export/quantize_job.h): the checkpoint the real
// accuracy gate evaluates. Quark expresses per-layer precisions as
// --quant_scheme GLOBAL plus --layer_quant_scheme PATTERN SCHEME entries
// (first match wins; they become per-pattern layer_quant_config entries of
// quantization_config) and --exclude_layers (wins over everything):
//   global       the non-native precision holding the most parameters
//   overrides    one entry per other quantized unit: layer units first
//                ("*.layers.3.self_attn.*"), then partitions ("*.self_attn.*",
//                "*.mlp.gate_proj", "*.experts.*", "*.shared_expert.*")
//   exclusions   native units' patterns, linears of no partition (routers a
//                template does not exclude), the user's --exclude-layers
//   kv_cache     fp8 -> kv_cache_dtype "fp8"
//   calibration  dataset / num_calib_data / seq_len passed through (schemes
//                with static activation scales and the fp8 KV cache calibrate)
// The compact patterns are VERIFIED: quant::select_layers (the exporter's own
// selection) must give every linear exactly the candidate's scheme; when a
// pattern would catch another unit's linear, every unit is written with its
// exact module names instead (always correct, only longer).
//
// Errors: kUsage for a config that quantizes nothing, or names partitions /
// precisions / units the plan lacks (proxy.h's checks). Pure (reads only the
// model's tensor index); thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "qloom/export/quantize_job.h"
#include "qloom/io/model_dir.h"
#include "qloom/perf/candidate_entry.h"
#include "qloom/perf/partitions.h"

namespace qloom::perf {

struct ExportSettings {
  std::filesystem::path output_dir;
  std::string dataset;               // --calib-dataset ("" = bundled c4 sample)
  uint64_t num_calib_data = 512;
  uint64_t seq_len = 512;            // --calib-seqlen
  std::vector<std::string> exclude_layers;  // the user's --exclude-layers
  unsigned threads = 0;
  bool overwrite = false;
};

exporter::QuantizeOptions export_options(const io::ModelDir& dir, const PartitionPlan& plan,
                                         const CandidateConfig& config, const ExportSettings& settings);

// Linear module -> Quark scheme name ("" = left unquantized) that `options`
// select on the model's linears (quant::select_layers, as the exporter).
std::map<std::string, std::string> selected_schemes(const io::ModelDir& dir, const exporter::QuantizeOptions& options);
// The same map as the candidate intends it (every linear of the model).
std::map<std::string, std::string> intended_schemes(const io::ModelDir& dir, const PartitionPlan& plan,
                                                    const CandidateConfig& config);

}  // namespace qloom::perf
