#include "qloom/model/gguf_convert.h"


#include <chrono>
#include <fstream>
#include <ostream>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/gguf.h"
#include "qloom/io/gguf_dequant.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/model/config_check.h"
#include "qloom/model/gguf_config.h"
#include "qloom/model/gguf_tensors.h"
#include "qloom/model/gguf_tokenizer.h"

namespace qloom::model {
namespace fs = std::filesystem;
namespace {

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw_errno(errno, p.string(), "writing", true);
}

std::string convert_shape_text(const std::vector<uint64_t>& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

void check_output_dir(const fs::path& gguf, const fs::path& out, bool& exists_empty) {
  std::error_code ec;
  exists_empty = false;
  const fs::path src_dir = fs::weakly_canonical(fs::absolute(gguf).parent_path(), ec);
  const fs::path dst = fs::weakly_canonical(fs::absolute(out), ec);
  if (dst == src_dir || dst == fs::weakly_canonical(fs::absolute(gguf), ec))
    throw Error(ErrorKind::kUsage, out.string(), "--output_dir",
                "is the GGUF's own location; qloom never writes into a source model's directory",
                "pick a new directory, e.g. " + (src_dir / (gguf.stem().string() + "-hf")).string());
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec) || !fs::is_empty(out, ec))
    throw Error(ErrorKind::kUsage, out.string(), "--output_dir", "exists and is not an empty directory",
                "pick a new directory or remove this one");
  exists_empty = true;
}

std::vector<io::TensorSpec> tensor_specs(const std::vector<GgufTensorPlan>& plans, DType dtype) {
  std::vector<io::TensorSpec> specs;
  specs.reserve(plans.size());
  for (const auto& p : plans) specs.push_back({p.hf_name, dtype, p.shape});
  return specs;
}

void write_tensor(const io::GgufFile& f, const GgufTensorPlan& p, DType dtype, io::SafetensorsWriter& w) {
  std::vector<float> v = io::gguf_dequantize_tensor(f, *p.info);
  if (p.unpermute_heads > 0) {
    const auto rows = int64_t(p.shape[0]);
    unpermute_qk_rows(v, rows, int64_t(v.size()) / rows, p.unpermute_heads);
  }
  if (dtype == DType::kF32) {
    w.write(p.hf_name, std::as_bytes(std::span<const float>(v)));
    return;
  }
  std::vector<uint16_t> b(v.size());
  f32_to_bf16(v.data(), b.data(), v.size());
  w.write(p.hf_name, std::as_bytes(std::span<const uint16_t>(b)));
}

}  // namespace

bool is_gguf_file(const fs::path& p) {
  std::error_code ec;
  return p.extension() == ".gguf" && fs::is_regular_file(p, ec);
}

nlohmann::json gguf_config_json(const fs::path& gguf) {
  const io::GgufFile f = io::GgufFile::open(gguf);
  return read_gguf_model_info(f).config;
}

GgufConvertSummary convert_gguf(const fs::path& gguf, const fs::path& output_dir, const GgufConvertOptions& opts) {
  if (opts.dtype != DType::kBF16 && opts.dtype != DType::kF32)
    throw Error(ErrorKind::kUsage, "", "--dtype", "must be bf16 or f32");
  const auto t0 = std::chrono::steady_clock::now();
  bool exists_empty = false;
  check_output_dir(gguf, output_dir, exists_empty);
  const io::GgufFile f = io::GgufFile::open(gguf);
  const GgufModelInfo info = read_gguf_model_info(f, opts.dtype == DType::kF32 ? "float32" : "bfloat16");
  validate_config(info.config, gguf.string() + " (config.json from its metadata)");
  const auto plans = plan_gguf_tensors(f, info);
  const GgufTokenizerFiles tok = gguf_tokenizer_files(f);

  io::AtomicDir out(output_dir, exists_empty);
  write_text(out.staging() / "config.json", info.config.dump(2) + "\n");
  write_text(out.staging() / "generation_config.json", gguf_generation_config(info).dump(2) + "\n");
  write_text(out.staging() / "tokenizer.json", tok.tokenizer_json);
  write_text(out.staging() / "tokenizer_config.json", tok.tokenizer_config_json);
  if (tok.chat_template) write_text(out.staging() / "chat_template.jinja", *tok.chat_template);

  GgufConvertSummary s;
  s.output_dir = output_dir;
  s.architecture = info.gguf_arch;
  s.model_type = info.model_type;
  io::SafetensorsWriter w(out.staging(), tensor_specs(plans, opts.dtype));
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& p = plans[i];
    const std::string type(io::ggml_type_info(p.info->type).name);
    write_tensor(f, p, opts.dtype, w);
    ++s.types_in[type];
    s.bytes_in += p.info->nbytes;
    if (opts.progress)
      opts.progress({i + 1, plans.size(), p.info->name, p.hf_name, type, convert_shape_text(p.shape),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
  }
  w.finish();
  s.bytes_out = w.total_bytes();
  s.tensors = plans.size();
  out.commit();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace qloom::model
