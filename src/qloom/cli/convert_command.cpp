// qloom convert FILE.gguf --output_dir DIR [--dtype bf16|f32] [--progress on|off|auto]
// qloom convert QUARK_DIR --to compressed-tensors --output_dir DIR
// qloom convert QUARK_DIR --to gguf --output FILE.gguf [--gguf_float_type T] [--gguf_refit_4bit q4_k|q6_k]
//   (an existing Quark hf_format checkpoint in the other export formats, its
//   codes and scales carried over: export/compressed_tensors_export.h,
//   export/gguf_export.h; `qloom quantize --model_export` does the same in
//   one job)
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/export/compressed_tensors_export.h"
#include "qloom/export/compressed_tensors_scheme.h"
#include "qloom/export/gguf_export.h"
#include "qloom/model/gguf_convert.h"

namespace qloom::cli {
namespace {

void print_convert_progress(const model::GgufConvertProgress& p) {
  std::fprintf(stderr, "[%*zu/%zu] %-28s -> %-48s %-7s %-12s %7.2f s\n",
               static_cast<int>(std::to_string(p.total).size()), p.index, p.total, p.gguf_name.c_str(),
               p.hf_name.c_str(), p.type_in.c_str(), p.shape.c_str(), p.seconds);
}

void print_convert_summary(const std::string& in, const std::string& dtype, const model::GgufConvertSummary& s) {
  std::printf("\nqloom convert: %s -> %s (%s, %s)\n", in.c_str(), s.output_dir.string().c_str(),
              s.model_type.c_str(), dtype.c_str());
  std::printf("  %-14s %s\n", "tensors", format_count(s.tensors).c_str());
  std::string types;
  for (const auto& [t, n] : s.types_in) types += (types.empty() ? "" : ", ") + t + " x" + std::to_string(n);
  std::printf("  %-14s %s -> %s\n", "types", types.c_str(), dtype.c_str());
  std::printf("  %-14s %s -> %s\n", "bytes", format_bytes(s.bytes_in).c_str(), format_bytes(s.bytes_out).c_str());
  std::printf("  %-14s %s\n", "wall time", format_duration(s.seconds).c_str());
}

struct Options {
  std::string input, output_dir, output, to = "hf", dtype = "bf16", progress = "auto";
  std::string gguf_float_type = "f16", gguf_refit_4bit;
  bool overwrite = false;
};

int to_compressed_tensors(const Options& o) {
  if (o.output_dir.empty())
    throw Error(ErrorKind::kUsage, "", "--output_dir", "--to compressed-tensors writes a directory",
                "pass --output_dir DIR");
  exporter::CtExportOptions co;
  co.overwrite = o.overwrite;
  const auto s = exporter::export_compressed_tensors(o.input, o.output_dir, co);
  std::printf("\nqloom convert: %s -> %s (compressed-tensors %s, format %s)\n", o.input.c_str(),
              o.output_dir.c_str(), exporter::kCompressedTensorsVersion, s.format.c_str());
  std::printf("  %-14s %s quantized, %zu config group(s), %s ignored, %s KV layers\n", "linears",
              format_count(s.linears_quantized).c_str(), s.config_groups, format_count(s.ignore.size()).c_str(),
              format_count(s.kv_layers).c_str());
  std::printf("  %-14s %s -> %s\n", "tensors", format_count(s.tensors_in).c_str(), format_count(s.tensors_out).c_str());
  std::printf("  %-14s %s\n", "wall time", format_duration(s.seconds).c_str());
  return 0;
}

int to_gguf(const Options& o) {
  if (o.output.empty())
    throw Error(ErrorKind::kUsage, "", "--output", "--to gguf writes one file", "pass --output FILE.gguf");
  exporter::GgufExportOptions go = exporter::gguf_options_from_flags(o.gguf_float_type, o.gguf_refit_4bit);
  go.overwrite = o.overwrite;
  const auto s = exporter::export_gguf(o.input, o.output, go);
  std::printf("\nqloom convert: %s -> %s (GGUF, file_type %u)\n", o.input.c_str(), s.out_file.c_str(), s.file_type);
  std::string types;
  for (const auto& [t, n] : s.tensors_by_type) types += (types.empty() ? "" : ", ") + t + " x" + std::to_string(n);
  std::printf("  %-14s %s (%s)\n", "tensors", format_count(s.tensors).c_str(), types.c_str());
  std::printf("  %-14s %s carried code for code, %s re-fitted, %s dequantized\n", "weights",
              format_count(s.carried_tensors).c_str(), format_count(s.refit_tensors).c_str(),
              format_count(s.dequantized_tensors).c_str());
  std::printf("  %-14s %s\n", "size", format_bytes(s.bytes).c_str());
  for (const auto& w : s.warnings) std::fprintf(stderr, "qloom: warning: %s\n", w.c_str());
  return 0;
}

}  // namespace

void register_convert(CLI::App& app, CommandFn& run) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Convert a GGUF file (llama.cpp) into a HuggingFace model directory (config.json, tokenizer "
                 "files and bf16 safetensors, as transformers' GGUF loader builds them); or, with --to, a Quark "
                 "hf_format checkpoint into compressed-tensors or GGUF, its codes and scales carried over");
  sub->add_option("input", o->input, "the .gguf file, or (with --to) a Quark checkpoint directory")->required();
  sub->add_option(flag_names("to"), o->to, "hf (from a .gguf, default), compressed-tensors or gguf (from a Quark dir)")
      ->check(CLI::IsMember({"hf", "compressed-tensors", "compressed_tensors", "gguf"}));
  sub->add_option(flag_names("output_dir"), o->output_dir, "a new (or empty) directory for the model");
  sub->add_option(flag_names("output"), o->output, "--to gguf: the .gguf file to write");
  sub->add_option(flag_names("dtype"), o->dtype, "from a .gguf: weights dtype bf16 (default) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}));
  sub->add_option(flag_names("gguf_float_type"), o->gguf_float_type,
                  "--to gguf: type of the tensors the checkpoint did not quantize (f16, bf16, f32, q8_0, q4_k, q6_k)");
  sub->add_option(flag_names("gguf_refit_4bit"), o->gguf_refit_4bit,
                  "--to gguf: re-fit 4-bit groups as q4_k or q6_k instead of carrying them as Q4_0 / Q4_1");
  sub->add_flag(flag_names("overwrite"), o->overwrite, "--to: replace an existing output");
  sub->add_option(flag_names("progress"), o->progress, "per-tensor lines on stderr: on, off, auto (a terminal)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  sub->callback([o, &run] {
    run = [o] {
      if (o->to == "gguf") return to_gguf(*o);
      if (o->to != "hf") return to_compressed_tensors(*o);
      if (o->output_dir.empty())
        throw Error(ErrorKind::kUsage, "", "--output_dir", "converting a .gguf writes a directory",
                    "pass --output_dir DIR");
      model::GgufConvertOptions opts;
      opts.dtype = o->dtype == "f32" ? DType::kF32 : DType::kBF16;
      const bool show = o->progress == "on" || (o->progress == "auto" && ::isatty(STDERR_FILENO));
      if (show) opts.progress = print_convert_progress;
      const auto s = model::convert_gguf(o->input, o->output_dir, opts);
      print_convert_summary(o->input, o->dtype, s);
      return 0;
    };
  });
}

}  // namespace qloom::cli
