// gguf_tool: the C++ side of the GGUF cross-check with the Python `gguf`
// package (tests/interop/gguf_interop.py).
//   gguf_tool dump FILE.gguf OUT_DIR
// writes OUT_DIR/header.json {version, alignment, data_offset, kv:[{key, type,
// value}], tensors:[{name, type, ne, offset, nbytes, f32?}]} and, for every
// tensor qloom can dequantize, OUT_DIR/<f32> with its little-endian float32
// values (qloom's gguf_dequantize_tensor). An array value is
// {"elem": TYPE, "items": [...]}, recursively.
// Exit 0 on success, 2 with the error on stderr when qloom rejects the file.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/gguf.h"
#include "qloom/io/gguf_dequant.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace qloom::io;

namespace {

json value_json(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kString: return v.s;
    case GgufValueType::kBool: return v.u != 0;
    case GgufValueType::kF32: case GgufValueType::kF64: return v.f;
    case GgufValueType::kArray: {
      json items = json::array();
      for (const auto& e : v.array) items.push_back(value_json(e));
      return {{"elem", std::string(gguf_value_type_name(v.elem_type))}, {"items", items}};
    }
    default:
      if (v.type == GgufValueType::kI8 || v.type == GgufValueType::kI16 ||
          v.type == GgufValueType::kI32 || v.type == GgufValueType::kI64)
        return v.i;
      return v.u;
  }
}

int dump(const fs::path& file, const fs::path& out_dir) {
  const GgufFile f = GgufFile::open(file);
  fs::create_directories(out_dir);
  json h = {{"version", f.version()},
            {"alignment", f.header().alignment},
            {"data_offset", f.header().data_offset}};
  json kv = json::array();
  for (const auto& [key, v] : f.header().kv)
    kv.push_back({{"key", key}, {"type", std::string(gguf_value_type_name(v.type))},
                  {"value", value_json(v)}});
  h["kv"] = kv;
  json tensors = json::array();
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    const GgmlTypeInfo& info = ggml_type_info(t.type);
    json tj = {{"name", t.name}, {"type", std::string(info.name)}, {"ne", t.ne},
               {"offset", t.offset}, {"nbytes", t.nbytes}};
    if (info.can_dequantize) {
      std::string name = std::to_string(i);
      name.insert(0, 1, 't');
      name += ".f32";
      const std::vector<float> values = gguf_dequantize_tensor(f, t);
      std::ofstream o(out_dir / name, std::ios::binary);
      o.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
      if (!o) throw qloom::Error(qloom::ErrorKind::kIo, (out_dir / name).string(), "", "write failed");
      tj["f32"] = name;
    }
    tensors.push_back(tj);
  }
  h["tensors"] = tensors;
  std::ofstream(out_dir / "header.json")
      << h.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || std::string(argv[1]) != "dump") {
    std::cerr << "usage: gguf_tool dump FILE.gguf OUT_DIR\n";
    return 64;
  }
  try {
    return dump(argv[2], argv[3]);
  } catch (const qloom::Error& e) {
    std::cerr << "gguf_tool: " << e.what() << "\n";
    return 2;
  }
}
