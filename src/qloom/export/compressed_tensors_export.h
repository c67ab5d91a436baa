// Quark hf_format -> compressed-tensors: re-lays out a FINISHED Quark
// checkpoint written by qloom (quark_exporter.h) as the same quantized model
// in llm-compressor's compressed-tensors format (quant_method
// "compressed-tensors", what vLLM and transformers load). Quark's codes,
// scales and zero points are carried over exactly (GPTQ / AWQ results
// included); nothing is re-quantized.
//
//   exporter::CtExportOptions o;
//   o.overwrite = false;                      // refuse an existing out_dir
//   o.progress = [](size_t i, size_t n, const std::string& t) { ... };
//   exporter::CtExportSummary s =
//       exporter::export_compressed_tensors("out/model-int4", "out/model-int4-ct", o);
//
// What it converts (compressed_tensors_scheme.h has the exact layouts):
//   int4 / uint4 groups or per-channel, weight-only  -> "pack-quantized"
//   fp8 (static per-tensor W8A8), ptpc_fp8           -> "float-quantized"
//   int8 (static per-tensor W8A8)                    -> "int-quantized"
//   dynamic per-tensor / per-token activations       -> input_activations
//   fp8 KV cache (output_tensors of k_proj / v_proj) -> kv_cache_scheme and
//       <attn>.k_scale / <attn>.v_scale (Quark's k_proj / v_proj output_scale)
//   per-layer specs (layer_quant_config) and exclusions -> one config group
//       per distinct scheme and `ignore` (the unquantized linears)
// Anything else (mxfp4, asymmetric activations, a non-fp8 or non-static KV
// spec, KV on only some attention layers...) is a kUnsupported error naming
// the layer and field, thrown before anything is written.
//
// Output (io::AtomicDir: staged beside out_dir, renamed into place at the
// end; a failure leaves no out_dir): the safetensors shards (tensors in the
// source's sorted name order, a quantized linear's tensors at its weight's
// place), config.json = the Quark config.json with quantization_config
// replaced by compressed-tensors' (dump_hf_json: sorted keys, indent 2), and
// every other top-level non-weight file of the source copied byte for byte.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace qloom::exporter {

struct CtExportOptions {
  bool overwrite = false;                        // replace an existing out_dir
  uint64_t max_shard_bytes = 5'000'000'000ULL;   // transformers' default "5GB"
  // Called after each output tensor is written: 1-based index, total, name.
  std::function<void(size_t, size_t, const std::string&)> progress;
};

struct CtExportSummary {
  std::string format;                   // quantization_config.format ("mixed-precision" when several)
  size_t config_groups = 0;
  uint64_t linears_quantized = 0;
  uint64_t kv_layers = 0;               // attention modules given k_scale / v_scale
  std::vector<std::string> ignore;
  uint64_t tensors_in = 0, tensors_out = 0;
  std::vector<std::string> files;       // of out_dir, sorted
  double seconds = 0;
};

// Throws qloom::Error: kNotFound / kInvalidInput for a missing or malformed
// quark_dir (or one without a Quark quantization_config); kUsage for an
// out_dir equal to, inside or containing quark_dir, or existing without
// opts.overwrite; kUnsupported as above; kIo for write failures.
CtExportSummary export_compressed_tensors(const std::filesystem::path& quark_dir,
                                          const std::filesystem::path& out_dir,
                                          const CtExportOptions& opts = {});

}  // namespace qloom::exporter
