#include "qloom/export/quark_exporter.h"

#include "qloom/export/fp4_block_tensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/core/float_codec.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_progressive.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/output_guard.h"

namespace qloom::exporter {
namespace fs = std::filesystem;

PlannedTensor PlannedTensor::copy(std::string name) {
  PlannedTensor p;
  p.kind = PlannedKind::kCopy;
  p.name = std::move(name);
  return p;
}

PlannedTensor PlannedTensor::quantized(std::string module, quant::QuantSpec spec,
                                       std::vector<uint64_t> weight_shape, std::optional<quant::QuantSpec> spec2) {
  PlannedTensor p;
  p.kind = PlannedKind::kQuantizedWeight;
  p.name = module + ".weight";
  p.module = std::move(module);
  p.spec = std::move(spec);
  p.spec2 = std::move(spec2);
  p.weight_shape = std::move(weight_shape);
  return p;
}

PlannedTensor PlannedTensor::activation(std::string module, ActivationRole role, quant::QuantSpec spec,
                                        std::optional<quant::QuantSpec> spec2) {
  PlannedTensor p;
  p.kind = PlannedKind::kActivation;
  p.name = spec2 ? scale2_tensor_name(module, role) : module + "." + activation_role_prefix(role) + "_scale";
  p.module = std::move(module);
  p.role = role;
  p.spec = std::move(spec);
  p.spec2 = std::move(spec2);
  return p;
}

std::vector<PlannedTensor> plan_quark_export(const io::WeightIndex& src,
                                             const std::map<std::string, quant::LayerQuantSpec>& modules) {
  std::vector<PlannedTensor> plan;
  std::set<std::string> seen;
  for (size_t s = 0; s < src.num_shards(); ++s) {
    for (const io::TensorInfo& t : src.shard(s).tensors()) {
      const std::string& name = t.name;
      const std::string suffix = ".weight";
      std::string module;
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        module = name.substr(0, name.size() - suffix.size());
      auto it = module.empty() ? modules.end() : modules.find(module);
      if (it == modules.end()) {
        plan.push_back(PlannedTensor::copy(name));
        continue;
      }
      seen.insert(module);
      const quant::LayerQuantSpec& l = it->second;
      if (l.weight)
        plan.push_back(PlannedTensor::quantized(module, *l.weight, t.shape, l.weight_stage2));
      else
        plan.push_back(PlannedTensor::copy(name));
      if (l.input && l.input_stage2 && !l.input_stage2->is_dynamic)
        plan.push_back(PlannedTensor::activation(module, ActivationRole::kInput, *l.input, l.input_stage2));
      else if (l.input && !l.input->is_dynamic)
        plan.push_back(PlannedTensor::activation(module, ActivationRole::kInput, *l.input));
      if (l.output && !l.output->is_dynamic)
        plan.push_back(PlannedTensor::activation(module, ActivationRole::kOutput, *l.output));
    }
  }
  std::string missing;
  for (const auto& [m, l] : modules) {
    (void)l;
    if (seen.count(m)) continue;
    if (!missing.empty()) missing += ", ";
    missing += m;
  }
  if (!missing.empty())
    throw Error(ErrorKind::kNotFound, src.dir().string(), missing,
                "module(s) to quantize have no \"<module>.weight\" tensor in the source model",
                "check the module names against the model's tensors (qloom inspect)");
  return plan;
}

std::optional<DType> config_model_dtype(const nlohmann::json& config) {
  auto from = [](const nlohmann::json& obj) -> std::optional<DType> {
    if (!obj.is_object()) return std::nullopt;
    for (const char* key : {"torch_dtype", "dtype"}) {
      auto it = obj.find(key);
      if (it == obj.end() || !it->is_string()) continue;
      auto d = dtype_from_name(it->get<std::string>());
      if (d && (*d == DType::kBF16 || *d == DType::kF16 || *d == DType::kF32)) return d;
    }
    return std::nullopt;
  };
  if (auto d = from(config)) return d;
  if (config.is_object() && config.contains("text_config")) return from(config["text_config"]);
  return std::nullopt;
}

namespace {

// True when `inner` is `outer` or lies below it (both normalized absolute).
bool path_within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

fs::path normalized(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(fs::absolute(p), ec);
  if (ec) a = fs::absolute(p).lexically_normal();
  a = a.lexically_normal();
  if (a.filename().empty()) a = a.parent_path();
  return a;
}

void write_all_fd(int fd, const char* data, size_t n, const std::string& label) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n > (1u << 30) ? (1u << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw_errno(err, label, "write", /*writing=*/true);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void write_text_file(const fs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno(errno, p.string(), "creating the file", true);
  write_all_fd(fd, text.data(), text.size(), p.string());
  if (::close(fd) != 0 && errno != EINTR) throw_errno(errno, p.string(), "close", true);
}

// Byte-for-byte copy; read errors name the source, write errors (ENOSPC) the
// destination as kIo.
void copy_file_bytes(const fs::path& from, const fs::path& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw_errno(errno, from.string(), "opening for reading", false);
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    throw_errno(err, to.string(), "creating the file", true);
  }
  std::vector<char> buf(1u << 20);
  for (;;) {
    const ssize_t r = ::read(in, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(in);
      ::close(out);
      throw_errno(err, from.string(), "read", false);
    }
    if (r == 0) break;
    try {
      write_all_fd(out, buf.data(), static_cast<size_t>(r), to.string());
    } catch (...) {
      ::close(in);
      throw;
    }
  }
  ::close(in);
  if (::close(out) != 0 && errno != EINTR) throw_errno(errno, to.string(), "close", true);
}

std::string kind_name(PlannedKind k) {
  switch (k) {
    case PlannedKind::kCopy: return "a plain copy";
    case PlannedKind::kQuantizedWeight: return "a quantized weight";
    case PlannedKind::kActivation: return "an activation scale";
  }
  return "?";
}


}  // namespace

struct QuarkExporter::Impl {
  const io::ModelDir* src = nullptr;
  fs::path out_dir;
  ExportOptions opts;
  DType model_dtype = DType::kBF16;
  std::optional<io::AtomicDir> dir;
  std::vector<PlannedTensor> plan;
  std::vector<io::TensorSpec> specs;
  std::vector<size_t> spec_plan;   // spec i -> index into plan
  std::vector<size_t> plan_first;  // plan entry -> its first spec
  std::vector<size_t> plan_count;  // plan entry -> number of specs
  std::optional<io::SafetensorsWriter> writer;
  size_t next = 0;  // next spec to write
  bool planned = false, failed = false, finished = false;
  std::vector<std::string> files;

  void check_usable(const char* what) const {
    if (finished)
      throw Error(ErrorKind::kUsage, out_dir.string(), what, "the export is already finished", "");
    if (failed)
      throw Error(ErrorKind::kUsage, out_dir.string(), what, "an earlier write failed; the export is void",
                  "start a new export");
    if (!planned)
      throw Error(ErrorKind::kUsage, out_dir.string(), what, "plan() must be called before writing", "");
  }

  // The plan entry that must be written next; checks kind and identity.
  size_t expect_entry(PlannedKind kind, const std::string& id, const char* what) {
    check_usable(what);
    if (next >= specs.size())
      throw Error(ErrorKind::kUsage, out_dir.string(), id,
                  "all planned tensors are written already", "call finish()");
    const size_t pi = spec_plan[next];
    const PlannedTensor& p = plan[pi];
    const bool same = kind == PlannedKind::kCopy ? (p.kind == kind && p.name == id)
                                                 : (p.kind == kind && p.module == id);
    if (!same || plan_first[pi] != next)
      throw Error(ErrorKind::kUsage, out_dir.string(), id,
                  std::string("out of plan order: offered ") + kind_name(kind) + " for \"" + id +
                      "\", but the next planned tensor is \"" + specs[next].name + "\" (" +
                      kind_name(p.kind) + ")",
                  "write tensors in the order of planned()");
    return pi;
  }

  void write_tensors(size_t pi, const std::vector<ExportedTensor>& ts) {
    if (ts.size() != plan_count[pi])
      throw Error(ErrorKind::kInternal, out_dir.string(), plan[pi].name,
                  "packed " + std::to_string(ts.size()) + " tensors, planned " +
                      std::to_string(plan_count[pi]),
                  "");
    for (size_t k = 0; k < ts.size(); ++k) {
      const io::TensorSpec& s = specs[next + k];
      if (ts[k].name != s.name || ts[k].dtype != s.dtype || ts[k].shape != s.shape)
        throw Error(ErrorKind::kUsage, out_dir.string(), s.name,
                    "the tensor to write (" + ts[k].name + " " + std::string(dtype_name(ts[k].dtype)) + " " +
                        format_shape(ts[k].shape) + ") differs from the plan (" + s.name + " " +
                        std::string(dtype_name(s.dtype)) + " " + format_shape(s.shape) + ")",
                    "quantize with the spec and shape given to plan()");
    }
    for (const auto& t : ts) write_one(t.name, t.data);
  }

  void write_one(const std::string& name, std::span<const std::byte> bytes) {
    try {
      writer->write(name, bytes);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUsage) failed = true;  // I/O: the output is void
      throw;
    }
    ++next;
  }
};

void check_output_location(const fs::path& out_dir, const fs::path& source_dir) {
  const fs::path s = normalized(source_dir);
  const fs::path o = normalized(out_dir);
  if (o == s || path_within(o, s))
    throw Error(ErrorKind::kUsage, out_dir.string(), "--output_dir",
                "the output directory " + o.string() +
                    (o == s ? " is the source model directory " : " is inside the source model directory ") +
                    s.string(),
                "choose an output directory outside the source model (qloom never writes into it)");
  if (path_within(s, o))
    throw Error(ErrorKind::kUsage, out_dir.string(), "--output_dir",
                "the output directory " + o.string() + " contains the source model directory " + s.string(),
                "choose an output directory that does not contain the source model");
}

void write_config_and_aux_files(const io::ModelDir& src, const fs::path& staging,
                                const nlohmann::json& config, const std::vector<std::string>& weight_files) {
  const std::set<std::string> written(weight_files.begin(), weight_files.end());
  write_text_file(staging / "config.json", dump_hf_json(config));
  for (const fs::path& f : src.aux_files()) {
    const std::string fname = f.filename().string();
    if (fname == "config.json") continue;
    if (written.count(fname))
      throw Error(ErrorKind::kInvalidInput, (src.path() / f).string(), fname,
                  "an auxiliary file of the source has the name of an output weight file", "");
    copy_file_bytes(src.path() / f, staging / fname);
  }
}

QuarkExporter::QuarkExporter(const io::ModelDir& src, fs::path out_dir, ExportOptions opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.src = &src;
  m.opts = opts;
  check_output_location(out_dir, src.path());
  const fs::path o = normalized(out_dir);
  if (opts.model_dtype) {
    m.model_dtype = *opts.model_dtype;
  } else if (auto d = config_model_dtype(src.config())) {
    m.model_dtype = *d;
  } else {
    throw Error(ErrorKind::kUsage, (src.path() / "config.json").string(), "torch_dtype",
                "the source config declares no floating dtype (torch_dtype bfloat16/float16/float32)",
                "pass the model dtype explicitly");
  }
  if (m.model_dtype != DType::kBF16 && m.model_dtype != DType::kF16 && m.model_dtype != DType::kF32)
    throw Error(ErrorKind::kUsage, "", "model dtype",
                "the model dtype must be bf16, f16 or f32, got " + std::string(dtype_name(m.model_dtype)), "");
  m.out_dir = o;
  if (opts.overwrite) io::check_replaceable_output(out_dir);  // only an empty dir or a checkpoint
  m.dir.emplace(out_dir, opts.overwrite);
}

QuarkExporter::QuarkExporter(QuarkExporter&&) noexcept = default;
QuarkExporter& QuarkExporter::operator=(QuarkExporter&&) noexcept = default;

QuarkExporter::~QuarkExporter() {
  if (!impl_) return;
  // Close the shard files before AtomicDir removes the staging directory.
  impl_->writer.reset();
  impl_->dir.reset();
}

void QuarkExporter::plan(std::vector<PlannedTensor> plan) {
  Impl& m = *impl_;
  if (m.planned)
    throw Error(ErrorKind::kUsage, m.out_dir.string(), "plan", "plan() was already called", "");
  if (m.finished || m.failed)
    throw Error(ErrorKind::kUsage, m.out_dir.string(), "plan", "the export is finished or void", "");
  const io::WeightIndex& w = m.src->weights();
  std::vector<io::TensorSpec> specs;
  std::vector<size_t> spec_plan, first(plan.size()), count(plan.size());
  std::set<std::string> names;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor& p = plan[i];
    std::vector<io::TensorSpec> s;
    switch (p.kind) {
      case PlannedKind::kCopy: {
        const io::TensorInfo* info = w.find(p.name);
        if (!info)
          throw Error(ErrorKind::kNotFound, m.src->path().string(), p.name,
                      "planned copy of a tensor the source model does not have", "");
        s.push_back({p.name, info->dtype, info->shape});
        break;
      }
      case PlannedKind::kQuantizedWeight:
        // A ProgressiveSpec pair (int4_fp8) stores both stages' scales
        // (quark_progressive.h); a ScaleQuantSpec pair (nvfp4, amdfp4_global*)
        // is one fp4 block weight with a global scale (fp4_block_tensors.h).
        s = p.progressive() ? progressive_weight_specs(p.module, p.weight_shape, p.spec, *p.spec2,
                                                              m.model_dtype, m.opts.pack_order)
                                   : quark_weight_specs(p.module, p.weight_shape, p.spec, m.model_dtype,
                                                        m.opts.pack_order, p.spec2);
        break;
      case PlannedKind::kActivation:
        if (p.spec2) {
          s.push_back({scale2_tensor_name(p.module, p.role), DType::kF32, {}});
          break;
        }
        if (p.spec.is_dynamic)
          throw Error(ErrorKind::kUsage, "", p.module,
                      "a dynamic activation spec writes no tensor; leave it out of the plan", "");
        s = quark_activation_specs(p.module, p.role, p.spec, m.model_dtype);
        break;
    }
    first[i] = specs.size();
    count[i] = s.size();
    for (auto& t : s) {
      if (!names.insert(t.name).second)
        throw Error(ErrorKind::kUsage, "", t.name, "the plan writes this tensor twice", "");
      spec_plan.push_back(i);
      specs.push_back(std::move(t));
    }
  }
  io::WriterOptions wo;
  wo.max_shard_bytes = m.opts.max_shard_bytes;
  wo.metadata = {{"format", "pt"}};
  wo.base_name = "model";
  m.writer.emplace(m.dir->staging(), specs, wo);
  m.plan = std::move(plan);
  m.specs = std::move(specs);
  m.spec_plan = std::move(spec_plan);
  m.plan_first = std::move(first);
  m.plan_count = std::move(count);
  m.planned = true;
}

const std::vector<PlannedTensor>& QuarkExporter::planned() const { return impl_->plan; }
const std::vector<io::TensorSpec>& QuarkExporter::output_specs() const { return impl_->specs; }

std::string QuarkExporter::next_tensor() const {
  const Impl& m = *impl_;
  return m.next < m.specs.size() ? m.specs[m.next].name : std::string();
}

void QuarkExporter::write_plain(const std::string& name, const io::TensorView& view) {
  Impl& m = *impl_;
  m.expect_entry(PlannedKind::kCopy, name, "write_plain");
  const io::TensorSpec& s = m.specs[m.next];
  if (view.info == nullptr || view.dtype() != s.dtype || view.shape() != s.shape)
    throw Error(ErrorKind::kUsage, m.out_dir.string(), name,
                "the view's dtype/shape differ from the planned " + std::string(dtype_name(s.dtype)) + " " +
                    format_shape(s.shape),
                "pass the source tensor's view");
  m.write_one(name, view.data);
}

void QuarkExporter::write_quantized(const std::string& module, const quant::QuantizedTensor& qt) {
  Impl& m = *impl_;
  const size_t pi = m.expect_entry(PlannedKind::kQuantizedWeight, module, "write_quantized");
  if (m.plan[pi].progressive())
    throw Error(ErrorKind::kUsage, m.out_dir.string(), module,
                "the plan has a progressive (two-stage) weight here", "write it with write_progressive");
  auto ts = pack_quantized_weight(module, qt, m.model_dtype, m.opts.pack_order);
  m.write_tensors(pi, ts);
}

void QuarkExporter::write_progressive(const std::string& module, const quant::ProgressiveTensor& t) {
  Impl& m = *impl_;
  const size_t pi = m.expect_entry(PlannedKind::kQuantizedWeight, module, "write_progressive");
  const PlannedTensor& p = m.plan[pi];
  if (!p.progressive() || !(t.first.spec == p.spec) || !(t.second.spec == *p.spec2))
    throw Error(ErrorKind::kUsage, m.out_dir.string(), module,
                "the progressive tensor's stages differ from the planned weight specs",
                "quantize with the planned spec and spec2");
  auto ts = pack_progressive_weight(module, t, m.model_dtype, m.opts.pack_order);
  m.write_tensors(pi, ts);
}

void QuarkExporter::write_activation(const std::string& module, ActivationRole role, float scale,
                                     int32_t zero_point) {
  Impl& m = *impl_;
  const size_t pi = m.expect_entry(PlannedKind::kActivation, module, "write_activation");
  const PlannedTensor& p = m.plan[pi];
  if (p.role != role)
    throw Error(ErrorKind::kUsage, m.out_dir.string(), module,
                std::string("out of plan order: offered the ") +
                    activation_role_prefix(role) + " scale, next is " +
                    m.specs[m.next].name,
                "write tensors in the order of planned()");
  std::vector<ExportedTensor> ts;
  if (p.spec2) {
    if (zero_point != 0)
      throw Error(ErrorKind::kUsage, m.out_dir.string(), p.name, "a global scale has no zero point", "");
    ts.push_back(pack_global_scale(p.name, scale));
  } else {
    ts = pack_activation_qparams(module, role, p.spec, scale, zero_point, m.model_dtype);
  }
  m.write_tensors(pi, ts);
}

void QuarkExporter::write_scale(const std::string& name, float value) {
  Impl& m = *impl_;
  m.check_usable("write_scale");
  if (m.next >= m.specs.size() || m.specs[m.next].name != name)
    throw Error(ErrorKind::kUsage, m.out_dir.string(), name,
                "out of plan order: the next planned tensor is \"" +
                    (m.next < m.specs.size() ? m.specs[m.next].name : std::string()) + "\"",
                "write tensors in the order of planned()");
  const io::TensorSpec& s = m.specs[m.next];
  if (!s.shape.empty() || !(s.dtype == DType::kF32 || s.dtype == DType::kBF16 || s.dtype == DType::kF16))
    throw Error(ErrorKind::kUsage, m.out_dir.string(), name,
                "write_scale writes a scalar float tensor; this one is " + std::string(dtype_name(s.dtype)) +
                    " " + format_shape(s.shape),
                "");
  if (round_to_dtype(value, s.dtype) != value)
    throw Error(ErrorKind::kUsage, m.out_dir.string(), name,
                "value " + std::to_string(value) + " is not exactly representable in " +
                    std::string(dtype_name(s.dtype)),
                "round it with round_to_dtype first");
  std::vector<std::byte> bytes;
  if (s.dtype == DType::kF32) {
    const uint32_t b = std::bit_cast<uint32_t>(value);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::byte>((b >> (8 * i)) & 0xFF));
  } else {
    const uint16_t h = s.dtype == DType::kBF16 ? float_to_bf16(value) : float_to_f16(value);
    bytes = {static_cast<std::byte>(h & 0xFF), static_cast<std::byte>(h >> 8)};
  }
  m.write_one(name, bytes);
}

void QuarkExporter::finish(const nlohmann::ordered_json& quantization_config) {
  Impl& m = *impl_;
  m.check_usable("finish");
  if (m.next != m.specs.size())
    throw Error(ErrorKind::kUsage, m.out_dir.string(), m.specs[m.next].name,
                std::to_string(m.specs.size() - m.next) + " planned tensor(s) not written yet, next: " +
                    m.specs[m.next].name,
                "write every planned tensor before finish()");
  try {
    m.writer->finish();
    const fs::path staging = m.dir->staging();
    write_config_and_aux_files(*m.src, staging, quantized_config_json(m.src->config(), quantization_config),
                               m.writer->files());
    m.writer.reset();
    m.dir->commit();
  } catch (...) {
    m.failed = true;
    throw;
  }
  m.finished = true;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(m.out_dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  m.files = std::move(files);
}

DType QuarkExporter::model_dtype() const { return impl_->model_dtype; }

std::vector<fs::path> QuarkExporter::swept_partials() const {
  return impl_->dir ? impl_->dir->swept() : std::vector<fs::path>{};
}
const fs::path& QuarkExporter::out_dir() const { return impl_->out_dir; }
std::vector<std::string> QuarkExporter::output_files() const { return impl_->files; }

}  // namespace qloom::exporter
