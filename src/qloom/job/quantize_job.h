// The quantization job behind `qloom quantize`: open the source model, select
// layers, quantize them tensor by tensor (RTN), and export a Quark hf_format
// checkpoint (plus compressed-tensors / GGUF: job/model_export.h).
// Options mirror quark-cli torch-llm-ptq / quantize_quark.py so
// existing command lines work unchanged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qloom::job {

struct QuantizeOptions {
  std::filesystem::path model_dir;
  std::filesystem::path output_dir;
  std::string quant_scheme;
  std::string kv_cache_dtype;  // "" or "fp8"
  // --attention_dtype (Quark's attention_scheme, template.py
  // _set_attention_config): "" or "fp8": the softmax output (attention
  // probabilities, exported as <attn>.prob_output_scale) and the q
  // projections' outputs (<q_proj>.output_scale) get static per-tensor fp8
  // scales, calibrated like the KV cache.
  std::string attention_dtype;
  // --kv_cache_post_rope: QConfig.kv_cache_post_rope (k_proj's KV scale
  // observed on the keys after RoPE, Quark's cache integration; k and v each
  // written with its own scale). Refused for a fused qkv_proj, whose one scale
  // covers the values too.
  bool kv_cache_post_rope = false;
  // --data_type (quantize_quark.py's option; auto | float16 | bfloat16 |
  // float32): the dtype the calibration forward and the observers compute
  // in. qloom's default is float32 (Quark run with --data_type float32);
  // Quark's own default "auto" is the checkpoint's dtype (bf16 for most
  // models), which qloom emulates for bf16 (quant/pipeline.h).
  std::string data_type = "float32";
  // --quark_format_version: the quantization_config form, "0.13" (default)
  // or "0.12.post1" (export/quark_config.h).
  std::string quark_format_version = "0.13";
  std::vector<std::pair<std::string, std::string>> layer_quant_scheme;
  std::vector<std::string> exclude_layers;
  // "" = RTN. Otherwise Quark's --quant_algo names, comma-separated, run as
  // stages of the layer-by-layer calibration pipeline (quant/pipeline.h) on
  // each decoder layer in the order given, Quark's per-model defaults:
  //   "gptq"         quant/gptq_stage.h (quantizes the linears it claims)
  //   "awq"          quant/awq_stage.h: activation-aware scales searched per
  //                  scaling group, folded into the norms / producer linears,
  //                  plus Quark's clip search; weight-only schemes (int4 /
  //                  uint4 groups) are its use
  //   "smoothquant"  quant/smoothquant_stage.h: activation outliers migrated
  //                  into the weights (alpha per model type); for schemes that
  //                  quantize activations (int8, fp8)
  // Combinations as Quark allows them: "smoothquant,gptq", "awq,gptq". The
  // folded norms / producer rows are written with their new values and
  // listed as scaling_layers in algo_config. "gptaq" / "qronos"
  // (quant/gptaq_stage.h, quant/qronos_stage.h): GPTQ variants fitted to the
  // float model's layer inputs as well (the pipeline carries both streams).
  // "autosmoothquant" (quant/autosmoothquant_stage.h) and "rotation"
  // (quant/rotation_stage.h, first) too. Quark names without a qloom stage
  // (autoround, twobitscalar) are refused (kUnsupported).
  std::string quant_algo;
  // Per --quant_algo name, the algorithm's config as a JSON object in Quark's
  // form, overriding its per-model defaults key by key (e.g. "smoothquant" ->
  // {"alpha": 0.5}; "awq" -> {"n_grid": 10}); parsed strictly by the stage
  // (algorithm_registry.h). An entry for a name not in quant_algo is kUsage.
  std::map<std::string, std::string> algo_configs;
  // --quant_algo_config_file ALGO FILE (repeatable; job/algo_config_file.h):
  // (algorithm, path of a JSON file in Quark's form) pairs, in the order
  // given. A name with a file may not also have an algo_configs entry.
  std::vector<std::pair<std::string, std::string>> algo_config_files;
  // Calibration data (quant/calib_data.h): "" or "c4" = the bundled c4
  // sample; Quark's names (pileval, ...) need a local copy
  // (datasets/calibration/<name>.jsonl in a data dir), else a kNotFound
  // error; or a file. A sample is one document cut to seq_len tokens.
  std::string dataset;
  uint64_t num_calib_data = 512;
  uint64_t seq_len = 512;
  uint64_t batch_size = 1;
  std::string device = "cpu";
  double min_kv_scale = 0.0;
  std::string pack_method = "reorder";
  // --model_export (repeatable): hf_format, compressed-tensors, gguf; layout
  // and atomicity in job/model_export.h.
  std::vector<std::string> model_export = {"hf_format"};
  // --model_export gguf only (export/gguf_export.h): the type of tensors
  // qloom did not quantize (f16, bf16, f32, q8_0, q4_k, q6_k), and "q4_k" /
  // "q6_k" to re-fit 4-bit groups as K-quants instead of carrying them as
  // Q4_0 / Q4_1 ("" or "none").
  std::string gguf_float_type = "f16";
  std::string gguf_refit_4bit;
  bool skip_evaluation = false;
  bool overwrite = false;
  // Keep layers the scheme's Quark layout cannot hold (e.g. int4 with
  // out_features % 8 != 0) in the source dtype instead of failing.
  bool exclude_unsupported = false;
  uint64_t max_shard_bytes = 5'000'000'000ULL;
  unsigned threads = 0;  // 0 = all hardware threads
};

struct TensorProgress {
  size_t index = 0, total = 0;  // 1-based index of this tensor
  std::string name;
  std::string shape;      // "[576,576]"
  std::string from, to;   // "bf16", "int4 g128" / "copy"
  double seconds = 0;     // time spent on this tensor
  double eta_seconds = 0; // estimated time left
};

struct QuantizeSummary {
  uint64_t tensors_in = 0, tensors_out = 0;
  uint64_t layers_quantized = 0, layers_excluded = 0;
  uint64_t bytes_before = 0, bytes_after = 0;  // tensor data
  uint64_t params_quantized = 0;               // elements of quantized weights
  double bits_per_weight = 0;  // stored bits (codes + scales + zero points) per quantized weight element
  double seconds = 0;
  std::vector<std::string> warnings;
  std::vector<std::string> exclude;  // effective exclusions
  struct ConfigFileUsed {
    std::string algo, path, sha256;  // a --quant_algo_config_file read (sha256 of its bytes)
  };
  std::vector<ConfigFileUsed> algo_config_files;
  // Calibration (only when a scheme has static activation / KV scales).
  bool calibrated = false;
  std::string calib_source;
  uint64_t calib_samples = 0, calib_tokens = 0;
  double calib_seconds = 0;
  uint64_t static_scales = 0;  // input_scale / output_scale tensors written
  // --quant_algo (layer-by-layer pipeline) only:
  uint64_t algo_linears = 0;      // quantized by the algorithm (e.g. GPTQ)
  uint64_t algo_fallbacks = 0;    // the algorithm fell back to RTN (Cholesky failure)
  uint64_t rtn_linears = 0;       // decoder-layer linears quantized by RTN in the pipeline
  uint64_t unrouted_experts = 0;  // MoE expert linears without calibration tokens (RTN, warned)
  uint64_t scaled_groups = 0;     // AWQ / SmoothQuant: scaling groups folded (summed over layers)
  uint64_t unscaled_groups = 0;   // AWQ / SmoothQuant: groups left unscaled, no calibration token (warned)
  uint64_t calib_activation_bytes = 0;  // layer inputs held (fp32)
  std::vector<double> layer_seconds;    // wall time per decoder layer
  // One per --model_export format, in the order given.
  struct ExportedArtifact {
    std::string format;          // "hf_format", "compressed-tensors", "gguf"
    std::filesystem::path path;  // final path (a directory, or the .gguf file)
    uint64_t bytes = 0;          // bytes written for this format
    double seconds = 0;          // conversion time (hf_format: 0, it is the job itself)
  };
  std::vector<ExportedArtifact> exports;
};

using ProgressFn = std::function<void(const TensorProgress&)>;
// Calibration progress: samples done, total, seconds so far.
using CalibrationProgressFn = std::function<void(size_t, size_t, double)>;

// Throws qloom::Error on bad options or input; on any failure the output dir
// does not exist afterwards.
// With --quant_algo the model is never loaded whole: the calibration
// pipeline runs decoder layer after layer, the tensors are written in layer
// order (embedding, layer 0, 1, ..., then the rest), static activation / KV
// scales come from the same pass (observed on the quantized layers),
// calib_progress reports layers instead of samples, and quantization_config
// gets Quark's algo_config.
// Schemes with static activation scales (fp8, int8), --kv_cache_dtype fp8 and
// --quant_algo run the layer-by-layer calibration pipeline (quant/pipeline.h,
// one decoder layer in memory): a running max |x| per linear input / KV
// output, turned into scales as Quark's per-tensor min-max observers do
// (without an algorithm, observed on the float layers, as Quark calibrates).
QuantizeSummary quantize_model(const QuantizeOptions& opts, const ProgressFn& progress = {},
                               const CalibrationProgressFn& calib_progress = {});

}  // namespace qloom::job
