// A mixed-precision candidate as a `qloom quantize` job
// (job::QuantizeOptions, job/quantize_job.h): the checkpoint the real
// accuracy gate evaluates. Quark expresses per-layer precisions as
// --quant_scheme GLOBAL plus --layer_quant_scheme PATTERN SCHEME entries
// (they become per-pattern layer_quant_config entries of quantization_config)
// and --exclude_layers (wins over everything):
//   global       the non-native precision holding the most parameters
//   overrides    the other quantized groups: a partition whose layers share
//                one precision as one pattern ("*.self_attn.*", "*.experts.*",
//                "*.shared_expert.*", dense MLP leaves "*.mlp.gate_proj"), also
//                when some of its layers are native (excluded layer by layer);
//                a partition with quantized layer overrides layer by layer
//                ("*.layers.3.self_attn.*", "*.layers.3.mlp.gate_proj")
//   exclusions   native groups' patterns, linears of no partition (routers a
//                template does not exclude), the user's --exclude-layers
//   kv_cache     fp8 -> kv_cache_dtype "fp8"
//   calibration  dataset / num_calib_data / seq_len passed through (schemes
//                with static activation scales and the fp8 KV cache calibrate)
// Patterns are DISJOINT: no linear matches two --layer_quant_scheme patterns
// (Quark resolves layer_quant_config in insertion order, qloom's config
// reader in key order; only disjoint patterns mean the same to both). Under
// an fp8 KV cache no pattern matches a k/v projection: the exporter adds
// Quark's "*k_proj" / "*v_proj" entries, whose weight spec is that of the
// first attention pattern (else the global scheme), so attention patterns
// become leaf patterns ("*.self_attn.q_proj") and k/v follow them; a
// candidate whose k/v projections need different precisions per layer
// cannot be written (kUnsupported). Every result is VERIFIED against
// selected_schemes (the exporter's own selection plus that KV rule); when the
// compact patterns fail, every group is written with exact module names.
//
// Errors: kUsage for a config that quantizes nothing, or names partitions /
// precisions / units the plan lacks (proxy.h's checks); kUnsupported as
// above. Pure (reads only the model's tensor index); thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "qloom/job/quantize_job.h"
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

job::QuantizeOptions export_options(const io::ModelDir& dir, const PartitionPlan& plan,
                                         const CandidateConfig& config, const ExportSettings& settings);

// Linear module -> Quark scheme name ("" = left unquantized) that `options`
// give the model's linears: quant::select_layers (as the exporter), and under
// an fp8 KV cache the KV entries' spec for k/v projections no pattern matches.
std::map<std::string, std::string> selected_schemes(const io::ModelDir& dir, const job::QuantizeOptions& options);
// The same map as the candidate intends it (every linear of the model).
std::map<std::string, std::string> intended_schemes(const io::ModelDir& dir, const PartitionPlan& plan,
                                                    const CandidateConfig& config);

}  // namespace qloom::perf
