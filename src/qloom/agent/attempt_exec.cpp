// The attempt's exec and export phases: exactly the command recorded in
// run_manifest.yaml runs through `qloom quantize`'s parser (its failures
// classified into outcomes, out-of-memory with a smaller calibration as the
// fix), then the exported directory is checked and repaired and the run's
// observed status recorded. See attempt_runner.h.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include "qloom/agent/attempt_runner.h"
#include "qloom/agent/outcomes.h"
#include "qloom/agent/quantized_dir_repair.h"
#include "qloom/agent/run_manifest.h"
#include "qloom/core/format.h"
#include "qloom/io/hub.h"
#include "qloom/io/hub_error.h"
#include "qloom/model/gguf_convert.h"

namespace qloom::agent::detail {
namespace fs = std::filesystem;

// ---- exec ----
void AttemptRunner::phase_exec() {
  enter("exec");
  // Exactly the recorded command, through the same parser as `qloom quantize`.
  const auto manifest = read_run_manifest(ws_.dir());
  recorded_args_ = manifest_quantize_args(manifest);
  job::QuantizeCommand qc = job::parse_quantize_args(recorded_args_);
  check_algo_config_files(manifest);
  job::QuantizeOptions o = qc.options;
  resolve_exec_source(o);
  o.model_dir = source_dir_;
  quantized_dir_ = o.output_dir;
  check_peak_memory(o);
  run_quantize(o);
}

// The weights to quantize: a hub model is downloaded now (intake read its
// config only), a .gguf file converted once into the GGUF cache.
void AttemptRunner::resolve_exec_source(const job::QuantizeOptions& o) {
  if (model_source_ == "hub") {
    try {
      io::HubResolveOptions ho;
      ho.fetch = io::HubFetch::kModel;
      ho.log = &log_;
      ho.log_is_tty = opts_.log_is_tty;
      source_dir_ = io::resolve_model_path(o.model_dir.string(), ho);
    } catch (const io::HubError& e) {
      const auto& oc = outcome_for_hub_failure(e.failure(), "exec");
      fail_run(e);
      throw StopAttempt{std::string(oc.id), error_text(e), {}};
    }
    report_.source_dir = source_dir_.string();
  }
  if (!gguf_path_.empty()) {
    try {
      source_dir_ = model::resolve_gguf_model(gguf_path_, &log_);
    } catch (const Error& e) {
      fail_run(e);
      throw StopAttempt{"model_path_unreachable", "cannot convert " + gguf_path_.string() + ": " + error_text(e), {}};
    }
    report_.source_dir = source_dir_.string();
  }
}

// The plan's peak-memory estimate against the budget: stop before a run
// that cannot fit (exec_oom), with the smaller calibration as the fix.
void AttemptRunner::check_peak_memory(const job::QuantizeOptions& o) {
  if (const auto budget = memory_budget(); budget && plan_.contains("resource_estimate")) {
    const auto& pm = plan_["resource_estimate"]["peak_memory"];
    if (pm.is_object() && pm["bytes"].is_number_unsigned() && pm["bytes"].get<uint64_t>() > *budget) {
      const uint64_t peak = pm["bytes"].get<uint64_t>();
      fail_run_text("out of memory (predicted): peak " + format_bytes(peak) + " > budget " + format_bytes(*budget), 3);
      throw exec_oom(o, "the plan's peak-memory estimate " + format_bytes(peak) + " exceeds the memory budget " +
                            format_bytes(*budget));
    }
  }
}

// Runs the quantization (progress on a terminal log); its failures become
// the attempt's outcome.
void AttemptRunner::run_quantize(const job::QuantizeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool show = opts_.log_is_tty;
  try {
    summary_ = job::quantize_model(
        o,
        show ? job::ProgressFn([this](const job::TensorProgress& p) {
          char line[256];
          std::snprintf(line, sizeof line, "[%zu/%zu] %-48s %5s -> %-10s ETA %s\n", p.index, p.total, p.name.c_str(),
                        p.from.c_str(), p.to.c_str(), format_duration(p.eta_seconds).c_str());
          log_ << line << std::flush;
        })
             : job::ProgressFn(),
        show ? job::CalibrationProgressFn([this](size_t done, size_t total, double s) {
          log_ << "[calibration " << done << "/" << total << "] " << format_duration(s) << "\n" << std::flush;
        })
             : job::CalibrationProgressFn());
  } catch (const std::system_error& e) {
    // Thread or mapping creation refused for lack of memory is an OOM too.
    if (e.code() != std::errc::resource_unavailable_try_again && e.code() != std::errc::not_enough_memory) throw;
    throw exec_oom(o, "thread or memory creation refused: " + std::string(e.what()));
  } catch (const std::bad_alloc&) {
    throw exec_oom(o, "an allocation failed");
  } catch (const Error& e) {
    fail_run(e);
    throw classify_exec_error(e, o);
  }
  exec_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

StopAttempt AttemptRunner::exec_oom(const job::QuantizeOptions& o, const std::string& what) {
  {
    if (manifest_.contains("run") && manifest_["run"].value("status", "") == "pending") fail_run_text("out of memory: " + what, 3);
    const bool calibrated = plan_.value("needs_calibration", false) && o.num_calib_data > 1;
    if (!calibrated)
      return StopAttempt{"exec_oom", "out of memory while quantizing (" + o.quant_scheme + "): " + what +
                                         "; no calibration to shrink, so no fix this workspace can apply",
                         {}};
    FixHypothesis f;
    f.root_cause = "Quantization ran out of memory with " + std::to_string(o.num_calib_data) + " calibration samples of " +
                   std::to_string(o.seq_len) + " tokens.";
    const uint64_t n = std::max<uint64_t>(1, o.num_calib_data / 2);
    f.actions = {"halve --num_calib_data to " + std::to_string(n) + " (calibration activations scale with it)",
                 "use 1 worker thread to lower per-thread buffers"};
    f.risk = "static scales and algorithm statistics from fewer samples are noisier; the accuracy gap may grow";
    f.plan_overrides = {{"num_calib_data", n}, {"threads", 1}, {"overwrite_output", true}};
    return StopAttempt{"exec_oom", "out of memory while quantizing (" + o.quant_scheme + "): " + what, f};
  }
}

StopAttempt AttemptRunner::classify_exec_error(const Error& e, const job::QuantizeOptions& o) {
  const std::string file = e.file(), item = e.item(), text = error_text(e);
  const bool dataset = item.find("dataset") != std::string::npos || item.find("calib") != std::string::npos ||
                       (!o.dataset.empty() && file == o.dataset) || file.find("calibration") != std::string::npos;
  if (dataset) return {"exec_calibration_data_missing", text, {}};
  const bool flag = item.rfind("--", 0) == 0;  // a choice of the command, not a file's content
  if (e.kind() == ErrorKind::kUsage)
    return {"unclassified_failure", "qloom quantize refused the planned command: " + text, {}};
  if (!flag && (under(file, source_dir_) || (model_source_ == "hub" && file.find("models--") != std::string::npos)))
    return {"exec_model_load_failed", text, {}};
  if (e.kind() == ErrorKind::kUnsupported || e.kind() == ErrorKind::kInternal)
    // qloom cannot do this (a dtype, an architecture, a layout): only a change of qloom fixes it.
    return {"upstream_change_required", "qloom quantize cannot do this without a change of qloom: " + text, {}};
  if (e.kind() == ErrorKind::kIo) {
    // Writing the output failed (disk full, permission): no fix the workspace can apply.
    return {"export_crashed", text, {}};
  }
  return {"unclassified_failure", "qloom quantize failed: " + text, {}};
}

void AttemptRunner::fail_run(const Error& e) { fail_run_text(error_text(e), e.exit_code()); }

void AttemptRunner::fail_run_text(const std::string& error, int exit_status) {
  try {
    nlohmann::ordered_json obs = {{"exit_status", exit_status}, {"error", error}};
    update_run_status(manifest_, recorded_args_, "failed", obs);
    write_run_manifest(ws_.dir(), manifest_);
  } catch (const Error& e) {
    report_.notes.push_back("could not record the failed run in run_manifest.yaml: " + error_text(e));
  }
}

// ---- export ----
void AttemptRunner::phase_export() {
  enter("export");
  const fs::path q = quantized_dir_;
  check_weights_present(q);
  for (const auto& r : repair_config(source_dir_, q)) recovered("must_have_config_missing_or_invalid", r);
  for (const auto& r : repair_tokenizer(source_dir_, q)) recovered("must_have_tokenizer_missing", r);
  record_export(q);
}

// An export without *.safetensors is redone from scratch (the retry's fix).
void AttemptRunner::check_weights_present(const fs::path& q) {
  std::error_code ec;
  auto weights_present = [&] {
    for (const auto& e : fs::directory_iterator(q, ec))
      if (e.path().extension() == ".safetensors") return true;
    return false;
  };
  if (!fs::is_directory(q, ec) || !weights_present()) {
    FixHypothesis f;
    f.root_cause = "The exported directory " + q.string() + " holds no weights although the run reported success.";
    f.actions = {"re-run the same command with --overwrite so the export is redone from scratch"};
    f.risk = "if the filesystem loses files again the retry fails the same way";
    f.plan_overrides = {{"overwrite_output", true}};
    throw StopAttempt{"must_have_weights_missing", "no *.safetensors in " + q.string(), f};
  }
}

// The run succeeded: its files and summary go to run_manifest.yaml, the
// model's sizes to the attempt report.
void AttemptRunner::record_export(const fs::path& q) {
  std::error_code ec;
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  uint64_t total = 0;
  std::vector<std::pair<std::string, uint64_t>> list;
  for (const auto& e : fs::directory_iterator(q, ec))
    if (e.is_regular_file()) list.emplace_back(e.path().filename().string(), e.file_size());
  std::sort(list.begin(), list.end());
  for (const auto& [n, b] : list) {
    files.push_back({{"name", n}, {"bytes", b}});
    total += b;
  }
  nlohmann::ordered_json summary = {{"layers_quantized", summary_.layers_quantized},
                                    {"layers_excluded", summary_.layers_excluded},
                                    {"bytes_before", summary_.bytes_before},
                                    {"bytes_after", summary_.bytes_after},
                                    {"bits_per_weight", summary_.bits_per_weight},
                                    {"calibrated", summary_.calibrated},
                                    {"calib_samples", summary_.calib_samples},
                                    {"calib_tokens", summary_.calib_tokens},
                                    {"warnings", summary_.warnings}};
  nlohmann::ordered_json obs = {{"exit_status", 0}, {"seconds", exec_seconds_}, {"files", files},
                                {"size_bytes", total}, {"summary", summary}};
  update_run_status(manifest_, recorded_args_, "succeeded", obs);
  write_run_manifest(ws_.dir(), manifest_);
  report_.quantized_dir = q.string();
  report_.model = {{"source_dir", source_dir_.string()},
                   {"quantized_dir", q.string()},
                   {"quant_scheme", cmd_.options.quant_scheme},
                   {"kv_cache_dtype", cmd_.options.kv_cache_dtype},
                   {"quant_algo", cmd_.options.quant_algo},
                   {"weights_bytes_before", summary_.bytes_before},
                   {"weights_bytes_after", summary_.bytes_after},
                   {"size_ratio", summary_.bytes_after ? double(summary_.bytes_before) / double(summary_.bytes_after) : 0.0},
                   {"bits_per_weight", summary_.bits_per_weight},
                   {"layers_quantized", summary_.layers_quantized},
                   {"layers_excluded", summary_.layers_excluded},
                   {"output_bytes", total}};
}

}  // namespace qloom::agent::detail
