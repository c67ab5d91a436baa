#include "qloom/job/quantize_args.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include <CLI/CLI.hpp>

#include "qloom/core/error.h"
#include "qloom/core/flag_names.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::job {
namespace {

std::string scheme_list() {
  std::string s;
  for (const auto& n : quant::scheme_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

void add_quantize_flags(CLI::App& sub, QuantizeCommand& cmd) {
  QuantizeOptions& o = cmd.options;
  sub.add_option_function<std::string>(
         flag_names("model_dir"), [&o](const std::string& v) { o.model_dir = v; },
         "source model directory or hub id org/name[@revision]")
      ->required();
  sub.add_option_function<std::string>(
         flag_names("output_dir"), [&o](const std::string& v) { o.output_dir = v; }, "where the quantized model is written")
      ->required();
  sub.add_option(flag_names("quant_scheme"), o.quant_scheme, "one of: " + scheme_list())->required();
  sub.add_option(flag_names("kv_cache_dtype"), o.kv_cache_dtype, "KV cache quantization: fp8");
  sub.add_option(flag_names("attention_dtype"), o.attention_dtype,
                 "attention quantization: fp8 (static fp8 scales for the softmax output and the q_proj output, "
                 "as Quark's attention_scheme)");
  sub.add_flag(flag_names("kv_cache_post_rope"), o.kv_cache_post_rope,
               "Quark's kv_cache_post_rope: the k_proj KV scale is observed on the keys after RoPE, as the "
               "KV cache holds them (default: on k_proj's output, before RoPE)");
  sub.add_option(flag_names("data_type"), o.data_type,
                 "dtype of the calibration forward and observers: float32 (qloom's default; Quark run with "
                 "--data_type float32), bfloat16 or auto (Quark's default: the checkpoint's dtype)")
      ->check(CLI::IsMember({"auto", "float16", "bfloat16", "float32"}))
      ->capture_default_str();
  sub.add_option(flag_names("quark_format_version"), o.quark_format_version,
                 "quantization_config form: 0.13 (amd-quark 0.13, default) or 0.12.post1 (16-key specs, expanded "
                 "exclude patterns); vLLM loads both")
      ->check(CLI::IsMember({"0.13", "0.12.post1"}))
      ->capture_default_str();
  sub.add_option(flag_names("layer_quant_scheme"), o.layer_quant_scheme,
                 "PATTERN SCHEME: a different scheme for matching layers (repeatable)");
  sub.add_option(flag_names("exclude_layers"), o.exclude_layers,
                 "layer patterns kept in the source dtype (in addition to the model's defaults)");
  sub.add_option(flag_names("quant_algo"), o.quant_algo,
                 "algorithm(s), comma-separated, run in order: gptq, gptaq, qronos, awq, smoothquant, rotation "
                 "(first: rotation,gptq)");
  sub.add_option(flag_names("quant_algo_config_file"), o.algo_config_files,
                 "ALGO FILE: a JSON config in Quark's form for one --quant_algo algorithm (repeatable), e.g. "
                 "gptq f.json with {\"name\": \"gptq\", \"damp_percent\": 0.05, \"desc_act\": false, "
                 "\"static_groups\": false, \"block_size\": 64, \"true_sequential\": true}; unknown keys are "
                 "errors; unset keys take Quark's per-model defaults");
  sub.add_option(flag_names("dataset"), o.dataset,
                 "calibration documents: c4 (the bundled sample, default), a Quark name with a local copy "
                 "(pileval: datasets/calibration/pileval.jsonl under $QLOOM_DATA_DIR or the installed data), or a "
                 "file: .jsonl (its \"text\" per line) or text (each non-blank line). A sample is one document, "
                 "tokenized alone and cut to --seq_len tokens (shorter documents stay shorter; no packing), as "
                 "Quark's pileval/wikitext loaders; a named set and its file give the same samples");
  sub.add_option(flag_names("num_calib_data"), o.num_calib_data,
                 "calibration samples: the first N non-blank documents")
      ->capture_default_str();
  sub.add_option(flag_names("seq_len"), o.seq_len, "tokens per calibration sample at most (longer documents are cut)")
      ->capture_default_str();
  sub.add_option(flag_names("batch_size"), o.batch_size, "calibration batch size")->capture_default_str();
  sub.add_option(flag_names("device"), o.device, "only cpu")->capture_default_str();
  sub.add_option(flag_names("min_kv_scale"), o.min_kv_scale, "lower bound of KV-cache scales")->capture_default_str();
  sub.add_option(flag_names("pack_method"), o.pack_method, "int4 packing: reorder | order")->capture_default_str();
  sub.add_option(flag_names("model_export"), o.model_export,
                 "export format(s), repeatable: hf_format (Quark, default), compressed-tensors (llm-compressor / "
                 "vLLM), gguf (llama.cpp: OUTPUT_DIR/<model_type>.gguf); the first directory format is "
                 "OUTPUT_DIR, compressed-tensors after hf_format goes to OUTPUT_DIR/compressed-tensors")
      ->capture_default_str();
  sub.add_option(flag_names("gguf_float_type"), o.gguf_float_type,
                 "gguf: type of the tensors qloom did not quantize: f16, bf16, f32, q8_0, q4_k, q6_k")
      ->capture_default_str();
  sub.add_option(flag_names("gguf_refit_4bit"), o.gguf_refit_4bit,
                 "gguf: re-fit 4-bit groups as q4_k or q6_k instead of carrying them as Q4_0 / Q4_1 (none)");
  sub.add_flag(flag_names("skip_evaluation"), o.skip_evaluation, "accepted (qloom quantize never evaluates)");
  sub.add_flag(flag_names("no_trust_remote_code"), cmd.no_trust_remote_code, "accepted (qloom never runs model code)");
  sub.add_flag(flag_names("overwrite"), o.overwrite, "replace an existing output directory");
  sub.add_flag(flag_names("exclude_unsupported"), o.exclude_unsupported,
               "keep layers the scheme cannot store (e.g. int4 with out_features % 8 != 0) unquantized");
  sub.add_option(flag_names("max_shard_size"), o.max_shard_bytes, "max bytes per output shard")->capture_default_str();
  sub.add_option(flag_names("threads"), o.threads, "worker threads (0 = all cores)");
  sub.add_option(flag_names("progress"), cmd.progress, "per-tensor lines on stderr: auto (when a terminal) | on | off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

QuantizeCommand parse_quantize_args(const std::vector<std::string>& args) {
  QuantizeCommand cmd;
  CLI::App app{"qloom quantize", "quantize"};
  add_quantize_flags(app, cmd);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw Error(ErrorKind::kUsage, "qloom quantize", "", e.what(),
                "fix the command line (qloom quantize --help lists the flags)");
  }
  return cmd;
}

std::vector<std::string> quantize_args(const QuantizeCommand& cmd) {
  const QuantizeOptions& o = cmd.options;
  const QuantizeOptions d;
  std::vector<std::string> a = {"--model_dir", o.model_dir.string(), "--output_dir", o.output_dir.string(),
                                "--quant_scheme", o.quant_scheme};
  if (!o.kv_cache_dtype.empty()) a.insert(a.end(), {"--kv_cache_dtype", o.kv_cache_dtype});
  if (!o.attention_dtype.empty()) a.insert(a.end(), {"--attention_dtype", o.attention_dtype});
  if (o.kv_cache_post_rope) a.push_back("--kv_cache_post_rope");
  if (o.data_type != d.data_type) a.insert(a.end(), {"--data_type", o.data_type});
  if (o.quark_format_version != d.quark_format_version)
    a.insert(a.end(), {"--quark_format_version", o.quark_format_version});
  for (const auto& [pattern, scheme] : o.layer_quant_scheme) a.insert(a.end(), {"--layer_quant_scheme", pattern, scheme});
  if (!o.exclude_layers.empty()) {
    a.push_back("--exclude_layers");
    a.insert(a.end(), o.exclude_layers.begin(), o.exclude_layers.end());
  }
  if (!o.quant_algo.empty()) a.insert(a.end(), {"--quant_algo", o.quant_algo});
  for (const auto& [algo, file] : o.algo_config_files) a.insert(a.end(), {"--quant_algo_config_file", algo, file});
  if (!o.dataset.empty()) a.insert(a.end(), {"--dataset", o.dataset});
  a.insert(a.end(), {"--num_calib_data", std::to_string(o.num_calib_data), "--seq_len", std::to_string(o.seq_len)});
  if (o.batch_size != d.batch_size) a.insert(a.end(), {"--batch_size", std::to_string(o.batch_size)});
  a.insert(a.end(), {"--device", o.device});
  if (o.min_kv_scale != d.min_kv_scale) a.insert(a.end(), {"--min_kv_scale", num(o.min_kv_scale)});
  if (o.pack_method != d.pack_method) a.insert(a.end(), {"--pack_method", o.pack_method});
  a.push_back("--model_export");
  a.insert(a.end(), o.model_export.begin(), o.model_export.end());
  if (o.gguf_float_type != d.gguf_float_type) a.insert(a.end(), {"--gguf_float_type", o.gguf_float_type});
  if (!o.gguf_refit_4bit.empty()) a.insert(a.end(), {"--gguf_refit_4bit", o.gguf_refit_4bit});
  if (o.skip_evaluation) a.push_back("--skip_evaluation");
  if (cmd.no_trust_remote_code) a.push_back("--no_trust_remote_code");
  if (o.overwrite) a.push_back("--overwrite");
  if (o.exclude_unsupported) a.push_back("--exclude_unsupported");
  if (o.max_shard_bytes != d.max_shard_bytes) a.insert(a.end(), {"--max_shard_size", std::to_string(o.max_shard_bytes)});
  if (o.threads != d.threads) a.insert(a.end(), {"--threads", std::to_string(o.threads)});
  if (cmd.progress != "auto") a.insert(a.end(), {"--progress", cmd.progress});
  return a;
}

std::string shell_quote(const std::string& w) {
  if (!w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char c) {
        return std::isalnum(c) || std::string_view("_./:=@%+,-").find(char(c)) != std::string_view::npos;
      }))
    return w;
  std::string q = "'";
  for (char c : w) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& w : argv) {
    if (!s.empty()) s += ' ';
    s += shell_quote(w);
  }
  return s;
}

}  // namespace qloom::job
