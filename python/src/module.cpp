// qloom._core: the Python module over libqloom. Thin: each function is one
// library call made with the GIL released, its result handed back as JSON
// text (qloom/__init__.py parses it) or plain values; qloom::Error becomes
// the qloom.QloomError subclass of its kind (qloom/errors.py).
#include <unistd.h>

#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "callback.h"
#include "qloom/agent/workflow.h"
#include "qloom/core/error.h"
#include "qloom/eval/eval_report.h"
#include "qloom/eval/run_eval.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/data_files.h"
#include "qloom/io/hub.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/gguf_convert.h"
#include "qloom/model/gguf_inspect.h"
#include "qloom/model/inspect.h"
#include "qloom/model/model_arg.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/report.h"
#include "qloom/validate/validator.h"

#include "summary_json.h"

namespace qloom::python {
namespace {

namespace fs = std::filesystem;
using StrPairs = std::vector<std::pair<std::string, std::string>>;

// A model argument as the CLI takes it: a directory, a hub id, or a .gguf
// file (its converted copy in the GGUF cache).
std::string resolve_model(const std::string& spec, io::HubFetch fetch) {
  return spec.empty() ? spec : model::resolve_model_arg(spec, fetch, &std::cerr).string();
}

agent::Interactive interactive_of(const std::string& s) { return agent::parse_interactive(s); }

// (assessment JSON, outcome_id, verdict, exit_code, summary)
py::tuple quantize_via_prompt(const std::string& prompt, const std::string& workspace,
                              const std::optional<std::string>& quark_root, const std::string& interactive,
                              std::optional<double> acceptable_eval_gap, int max_requantize_attempts,
                              const std::optional<std::string>& model_root, unsigned threads,
                              py::object progress_fn) {
  agent::RunOptions ro;
  ro.workspace = workspace;
  if (quark_root) ro.quark_root = fs::path(*quark_root);
  if (model_root) ro.model_root = fs::path(*model_root);
  ro.interactive = interactive_of(interactive);
  ro.acceptable_eval_gap = acceptable_eval_gap;
  ro.max_requantize_attempts = max_requantize_attempts;
  ro.threads = threads;
  ro.in = &std::cin;
  ro.log = &std::cerr;
  ro.stdin_is_tty = ::isatty(STDIN_FILENO) == 1;
  ro.log_is_tty = ::isatty(STDERR_FILENO) == 1;
  PyProgress progress(std::move(progress_fn));
  ro.on_phase = [&progress](std::string_view phase, int attempt, const fs::path& ws, const fs::path& qdir) {
    progress.emit([&] {
      return py::dict(py::arg("event") = "phase", py::arg("phase") = std::string(phase),
                      py::arg("attempt") = attempt, py::arg("workspace") = ws.string(),
                      py::arg("quantized_dir") = qdir.string());
    });
  };
  const agent::RunResult r = run_released(progress, [&] { return agent::quantize_via_prompt(prompt, ro); });
  return py::make_tuple(r.assessment.is_null() ? std::string() : r.assessment.dump(), r.outcome_id, r.verdict,
                        r.exit_code, r.summary);
}

std::string quantize(const std::string& model_dir, const std::string& output_dir, const std::string& quant_scheme,
                     const std::string& kv_cache_dtype, const StrPairs& layer_quant_scheme,
                     const std::vector<std::string>& exclude_layers, const std::string& quant_algo,
                     const std::map<std::string, std::string>& algo_configs, const StrPairs& algo_config_files,
                     const std::string& dataset, uint64_t num_calib_data, uint64_t seq_len, uint64_t batch_size,
                     const std::string& device, double min_kv_scale, const std::string& pack_method,
                     const std::vector<std::string>& model_export, bool skip_evaluation, bool overwrite,
                     bool exclude_unsupported, uint64_t max_shard_bytes, unsigned threads, py::object progress_fn) {
  job::QuantizeOptions o;
  o.output_dir = output_dir;
  o.quant_scheme = quant_scheme;
  o.kv_cache_dtype = kv_cache_dtype;
  o.layer_quant_scheme = layer_quant_scheme;
  o.exclude_layers = exclude_layers;
  o.quant_algo = quant_algo;
  o.algo_configs = algo_configs;
  o.algo_config_files = algo_config_files;
  o.dataset = dataset;
  o.num_calib_data = num_calib_data;
  o.seq_len = seq_len;
  o.batch_size = batch_size;
  o.device = device;
  o.min_kv_scale = min_kv_scale;
  o.pack_method = pack_method;
  o.model_export = model_export;
  o.skip_evaluation = skip_evaluation;
  o.overwrite = overwrite;
  o.exclude_unsupported = exclude_unsupported;
  o.max_shard_bytes = max_shard_bytes;
  o.threads = threads;
  PyProgress progress(std::move(progress_fn));
  auto on_tensor = [&progress](const job::TensorProgress& t) {
    progress.emit([&] {
      return py::dict(py::arg("event") = "tensor", py::arg("index") = t.index, py::arg("total") = t.total,
                      py::arg("name") = t.name, py::arg("shape") = t.shape, py::arg("from") = t.from,
                      py::arg("to") = t.to, py::arg("seconds") = t.seconds, py::arg("eta_seconds") = t.eta_seconds);
    });
  };
  auto on_calib = [&progress](size_t done, size_t total, double seconds) {
    progress.emit([&] {
      return py::dict(py::arg("event") = "calibration", py::arg("done") = done, py::arg("total") = total,
                      py::arg("seconds") = seconds);
    });
  };
  const job::QuantizeSummary s = run_released(progress, [&] {
    o.model_dir = resolve_model(model_dir, io::HubFetch::kModel);
    return job::quantize_model(o, on_tensor, on_calib);
  });
  return quantize_summary_json(s).dump();
}

// As `qloom validate`: the report JSON (validation_report.json's form).
std::string validate(const std::string& source, const std::string& quantized, bool numeric, unsigned threads,
                     const std::optional<std::string>& report_dir, const std::string& target) {
  PyProgress progress{py::none()};
  const validate::ValidationReport report = run_released(progress, [&] {
    validate::ValidateOptions vo;
    vo.threads = threads;
    vo.target = validate::parse_deploy_target(target);
    if (numeric) vo.numeric_step = validate::check_dequantized_weights;
    validate::ValidationReport r =
        validate::validate_checkpoint(resolve_model(source, io::HubFetch::kModel), quantized, vo);
    if (report_dir) validate::write_validation_report(r, *report_dir);
    return r;
  });
  nlohmann::ordered_json j = validate::report_to_json(report);
  j["passed"] = report.passed();
  return j.dump();
}

// As `qloom eval`: eval::report_to_json of the run.
std::string evaluate(const std::string& model_dir, const std::string& task, const std::string& source,
                     const std::string& dataset, const std::string& protocol, int64_t seq_len,
                     std::optional<int64_t> limit, double time_budget, int64_t max_gen_toks, int num_fewshot,
                     const std::string& fewshot_dataset, const std::string& server, const std::string& source_server,
                     const std::string& api_key, const std::string& served_model, unsigned concurrency,
                     int max_retries, unsigned threads, const std::optional<std::string>& json_path) {
  eval::EvalOptions o;
  o.task = task;
  o.dataset = dataset;
  o.protocol = protocol;
  o.seq_len = seq_len;
  o.limit = limit;
  o.time_budget = time_budget;
  o.max_gen_toks = max_gen_toks;
  o.num_fewshot = num_fewshot;
  o.fewshot_dataset = fewshot_dataset;
  o.server = server;
  o.source_server = source_server;
  o.api_key = api_key;
  o.served_model = served_model;
  o.concurrency = concurrency;
  o.max_retries = max_retries;
  o.threads = threads;
  o.log = &std::cerr;
  o.log_is_tty = ::isatty(STDERR_FILENO) == 1;
  PyProgress progress{py::none()};
  const eval::EvalReport r = run_released(progress, [&] {
    o.model_dir = resolve_model(model_dir, io::HubFetch::kModel);
    o.source_dir = resolve_model(source, io::HubFetch::kModel);
    eval::EvalReport rep = eval::run_eval(o);
    if (json_path) eval::write_report_json(rep, *json_path);
    return rep;
  });
  return eval::report_to_json(r).dump();
}

// As `qloom inspect --json`: a local directory, a .gguf file (metadata only),
// or a hub id (config.json only until its weights are cached: "config_only").
std::string inspect(const std::string& model) {
  PyProgress progress{py::none()};
  return run_released(progress, [&] {
    if (model::is_gguf_file(model)) return model::gguf_summary_json(model).dump();
    const std::string path = resolve_model(model, io::HubFetch::kConfigOnly);
    const io::ModelDir dir = io::ModelDir::open(path);
    if (path != model && dir.weight_files().empty()) {
      nlohmann::ordered_json j = model::summary_to_json(model::summarize_config(dir));
      j["config_only"] = true;
      return j.dump();
    }
    return model::summary_to_json(model::summarize_model(dir)).dump();
  });
}

// ErrorKind as an identifier: kInvalidInput -> "invalid_input", ...
const char* kind_id(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInvalidInput: return "invalid_input";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

// qloom::Error -> qloom.errors._from_core(kind, file, item, message, remedy, what).
void translate_errors(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const Error& e) {
    py::object make = py::module_::import("qloom.errors").attr("_from_core");
    py::object exc = make(kind_id(e.kind()), e.file(), e.item(), e.message(), e.remedy(), e.what());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  }
}

}  // namespace

}  // namespace qloom::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace qloom::python;
  m.doc() = "qloom's native core (use the qloom package, not this module)";
  py::register_exception_translator(&translate_errors);
  m.def("set_bundle_base", [](const std::string& dir) { qloom::io::set_bundle_base(dir); }, py::arg("dir"));
  m.def("bundle_base", [] { return qloom::io::bundle_base().string(); });
  m.def("bundled_demo_model", [] { return qloom::agent::bundled_demo_model().string(); });
  m.def("error_kinds", [] {
    std::vector<std::string> ids;
    for (auto k : {qloom::ErrorKind::kInvalidInput, qloom::ErrorKind::kNotFound, qloom::ErrorKind::kUnsupported,
                   qloom::ErrorKind::kUsage, qloom::ErrorKind::kIo, qloom::ErrorKind::kInternal})
      ids.emplace_back(kind_id(k));
    return ids;
  });
  m.def("quantize_via_prompt", &quantize_via_prompt, py::arg("prompt"), py::arg("workspace"), py::arg("quark_root"),
        py::arg("interactive"), py::arg("acceptable_eval_gap"), py::arg("max_requantize_attempts"),
        py::arg("model_root"), py::arg("threads"), py::arg("progress"));
  const qloom::job::QuantizeOptions d;
  m.def("quantize", &quantize, py::arg("model_dir"), py::arg("output_dir"), py::arg("quant_scheme"),
        py::arg("kv_cache_dtype") = d.kv_cache_dtype, py::arg("layer_quant_scheme") = d.layer_quant_scheme,
        py::arg("exclude_layers") = d.exclude_layers, py::arg("quant_algo") = d.quant_algo,
        py::arg("algo_configs") = d.algo_configs, py::arg("algo_config_files") = d.algo_config_files,
        py::arg("dataset") = d.dataset, py::arg("num_calib_data") = d.num_calib_data,
        py::arg("seq_len") = d.seq_len, py::arg("batch_size") = d.batch_size, py::arg("device") = d.device,
        py::arg("min_kv_scale") = d.min_kv_scale, py::arg("pack_method") = d.pack_method,
        py::arg("model_export") = d.model_export, py::arg("skip_evaluation") = d.skip_evaluation,
        py::arg("overwrite") = d.overwrite, py::arg("exclude_unsupported") = d.exclude_unsupported,
        py::arg("max_shard_bytes") = d.max_shard_bytes, py::arg("threads") = d.threads,
        py::arg("progress") = py::none());
  m.def("validate", &validate, py::arg("source"), py::arg("quantized"), py::arg("numeric") = true,
        py::arg("threads") = 0u, py::arg("report_dir") = py::none(), py::arg("target") = "none");
  const qloom::eval::EvalOptions e;
  m.def("evaluate", &evaluate, py::arg("model_dir"), py::arg("task"), py::arg("source") = e.source_dir,
        py::arg("dataset") = e.dataset, py::arg("protocol") = e.protocol, py::arg("seq_len") = e.seq_len,
        py::arg("limit") = e.limit, py::arg("time_budget") = e.time_budget, py::arg("max_gen_toks") = e.max_gen_toks,
        py::arg("num_fewshot") = e.num_fewshot, py::arg("fewshot_dataset") = e.fewshot_dataset,
        py::arg("server") = e.server, py::arg("source_server") = e.source_server, py::arg("api_key") = e.api_key,
        py::arg("model") = e.served_model, py::arg("concurrency") = e.concurrency,
        py::arg("max_retries") = e.max_retries, py::arg("threads") = e.threads, py::arg("json_path") = py::none());
  m.def("inspect", &inspect, py::arg("model"));
}
