// Resource estimates for a planned quantization (quant_plan.json
// "resource_estimate", the manifest's "estimated resource needs" of seed 003
// Step 3): peak memory, output size on disk, and run time, each with the
// bytes / seconds, a human string and the formula it came from. Inputs are
// model_analysis.json (its linear-layer groups, sizes and "environment") and
// the planned choices; no file is read.
//
// Models (every constant is stated in the output's "formula" / "assumptions"):
//   Peak memory. qloom never holds the whole model (mission §4).
//     Calibrated runs (a static activation / KV scale, or --quant_algo):
//       largest decoder layer's linear weights in fp32 (4 B / weight)
//       + calibration activations: tokens x hidden_size x 4 B x 2 (a layer's
//         inputs and outputs), tokens = num_calib_data x seq_len
//       + GPTQ Hessians: per stage of the largest layer, in_features^2 x 8 B
//         per distinct input (linears of one module sharing an input share
//         one; every expert has its own), the largest stage
//       + embedding table in fp32 (vocab_size x hidden_size x 4 B)
//     RTN runs: the largest quantized linear weight in fp32, twice (source +
//     result); excluded tensors are copied as bytes.
//     "fits": peak <= usable memory (environment.h usable_memory_bytes);
//     null when the environment does not say.
//   Disk. Every linear stores what qloom's Quark exporter writes for its
//     scheme (export/quark_tensors.h): codes (8 / 4 bits), scales (model
//     dtype; F32 for per-tensor integer scales; e8m0 bytes for MX), zero
//     points (int8/uint8 bytes; int4 packed 8 per int32), static input
//     scales, fp8 KV output scales on k_proj / v_proj; excluded linears and
//     all other parameters stay in the model dtype. bits_per_weight = 8 x
//     (codes + weight scales + weight zero points) / quantized weights, the
//     figure `qloom quantize` reports (activation / KV scales not included).
//   Time. FLOP-count model at an assumed sustained rate per usable thread:
//     avx512f 50 GFLOP/s, avx2+fma 25 GFLOP/s, else 4 GFLOP/s (engine/gemm.cpp
//     measured ~100 GFLOP/s per Zen 4 core at best; half is assumed), plus
//     reading and writing the weights at an assumed 1 GiB/s.
//     Calibration: passes x (2 x active linear weights x tokens + attention
//     2 x tokens x seq_len x heads x head_dim x layers), active = MoE experts
//     scaled by experts_per_token / num_experts; passes: 1 (static scales
//     only), +1 SmoothQuant, +4 GPTQ (one per sequential stage), +20 AWQ
//     (its scale grid). GPTQ adds per quantized linear in_features^3 +
//     2 x out_features x in_features^2.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/quant_spec.h"

namespace qloom::agent {

struct ResourceRequest {
  std::string quant_scheme;                  // Quark --quant_scheme name
  std::string kv_cache_dtype;                // "" or "fp8"
  std::string quant_algo;                    // "" (RTN) or Quark's comma-separated --quant_algo
  std::vector<std::string> exclude_layers;   // the effective exclusion patterns (defaults + user)
  std::vector<std::pair<std::string, std::string>> layer_quant_scheme;  // pattern, scheme (first match wins)
  uint64_t num_calib_data = 128;
  uint64_t seq_len = 512;
};

// The estimate, keys in this order:
//   {"peak_memory": {"bytes", "human", "usable_bytes", "fits", "formula",
//                    "components": {"layer_weights_fp32", "calibration_activations",
//                                   "gptq_hessians", "embeddings_fp32", "largest_linear_fp32"
//                                   (the largest quantized linear)}},
//    "disk": {"bytes", "human", "source_weights_bytes", "source_weights",
//             "quantized_linears", "quantized_weights", "bits_per_weight", "formula"},
//    "time": {"seconds", "human", "flops", "flops_per_second", "io_bytes", "formula"},
//    "calibrated": bool, "calibration_tokens": integer,
//    "assumptions": [string, ...]}
// A partial analysis (no linear layers known) gives nulls for the sizes and
// times and says so in "assumptions". Unknown scheme names (global or
// override) throw Error(kUsage) naming the flag, as quant::get_scheme does.
nlohmann::ordered_json estimate_resources(const nlohmann::json& analysis, const ResourceRequest& request);

// True when a run with these choices observes activations (static input
// scales of the scheme, an fp8 KV cache, or any --quant_algo).
bool needs_calibration(const std::string& quant_scheme, const std::string& kv_cache_dtype,
                       const std::string& quant_algo);

// Bytes qloom's Quark exporter writes for one quantized linear [out, in]:
// weight codes, scales, zero points, a static input scale (+ zero point),
// and, with kv_output, the fp8 KV output scale. dtype_bytes = model dtype size.
uint64_t quantized_linear_bytes(const quant::LayerQuantSpec& spec, uint64_t out_features, uint64_t in_features,
                                uint64_t dtype_bytes, bool kv_output);

}  // namespace qloom::agent
