// ct_tool: the C++ side of the compressed-tensors cross-check
// (tests/interop/compressed_tensors_check.py, scripts/goldens/compressed_tensors.py).
//   ct_tool convert QUARK_DIR OUT_DIR   -> exporter::export_compressed_tensors; prints
//                                          {"seconds", "format", "config_groups", "linears", "kv_layers"}
//   ct_tool dequant QUARK_DIR OUT_FILE  -> one safetensors file: "<module>.weight" F32 [out, in] for every
//                                          quantized linear, as qloom's CheckpointRuntime dequantizes it
#include <cstring>
#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/export/compressed_tensors_export.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/safetensors_writer.h"

namespace fs = std::filesystem;
using namespace qloom;

namespace {

int convert(const fs::path& quark, const fs::path& out) {
  exporter::CtExportOptions o;
  o.overwrite = true;
  const exporter::CtExportSummary s = exporter::export_compressed_tensors(quark, out, o);
  nlohmann::json j;
  j["seconds"] = s.seconds;
  j["format"] = s.format;
  j["config_groups"] = s.config_groups;
  j["linears"] = s.linears_quantized;
  j["kv_layers"] = s.kv_layers;
  std::cout << j.dump() << "\n";
  return 0;
}

int dequant(const fs::path& quark, const fs::path& out) {
  const io::ModelDir dir = io::ModelDir::open(quark, true);
  const exporter::CheckpointRuntime rt = exporter::open_checkpoint_runtime(dir);
  std::vector<std::pair<io::TensorSpec, std::vector<uint8_t>>> tensors;
  for (const std::string& n : dir.weights().tensor_names()) {
    if (!n.ends_with(".weight_scale")) continue;
    const std::string w = n.substr(0, n.size() - std::strlen("_scale"));
    engine::HostTensor t = rt.weights->load(w);
    if (t.dtype != DType::kF32) throw Error(ErrorKind::kInternal, quark.string(), w, "not dequantized to f32", "");
    std::vector<uint64_t> shape(t.shape.begin(), t.shape.end());
    tensors.emplace_back(io::TensorSpec{w, DType::kF32, shape}, std::move(t.bytes));
  }
  std::vector<std::pair<io::TensorSpec, std::span<const std::byte>>> views;
  for (const auto& [spec, bytes] : tensors)
    views.emplace_back(spec, std::as_bytes(std::span<const uint8_t>(bytes)));
  io::write_safetensors_file(out, views);
  std::cout << tensors.size() << " dequantized weights\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ct_tool convert QUARK_DIR OUT_DIR | ct_tool dequant QUARK_DIR OUT_FILE\n";
    return 2;
  }
  try {
    const std::string cmd = argv[1];
    if (cmd == "convert") return convert(argv[2], argv[3]);
    if (cmd == "dequant") return dequant(argv[2], argv[3]);
    std::cerr << "ct_tool: unknown command " << cmd << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ct_tool: " << e.what() << "\n";
    return 1;
  }
}
