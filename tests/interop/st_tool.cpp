// st_tool: the C++ side of the safetensors cross-check with the Python
// `safetensors` package (tests/interop/safetensors_interop.py).
//   st_tool dump FILE_OR_MODEL_DIR   -> JSON {metadata, tensors:[{name,dtype,shape,hex}]}
//   st_tool write OUT_DIR SPEC.json  -> writes SPEC's tensors with qloom's writer
// SPEC: {"max_shard_bytes": N?, "metadata": {..}?, "tensors": [{"name","dtype","shape","hex"}]}
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/io/weight_index.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string to_hex(std::span<const std::byte> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (std::byte x : b) {
    s += d[std::to_integer<unsigned>(x) >> 4];
    s += d[std::to_integer<unsigned>(x) & 15];
  }
  return s;
}

std::vector<std::byte> from_hex(const std::string& s) {
  std::vector<std::byte> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::byte(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

json dump_view(const qloom::io::TensorView& v) {
  return {{"name", v.name()},
          {"dtype", std::string(qloom::dtype_info(v.dtype()).safetensors_name)},
          {"shape", v.shape()},
          {"hex", to_hex(v.data)}};
}

int dump(const fs::path& p) {
  json out = {{"tensors", json::array()}, {"metadata", json::object()}};
  if (fs::is_directory(p)) {
    const auto idx = qloom::io::WeightIndex::open(p);
    for (const auto& name : idx.tensor_names()) out["tensors"].push_back(dump_view(idx.view(name)));
    out["shards"] = idx.shard_files();
  } else {
    const auto f = qloom::io::SafetensorsFile::open(p);
    for (const auto& t : f.tensors()) out["tensors"].push_back(dump_view(f.view(t)));
    out["metadata"] = f.metadata();
  }
  std::cout << out.dump() << "\n";
  return 0;
}

int write(const fs::path& out_dir, const fs::path& spec_path) {
  std::ifstream in(spec_path);
  const json spec = json::parse(in);
  std::vector<qloom::io::TensorSpec> specs;
  std::vector<std::vector<std::byte>> data;
  for (const auto& t : spec.at("tensors")) {
    const auto dt = qloom::dtype_from_safetensors(t.at("dtype").get<std::string>());
    if (!dt) throw std::runtime_error("unknown dtype " + t.at("dtype").dump());
    specs.push_back({t.at("name"), *dt, t.at("shape").get<std::vector<uint64_t>>()});
    data.push_back(from_hex(t.at("hex")));
  }
  qloom::io::WriterOptions opts;
  if (spec.contains("max_shard_bytes")) opts.max_shard_bytes = spec["max_shard_bytes"];
  if (spec.contains("metadata")) opts.metadata = spec["metadata"].get<std::map<std::string, std::string>>();
  qloom::io::AtomicDir dir(out_dir);
  qloom::io::SafetensorsWriter w(dir.staging(), specs, opts);
  for (size_t i = 0; i < specs.size(); ++i) w.write(specs[i].name, data[i]);
  w.finish();
  dir.commit();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "dump" && argc == 3) return dump(argv[2]);
    if (cmd == "write" && argc == 4) return write(argv[2], argv[3]);
    std::cerr << "usage: st_tool dump PATH | st_tool write OUT_DIR SPEC.json\n";
    return 2;
  } catch (const qloom::Error& e) {
    std::cerr << "st_tool: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "st_tool: " << e.what() << "\n";
    return 1;
  }
}
