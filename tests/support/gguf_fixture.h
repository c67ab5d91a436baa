// GgufFixture: writes small GGUF files for tests (metadata of every type,
// tensors with given bytes), independent of qloom's reader. Also rebuilds the
// GGUFs described in tests/data/gguf_convert/configs/*.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::test {

class GgufFixture {
 public:
  // On-disk value type numbers (GGUF spec).
  enum Type : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

  void u32(const std::string& key, uint32_t v);
  void u64(const std::string& key, uint64_t v);
  void i32(const std::string& key, int32_t v);
  void f32(const std::string& key, float v);
  void boolean(const std::string& key, bool v);
  void str(const std::string& key, const std::string& v);
  void str_array(const std::string& key, const std::vector<std::string>& v);
  void i32_array(const std::string& key, const std::vector<int32_t>& v);
  void f32_array(const std::string& key, const std::vector<float>& v);
  // Any value from the JSON form the golden script writes: {"type", "value"[, "elem"]}.
  void from_json(const std::string& key, const nlohmann::json& entry);
  // Removes a key written earlier (for breaking a file).
  void erase(const std::string& key);

  // `shape` in row-major (HF) order; `data` the tensor's bytes in ggml `type`.
  void tensor(const std::string& name, uint32_t ggml_type, const std::vector<uint64_t>& shape,
              std::vector<uint8_t> data);
  // An F32 tensor of zeros.
  void zeros(const std::string& name, const std::vector<uint64_t>& shape);

  std::vector<uint8_t> bytes() const;
  void write(const std::filesystem::path& p) const;

  // metadata + tensors (zeros, F32) of a configs/<arch>.json golden entry.
  static GgufFixture from_config_golden(const nlohmann::json& golden);

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // type + value
  };
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> data;
  };
  void put(const std::string& key, std::vector<uint8_t> encoded);
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace qloom::test
