#include "qloom/job/model_export.h"

#include <chrono>
#include <optional>
#include <system_error>

#include "qloom/core/error.h"
#include "qloom/export/compressed_tensors_export.h"
#include "qloom/export/compressed_tensors_scheme.h"
#include "qloom/export/gguf_export.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/output_guard.h"

namespace qloom::job {
namespace {

namespace fs = std::filesystem;

uint64_t bytes_under(const fs::path& p) {
  if (fs::is_regular_file(p)) return fs::file_size(p);
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec)
    throw Error(ErrorKind::kIo, to.string(), "", "cannot move " + from.string() + " into place: " + ec.message(),
                "check the output file system");
}

}  // namespace

std::vector<ExportFormat> parse_export_formats(const std::vector<std::string>& names) {
  if (names.empty())
    throw Error(ErrorKind::kUsage, "", "--model_export", "no export format given",
                "pass hf_format, compressed-tensors and/or gguf");
  std::vector<ExportFormat> out;
  for (const auto& n : names) {
    ExportFormat f;
    if (n == "hf_format") f = ExportFormat::kHfFormat;
    else if (n == "compressed-tensors" || n == "compressed_tensors") f = ExportFormat::kCompressedTensors;
    else if (n == "gguf") f = ExportFormat::kGguf;
    else if (n == "onnx" || n == "quark_safetensors" || n == "vllm_adopted_safetensors" || n == "quark_format")
      throw Error(ErrorKind::kUnsupported, "", "--model_export",
                  "'" + n + "' is one of Quark's formats qloom does not write (onnx needs a traced graph; the "
                  "legacy quark_safetensors / vllm_adopted_safetensors forms are superseded by hf_format)",
                  "pass hf_format, compressed-tensors and/or gguf");
    else
      throw Error(ErrorKind::kUsage, "", "--model_export", "unknown export format '" + n + "'",
                  "pass hf_format, compressed-tensors and/or gguf");
    for (const auto g : out)
      if (g == f)
        throw Error(ErrorKind::kUsage, "", "--model_export", "'" + n + "' is given twice", "name each format once");
    out.push_back(f);
  }
  return out;
}

std::string export_format_name(ExportFormat f) {
  switch (f) {
    case ExportFormat::kHfFormat: return "hf_format";
    case ExportFormat::kCompressedTensors: return "compressed-tensors";
    case ExportFormat::kGguf: return "gguf";
  }
  return "?";
}

struct OutputPublisher::Impl {
  fs::path out_dir;
  bool overwrite = false;
  std::vector<ExportFormat> formats;
  bool quark_only = true;
  uint64_t max_shard_bytes = 0;
  exporter::GgufExportOptions gguf;
  std::optional<io::AtomicDir> work;     // never committed: removed with everything left in it
  std::optional<io::AtomicDir> publish;  // OUT's staging, committed at the end

  bool has(ExportFormat f) const {
    for (const auto g : formats)
      if (g == f) return true;
    return false;
  }
};

OutputPublisher::OutputPublisher(const QuantizeOptions& o, const fs::path& source_dir)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.out_dir = o.output_dir;
  m.overwrite = o.overwrite;
  m.formats = parse_export_formats(o.model_export);
  m.quark_only = m.formats.size() == 1 && m.formats[0] == ExportFormat::kHfFormat;
  m.max_shard_bytes = o.max_shard_bytes;
  m.gguf = exporter::gguf_options_from_flags(o.gguf_float_type, o.gguf_refit_4bit);
  // general.name: OUT's name (the checkpoint the converter reads sits under a staging name).
  m.gguf.name = fs::absolute(o.output_dir).lexically_normal().filename().string();
  if (m.gguf.name.empty()) m.gguf.name = fs::absolute(o.output_dir).lexically_normal().parent_path().filename().string();
  if (m.quark_only) return;  // the Quark exporter checks and publishes OUT itself
  exporter::check_output_location(o.output_dir, source_dir);
  if (o.overwrite) io::check_replaceable_output(o.output_dir);  // only an empty dir or a checkpoint
  m.publish.emplace(o.output_dir, o.overwrite);  // refuses an existing OUT without --overwrite
  fs::path work_target = o.output_dir;
  work_target += ".work";
  m.work.emplace(work_target, /*overwrite=*/true);
}

OutputPublisher::~OutputPublisher() = default;

void OutputPublisher::precheck(const std::string& model_type,
                               const std::map<std::string, quant::LayerQuantSpec>& modules) const {
  const Impl& m = *impl_;
  if (m.has(ExportFormat::kGguf) && model_type != "llama")
    throw Error(ErrorKind::kUnsupported, "", "--model_export",
                "gguf export writes llama.cpp's llama architecture only; this model's model_type is '" + model_type + "'",
                "drop gguf from --model_export");
  if (m.has(ExportFormat::kGguf) || m.has(ExportFormat::kCompressedTensors))
    for (const auto& [module, spec] : modules)
      if (spec.weight_stage2)
        throw Error(ErrorKind::kUnsupported, "", "--model_export",
                    module + " has a two-stage (int4_fp8, nvfp4, amdfp4_global*) weight, which only Quark's hf_format holds",
                    "export int4_fp8, nvfp4 and amdfp4_global* as hf_format only");
  if (!m.has(ExportFormat::kCompressedTensors)) return;
  // The converter refuses the same specs later; here it costs nothing.
  for (const auto& [module, spec] : modules) {
    if (spec.weight) (void)exporter::ct_weight_args(*spec.weight, module + ".weight (--model_export compressed-tensors)");
    if (spec.input) (void)exporter::ct_activation_args(*spec.input, module + ".input (--model_export compressed-tensors)");
    if (spec.output) (void)exporter::ct_kv_cache_args(*spec.output, module + ".output (--model_export compressed-tensors)");
  }
}

fs::path OutputPublisher::quark_dir() const {
  return impl_->quark_only ? impl_->out_dir : impl_->work->staging() / "hf_format";
}

bool OutputPublisher::quark_overwrite() const { return impl_->quark_only && impl_->overwrite; }

void OutputPublisher::publish(const std::string& model_type, QuantizeSummary& sum) {
  Impl& m = *impl_;
  using Clock = std::chrono::steady_clock;
  if (m.quark_only) {
    sum.exports.push_back({"hf_format", m.out_dir, bytes_under(m.out_dir), 0});
    return;
  }
  const fs::path work = m.work->staging(), quark = quark_dir();
  const std::string gguf_name = (model_type.empty() ? std::string("model") : model_type) + ".gguf";
  std::vector<QuantizeSummary::ExportedArtifact> done;
  for (const auto f : m.formats) {
    const auto t0 = Clock::now();
    fs::path made;
    if (f == ExportFormat::kHfFormat) {
      made = quark;
    } else if (f == ExportFormat::kCompressedTensors) {
      made = work / "compressed-tensors";
      exporter::CtExportOptions co;
      co.max_shard_bytes = m.max_shard_bytes;
      (void)exporter::export_compressed_tensors(quark, made, co);
    } else {
      made = work / gguf_name;
      const exporter::GgufExportSummary gs = export_gguf(quark, made, m.gguf);
      for (const auto& w : gs.warnings) sum.warnings.push_back("gguf: " + w);
    }
    const double secs = f == ExportFormat::kHfFormat ? 0 : std::chrono::duration<double>(Clock::now() - t0).count();
    done.push_back({export_format_name(f), made, bytes_under(made), secs});
  }
  // Assemble OUT in its staging directory: the first directory format is
  // OUT itself, the rest go inside it under their names.
  const fs::path stage = m.publish->staging();
  size_t primary = done.size();
  for (size_t i = 0; i < done.size() && primary == done.size(); ++i)
    if (done[i].format != "gguf") primary = i;
  std::error_code ec;
  if (primary < done.size()) {
    fs::remove(stage, ec);  // empty: replaced by the primary directory
    rename_or_throw(done[primary].path, stage);
    done[primary].path = m.out_dir;
  }
  for (size_t i = 0; i < done.size(); ++i) {
    if (i == primary) continue;
    const fs::path name = done[i].path.filename();
    rename_or_throw(done[i].path, stage / name);
    done[i].path = m.out_dir / name;
  }
  m.publish->commit();
  sum.exports.insert(sum.exports.end(), done.begin(), done.end());
}

}  // namespace qloom::job
