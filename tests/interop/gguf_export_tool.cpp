// gguf_export_tool: exporter::export_gguf from the command line, for the
// interop check (tests/interop/gguf_export_interop.py) and the llama.cpp
// benchmark (bench/gguf_export_llamacpp.sh), until `qloom quantize
// --model_export gguf` calls it.
//   gguf_export_tool export QUARK_DIR OUT.gguf [--float_type T] [--refit T] [--name N] [--overwrite]
//       prints the GgufExportSummary as JSON on stdout
//   gguf_export_tool expected QUARK_DIR FILE.gguf OUT_DIR
//       for every tensor of FILE.gguf, qloom's own values of the checkpoint
//       tensor it came from (Quark weights dequantized by qloom, Q/K rows in
//       llama.cpp's order, rounded to fp16 for F16 tensors, to bf16 for BF16)
//       as OUT_DIR/t<i>.f32, and OUT_DIR/expected.json [{name, type, f32}]
// Exit 0 on success, 2 with the error on stderr, 64 for usage.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/export/gguf_export.h"
#include "qloom/io/gguf.h"
#include "qloom/io/model_dir.h"
#include "qloom/model/gguf_config.h"
#include "qloom/model/gguf_tensors.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace qloom;

namespace {

int run_export(const std::vector<std::string>& a) {
  exporter::GgufExportOptions o;
  for (size_t i = 2; i < a.size(); ++i) {
    const auto next = [&] {
      if (i + 1 >= a.size()) throw Error(ErrorKind::kUsage, "", a[i], "needs a value");
      return a[++i];
    };
    if (a[i] == "--float_type") o.float_type = exporter::parse_gguf_type(next());
    else if (a[i] == "--refit") o.refit_4bit = exporter::parse_gguf_type(next());
    else if (a[i] == "--name") o.name = next();
    else if (a[i] == "--overwrite") o.overwrite = true;
    else throw Error(ErrorKind::kUsage, "", a[i], "unknown flag");
  }
  const auto s = exporter::export_gguf(a[0], a[1], o);
  json j = {{"out_file", s.out_file.string()}, {"bytes", s.bytes}, {"file_type", s.file_type},
            {"tensors", s.tensors}, {"tensors_by_type", s.tensors_by_type},
            {"carried_tensors", s.carried_tensors}, {"refit_tensors", s.refit_tensors},
            {"dequantized_tensors", s.dequantized_tensors}, {"fallback_tensors", s.fallback_tensors},
            {"carried_blocks", s.carry.blocks}, {"inexact_scale_blocks", s.carry.inexact_scale},
            {"inexact_min_blocks", s.carry.inexact_min}, {"warnings", s.warnings}};
  std::cout << j.dump(1) << "\n";
  return 0;
}

std::vector<float> host_floats(const engine::HostTensor& t) {
  std::vector<float> out(t.bytes.size() / (t.dtype == DType::kF32 ? 4 : 2));
  to_f32(t.dtype, t.bytes.data(), out.data(), out.size());
  return out;
}

int run_expected(const fs::path& quark, const fs::path& file, const fs::path& out) {
  const io::GgufFile f = io::GgufFile::open(file);
  const model::GgufModelInfo info = model::read_gguf_model_info(f);
  const auto plan = model::plan_gguf_tensors(f, info);
  const io::ModelDir dir = io::ModelDir::open(quark);
  const exporter::CheckpointRuntime rt = exporter::open_checkpoint_runtime(dir);
  fs::create_directories(out);
  json list = json::array();
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const io::GgufTensorInfo& t = f.tensors()[i];
    const auto* p = &plan[0];
    for (const auto& q : plan)
      if (q.info == &t) p = &q;
    std::vector<float> v = host_floats(rt.weights->load(p->hf_name));
    if (p->unpermute_heads > 0)
      model::permute_qk_rows(v, t.shape()[0], t.shape().size() == 2 ? t.shape()[1] : 1, p->unpermute_heads);
    if (t.type == io::GgmlType::kF16 || t.type == io::GgmlType::kBF16) {
      const DType d = t.type == io::GgmlType::kF16 ? DType::kF16 : DType::kBF16;
      std::vector<uint16_t> h(v.size());
      from_f32(d, v.data(), h.data(), v.size());
      to_f32(d, h.data(), v.data(), v.size());
    }
    const std::string name = "t" + std::to_string(i) + ".f32";
    std::ofstream o(out / name, std::ios::binary);
    o.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    if (!o) throw Error(ErrorKind::kIo, (out / name).string(), "", "write failed");
    list.push_back({{"name", t.name}, {"type", std::string(io::ggml_type_info(t.type).name)}, {"f32", name},
                    {"hf_name", p->hf_name}});
  }
  std::ofstream(out / "expected.json") << list.dump(1) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + std::min(argc, 2), argv + argc);
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "export" && a.size() >= 2) return run_export(a);
    if (cmd == "expected" && a.size() == 3) return run_expected(a[0], a[1], a[2]);
  } catch (const Error& e) {
    std::cerr << "gguf_export_tool: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: gguf_export_tool export QUARK_DIR OUT.gguf [--float_type T] [--refit T] [--name N] [--overwrite]\n"
               "       gguf_export_tool expected QUARK_DIR FILE.gguf OUT_DIR\n";
  return 64;
}
