// qloom quantize — the flags of quark-cli torch-llm-ptq / quantize_quark.py.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qloom/cli/commands.h"
#include "qloom/cli/flags.h"
#include "qloom/cli/model_spec.h"
#include "qloom/core/format.h"
#include "qloom/export/quantize_job.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::cli {
namespace {

std::string scheme_list() {
  std::string s;
  for (const auto& n : quant::scheme_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

void print_progress(const exporter::TensorProgress& p) {
  std::fprintf(stderr, "[%*zu/%zu] %-52s %-14s %5s -> %-10s %7.2f s  ETA %s\n",
               static_cast<int>(std::to_string(p.total).size()), p.index, p.total, p.name.c_str(),
               p.shape.c_str(), p.from.c_str(), p.to.c_str(), p.seconds,
               format_duration(p.eta_seconds).c_str());
}

void print_calibration(size_t done, size_t total, double seconds) {
  const double eta = done ? seconds * double(total - done) / double(done) : 0.0;
  std::fprintf(stderr, "[calibration %zu/%zu] %7.2f s  ETA %s\n", done, total, seconds, format_duration(eta).c_str());
}

void print_summary(const exporter::QuantizeOptions& o, const exporter::QuantizeSummary& s) {
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
    std::printf("  %-22s %s samples, %s tokens from %s in %s; %s static scales\n", "calibration",
                format_count(s.calib_samples).c_str(), format_count(s.calib_tokens).c_str(), s.calib_source.c_str(),
                format_duration(s.calib_seconds).c_str(), format_count(s.static_scales).c_str());
  std::printf("  %-22s %s\n", "wall time", format_duration(s.seconds).c_str());
  for (const auto& w : s.warnings) std::fprintf(stderr, "qloom: warning: %s\n", w.c_str());
}

}  // namespace

void register_quantize(CLI::App& app, CommandFn& run) {
  auto o = std::make_shared<exporter::QuantizeOptions>();
  auto progress = std::make_shared<std::string>("auto");
  auto model_dir = std::make_shared<std::string>(), output_dir = std::make_shared<std::string>();
  auto no_trust = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "quantize", "Quantize a HuggingFace model and export it as an AMD Quark hf_format checkpoint "
                  "(accepts quark-cli torch-llm-ptq / quantize_quark.py flags)");
  sub->add_option(flag_names("model_dir"), *model_dir, "source model directory or hub id org/name[@revision]")->required();
  sub->add_option(flag_names("output_dir"), *output_dir, "where the quantized model is written")->required();
  sub->add_option(flag_names("quant_scheme"), o->quant_scheme, "one of: " + scheme_list())->required();
  sub->add_option(flag_names("kv_cache_dtype"), o->kv_cache_dtype, "KV cache quantization: fp8");
  sub->add_option(flag_names("layer_quant_scheme"), o->layer_quant_scheme,
                  "PATTERN SCHEME: a different scheme for matching layers (repeatable)");
  sub->add_option(flag_names("exclude_layers"), o->exclude_layers,
                  "layer patterns kept in the source dtype (in addition to the model's defaults)");
  sub->add_option(flag_names("quant_algo"), o->quant_algo, "calibrated algorithm (gptq, awq, smoothquant)");
  sub->add_option(flag_names("dataset"), o->dataset, "calibration data: a .jsonl (\"text\" per line) or text file; default: the bundled c4 sample");
  sub->add_option(flag_names("num_calib_data"), o->num_calib_data, "calibration samples")->capture_default_str();
  sub->add_option(flag_names("seq_len"), o->seq_len, "calibration sequence length")->capture_default_str();
  sub->add_option(flag_names("batch_size"), o->batch_size, "calibration batch size")->capture_default_str();
  sub->add_option(flag_names("device"), o->device, "only cpu")->capture_default_str();
  sub->add_option(flag_names("min_kv_scale"), o->min_kv_scale, "lower bound of KV-cache scales")->capture_default_str();
  sub->add_option(flag_names("pack_method"), o->pack_method, "int4 packing: reorder | order")->capture_default_str();
  sub->add_option(flag_names("model_export"), o->model_export, "only hf_format")->capture_default_str();
  sub->add_flag(flag_names("skip_evaluation"), o->skip_evaluation, "accepted (qloom quantize never evaluates)");
  sub->add_flag(flag_names("no_trust_remote_code"), *no_trust, "accepted (qloom never runs model code)");
  sub->add_flag(flag_names("overwrite"), o->overwrite, "replace an existing output directory");
  sub->add_flag(flag_names("exclude_unsupported"), o->exclude_unsupported,
                "keep layers the scheme cannot store (e.g. int4 with out_features % 8 != 0) unquantized");
  sub->add_option(flag_names("max_shard_size"), o->max_shard_bytes, "max bytes per output shard")->capture_default_str();
  sub->add_option(flag_names("threads"), o->threads, "worker threads (0 = all cores)");
  sub->add_option(flag_names("progress"), *progress, "per-tensor lines on stderr: auto (when a terminal) | on | off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  sub->callback([=, &run] {
    run = [=] {
      exporter::QuantizeOptions opts = *o;
      opts.model_dir = resolve_model_arg(*model_dir, io::HubFetch::kModel);
      opts.output_dir = *output_dir;
      const bool show = *progress == "on" || (*progress == "auto" && ::isatty(STDERR_FILENO));
      const auto summary = exporter::quantize_model(
          opts, show ? exporter::ProgressFn(print_progress) : exporter::ProgressFn(),
          show ? exporter::CalibrationProgressFn(print_calibration) : exporter::CalibrationProgressFn());
      print_summary(opts, summary);
      return 0;
    };
  });
}

}  // namespace qloom::cli
