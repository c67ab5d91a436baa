// A small GGUF writer for tests (not part of the library): builds files byte
// by byte so a test can write valid files of every metadata type and break any
// field it wants to provoke one parser error.
//
//   GgufBuilder b;
//   b.kv_u32("general.alignment", 64);
//   b.tensor("w", {32, 2}, GgmlType::kQ8_0);      // data laid out, aligned
//   std::vector<uint8_t> bytes = b.build();
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/io/gguf.h"

namespace qloom::test {

// Little-endian byte emitter.
struct GgufBytes {
  std::vector<uint8_t> b;

  GgufBytes& u8(uint8_t v) { b.push_back(v); return *this; }
  GgufBytes& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  GgufBytes& u16(uint16_t v) { return le(v, 2); }
  GgufBytes& u32(uint32_t v) { return le(v, 4); }
  GgufBytes& u64(uint64_t v) { return le(v, 8); }
  GgufBytes& f32(float v) { uint32_t u; std::memcpy(&u, &v, 4); return u32(u); }
  GgufBytes& f64(double v) { uint64_t u; std::memcpy(&u, &v, 8); return u64(u); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& raw(const std::vector<uint8_t>& v) { b.insert(b.end(), v.begin(), v.end()); return *this; }
};

class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type = 0;
    std::vector<uint8_t> data;   // written at `offset` in the data section
    int64_t offset = -1;         // -1: the next aligned offset after the previous tensor
  };

  uint32_t version = 3;
  uint32_t alignment = io::kGgufDefaultAlignment;  // used to lay out the data
  std::string magic = "GGUF";
  int64_t tensor_count_override = -1;
  int64_t kv_count_override = -1;

  // One KV with a raw value payload (everything after the key's value type).
  GgufBuilder& kv_raw(std::string_view key, io::GgufValueType type, const GgufBytes& payload) {
    kv_.str(key).u32(static_cast<uint32_t>(type)).raw(payload.b);
    ++kv_count_;
    return *this;
  }
  GgufBuilder& kv_u32(std::string_view key, uint32_t v) {
    return kv_raw(key, io::GgufValueType::kU32, GgufBytes().u32(v));
  }
  GgufBuilder& kv_string(std::string_view key, std::string_view v) {
    return kv_raw(key, io::GgufValueType::kString, GgufBytes().str(v));
  }
  // An array of 4-byte elements of `elem` (kU32 / kI32 / kF32).
  GgufBuilder& kv_array32(std::string_view key, io::GgufValueType elem,
                          const std::vector<uint32_t>& v) {
    GgufBytes p;
    p.u32(static_cast<uint32_t>(elem)).u64(v.size());
    for (uint32_t x : v) p.u32(x);
    return kv_raw(key, io::GgufValueType::kArray, p);
  }
  GgufBuilder& kv_strings(std::string_view key, const std::vector<std::string>& v) {
    GgufBytes p;
    p.u32(static_cast<uint32_t>(io::GgufValueType::kString)).u64(v.size());
    for (const auto& s : v) p.str(s);
    return kv_raw(key, io::GgufValueType::kArray, p);
  }

  // A tensor with `data` (default: its exact size in a byte pattern).
  GgufBuilder& tensor(std::string name, std::vector<uint64_t> ne, io::GgmlType type,
                      int64_t offset = -1) {
    const auto& info = io::ggml_type_info(type);
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    std::vector<uint8_t> data(n / info.block_elems * info.block_bytes);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + tensors_.size());
    return tensor_raw(std::move(name), std::move(ne), static_cast<uint32_t>(type), std::move(data),
                      offset);
  }
  GgufBuilder& tensor_raw(std::string name, std::vector<uint64_t> ne, uint32_t type,
                          std::vector<uint8_t> data, int64_t offset = -1) {
    tensors_.push_back({std::move(name), std::move(ne), type, std::move(data), offset});
    return *this;
  }

  std::vector<uint8_t> build() const {
    GgufBytes out;
    out.b.insert(out.b.end(), magic.begin(), magic.end());
    out.u32(version);
    out.u64(tensor_count_override >= 0 ? static_cast<uint64_t>(tensor_count_override)
                                       : tensors_.size());
    out.u64(kv_count_override >= 0 ? static_cast<uint64_t>(kv_count_override) : kv_count_);
    out.raw(kv_.b);
    // Lay out the data: each tensor at its offset, or the next aligned one.
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors_) {
      const uint64_t off = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : next;
      offsets.push_back(off);
      next = align(off + t.data.size());
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      out.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) out.u64(d);
      out.u32(t.type).u64(offsets[i]);
    }
    out.b.resize(align(out.b.size()), 0);
    const size_t data_start = out.b.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      // Offsets far out (tests of bad offsets) and empty tensors place no data.
      if (t.data.empty() || offsets[i] + t.data.size() > (1u << 20)) continue;
      if (data_start + offsets[i] + t.data.size() > out.b.size())
        out.b.resize(data_start + offsets[i] + t.data.size(), 0);
      std::memcpy(out.b.data() + data_start + offsets[i], t.data.data(), t.data.size());
    }
    out.b.resize(align(out.b.size()), 0);
    return out.b;
  }

 private:
  uint64_t align(uint64_t v) const { return (v + alignment - 1) / alignment * alignment; }

  GgufBytes kv_;
  uint64_t kv_count_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace qloom::test
