// GGUF export of a finished Quark checkpoint written by qloom (or of an
// unquantized HF llama directory): one .gguf that llama.cpp loads, carrying
// qloom's own codes and scales (GPTQ / AWQ results included) into llama.cpp
// blocks where the group shapes allow (export/gguf_blocks.h).
//
// Architecture: llama (model_type "llama", e.g. SmolLM2's LlamaForCausalLM);
// any other model_type is kUnsupported naming it. Tensors (HF -> GGUF):
//   model.embed_tokens -> token_embd, model.norm -> output_norm, lm_head ->
//   output (absent when the embeddings are tied), layer N: input_layernorm ->
//   blk.N.attn_norm, self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output},
//   post_attention_layernorm -> ffn_norm, mlp.{gate,up,down}_proj ->
//   ffn_{gate,up,down}; biases follow their weights (.bias, F32). Q and K
//   rows are permuted as llama.cpp's converter permutes them (heads / kv
//   heads). A checkpoint tensor qloom does not map is kUnsupported naming it.
// Types:
//   quantized int4 symmetric (group % 32 == 0, per-channel, per-tensor) ->
//     Q4_0, uint4 asymmetric -> Q4_1, int8 symmetric -> Q8_0: codes carried
//     exactly, scales as fp16 (inexact conversions counted in the summary);
//     with refit_4bit = Q4_K / Q6_K, 4-bit tensors whose rows are whole
//     256-element super-blocks are instead re-quantized by qloom's K-quant
//     quantizer from qloom's dequantized values (others stay carried);
//   other quantized weights (fp8, fp4, uint8...) are dequantized and written
//     as `float_type` (a warning);
//   unquantized 2-D tensors -> `float_type`: F16 (default; the float type
//     every llama.cpp backend, its CPU one included, has kernels for), BF16,
//     F32, or Q8_0 / Q4_K / Q6_K quantized by qloom; rows that are not whole
//     blocks of that type fall back to Q8_0, else F16 (counted);
//   norms and biases F32.
// Activation and KV-cache quantization in the Quark config have no GGUF
// form: a warning in the summary, not a failure.
// Output: written to a hidden staging file beside out_file, renamed on
// success (never a half-written file). Byte-identical for the same inputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qloom/export/gguf_blocks.h"
#include "qloom/io/gguf.h"

namespace qloom::exporter {

struct GgufExportOptions {
  // Tensors qloom did not quantize (embeddings, lm_head, excluded linears):
  // F16, BF16, F32, Q8_0, Q4_K or Q6_K.
  io::GgmlType float_type = io::GgmlType::kF16;
  // nullopt: carry 4-bit groups as Q4_0 / Q4_1. Q4_K or Q6_K: re-fit them.
  std::optional<io::GgmlType> refit_4bit;
  std::string name;        // general.name; "" = the checkpoint directory's name
  bool overwrite = false;  // replace an existing out_file
};

struct GgufExportSummary {
  std::filesystem::path out_file;
  uint64_t bytes = 0;                       // file size
  uint32_t file_type = 0;                   // general.file_type (llama_ftype)
  uint64_t tensors = 0;
  std::map<std::string, uint64_t> tensors_by_type;  // "Q4_0" -> count
  uint64_t carried_tensors = 0;      // Quark codes carried code for code
  uint64_t refit_tensors = 0;        // 4-bit groups re-fitted as a K-quant
  uint64_t dequantized_tensors = 0;  // quantized weights no block type carries
  uint64_t fallback_tensors = 0;     // float_type / refit did not fit the rows
  CarryStats carry;                  // blocks, inexact scales / mins
  std::vector<std::string> warnings;
};

GgufExportSummary export_gguf(const std::filesystem::path& quark_dir, const std::filesystem::path& out_file,
                              const GgufExportOptions& options = {});

// "F16", "Q4_K", ... for options and reports; kUsage for other names.
io::GgmlType parse_gguf_type(const std::string& name);

// GgufExportOptions from the command-line flags --gguf_float_type (f16,
// bf16, f32, q8_0, q4_k, q6_k) and --gguf_refit_4bit ("", "none", q4_k,
// q6_k); kUsage naming the flag for anything else.
GgufExportOptions gguf_options_from_flags(const std::string& float_type, const std::string& refit_4bit);

}  // namespace qloom::exporter
