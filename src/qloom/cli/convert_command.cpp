// qloom convert FILE.gguf --output_dir DIR [--dtype bf16|f32] [--progress on|off|auto]
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/core/format.h"
#include "qloom/model/gguf_convert.h"

namespace qloom::cli {
namespace {

void print_progress(const model::GgufConvertProgress& p) {
  std::fprintf(stderr, "[%*zu/%zu] %-28s -> %-48s %-7s %-12s %7.2f s\n",
               static_cast<int>(std::to_string(p.total).size()), p.index, p.total, p.gguf_name.c_str(),
               p.hf_name.c_str(), p.type_in.c_str(), p.shape.c_str(), p.seconds);
}

void print_summary(const std::string& in, const std::string& dtype, const model::GgufConvertSummary& s) {
  std::printf("\nqloom convert: %s -> %s (%s, %s)\n", in.c_str(), s.output_dir.string().c_str(),
              s.model_type.c_str(), dtype.c_str());
  std::printf("  %-14s %s\n", "tensors", format_count(s.tensors).c_str());
  std::string types;
  for (const auto& [t, n] : s.types_in) types += (types.empty() ? "" : ", ") + t + " x" + std::to_string(n);
  std::printf("  %-14s %s -> %s\n", "types", types.c_str(), dtype.c_str());
  std::printf("  %-14s %s -> %s\n", "bytes", format_bytes(s.bytes_in).c_str(), format_bytes(s.bytes_out).c_str());
  std::printf("  %-14s %s\n", "wall time", format_duration(s.seconds).c_str());
}

}  // namespace

void register_convert(CLI::App& app, CommandFn& run) {
  struct Options {
    std::string gguf, output_dir, dtype = "bf16", progress = "auto";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Convert a GGUF file (llama.cpp) into a HuggingFace model directory: config.json, "
                 "tokenizer files and bf16 safetensors, as transformers' GGUF loader builds them");
  sub->add_option("gguf", o->gguf, "the .gguf file")->required();
  sub->add_option(flag_names("output_dir"), o->output_dir, "a new (or empty) directory for the model")->required();
  sub->add_option(flag_names("dtype"), o->dtype, "weights dtype: bf16 (default) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}));
  sub->add_option(flag_names("progress"), o->progress, "per-tensor lines on stderr: on, off, auto (a terminal)")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  sub->callback([o, &run] {
    run = [o] {
      model::GgufConvertOptions opts;
      opts.dtype = o->dtype == "f32" ? DType::kF32 : DType::kBF16;
      const bool show = o->progress == "on" || (o->progress == "auto" && ::isatty(STDERR_FILENO));
      if (show) opts.progress = print_progress;
      const auto s = model::convert_gguf(o->gguf, o->output_dir, opts);
      print_summary(o->gguf, o->dtype, s);
      return 0;
    };
  });
}

}  // namespace qloom::cli
