// qloom quantize — the flags of quark-cli torch-llm-ptq / quantize_quark.py.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/model_spec.h"
#include "qloom/core/format.h"
#include "qloom/job/quantize_args.h"
#include "qloom/job/quantize_job.h"

namespace qloom::cli {
namespace {

void print_progress(const job::TensorProgress& p) {
  std::fprintf(stderr, "[%*zu/%zu] %-52s %-14s %5s -> %-10s %7.2f s  ETA %s\n",
               static_cast<int>(std::to_string(p.total).size()), p.index, p.total, p.name.c_str(),
               p.shape.c_str(), p.from.c_str(), p.to.c_str(), p.seconds,
               format_duration(p.eta_seconds).c_str());
}

void print_calibration(size_t done, size_t total, double seconds) {
  const double eta = done ? seconds * double(total - done) / double(done) : 0.0;
  std::fprintf(stderr, "[calibration %zu/%zu] %7.2f s  ETA %s\n", done, total, seconds, format_duration(eta).c_str());
}

void print_summary(const job::QuantizeOptions& o, const job::QuantizeSummary& s) {
  std::printf("\nqloom quantize: %s -> %s (%s)\n", o.model_dir.c_str(), o.output_dir.c_str(),
              o.quant_scheme.c_str());
  std::printf("  %-22s %s\n", "layers quantized", (std::to_string(s.layers_quantized) + " (" +
                                                     std::to_string(s.layers_excluded) + " excluded)").c_str());
  std::printf("  %-22s %s -> %s tensors\n", "tensors", format_count(s.tensors_in).c_str(),
              format_count(s.tensors_out).c_str());
  std::printf("  %-22s %s\n", "size before", format_bytes(s.bytes_before).c_str());
  std::printf("  %-22s %s\n", "size after", format_bytes(s.bytes_after).c_str());
  std::printf("  %-22s %.2fx\n", "ratio", s.bytes_after ? double(s.bytes_before) / double(s.bytes_after) : 0.0);
  std::printf("  %-22s %.3f (quantized weights incl. scales)\n", "bits per weight", s.bits_per_weight);
  if (s.calibrated)
    std::printf("  %-22s %s samples, %s tokens from %s in %s (--data_type %s); %s static scales\n", "calibration",
                format_count(s.calib_samples).c_str(), format_count(s.calib_tokens).c_str(), s.calib_source.c_str(),
                format_duration(s.calib_seconds).c_str(), o.data_type.c_str(), format_count(s.static_scales).c_str());
  std::printf("  %-22s amd-quark %s form\n", "quantization_config", o.quark_format_version.c_str());
  for (const auto& f : s.algo_config_files)
    std::printf("  %-22s %s from %s (sha256 %s)\n", "algorithm config", f.algo.c_str(), f.path.c_str(),
                f.sha256.c_str());
  if (s.exports.size() > 1 || (s.exports.size() == 1 && s.exports[0].format != "hf_format"))
    for (const auto& e : s.exports)
      std::printf("  %-22s %s (%s%s)\n", ("export " + e.format).c_str(), e.path.c_str(), format_bytes(e.bytes).c_str(),
                  e.seconds > 0 ? (", " + format_duration(e.seconds)).c_str() : "");
  std::printf("  %-22s %s\n", "wall time", format_duration(s.seconds).c_str());
  for (const auto& w : s.warnings) std::fprintf(stderr, "qloom: warning: %s\n", w.c_str());
}

}  // namespace

void register_quantize(CLI::App& app, CommandFn& run) {
  auto cmd = std::make_shared<job::QuantizeCommand>();
  CLI::App* sub = app.add_subcommand(
      "quantize", "Quantize a HuggingFace model and export it as an AMD Quark hf_format checkpoint, "
                  "compressed-tensors and/or GGUF (accepts quark-cli torch-llm-ptq / quantize_quark.py flags)");
  job::add_quantize_flags(*sub, *cmd);
  sub->callback([=, &run] {
    run = [=] {
      job::QuantizeOptions opts = cmd->options;
      opts.model_dir = resolve_model_arg(cmd->options.model_dir.string(), io::HubFetch::kModel);
      const bool show = cmd->progress == "on" || (cmd->progress == "auto" && ::isatty(STDERR_FILENO));
      const auto summary = job::quantize_model(
          opts, show ? job::ProgressFn(print_progress) : job::ProgressFn(),
          show ? job::CalibrationProgressFn(print_calibration) : job::CalibrationProgressFn());
      print_summary(opts, summary);
      return 0;
    };
  });
}

}  // namespace qloom::cli
