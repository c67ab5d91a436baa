#include "support/gguf_fixture.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace qloom::test {
namespace {

using Bytes = std::vector<uint8_t>;

template <class T>
void raw(Bytes& b, T v) {
  uint8_t tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));
  b.insert(b.end(), tmp, tmp + sizeof(T));
}
void gstr(Bytes& b, const std::string& s) {
  raw<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

uint32_t type_of(const std::string& name) {
  static const char* names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                "bool",  "string", "array",  "uint64", "int64", "float64"};
  for (uint32_t i = 0; i < 13; ++i)
    if (name == names[i]) return i;
  throw std::runtime_error("unknown GGUF value type " + name);
}

void scalar(Bytes& b, uint32_t t, const nlohmann::json& v) {
  switch (t) {
    case 0: raw<uint8_t>(b, v.get<uint8_t>()); break;
    case 1: raw<int8_t>(b, v.get<int8_t>()); break;
    case 2: raw<uint16_t>(b, v.get<uint16_t>()); break;
    case 3: raw<int16_t>(b, v.get<int16_t>()); break;
    case 4: raw<uint32_t>(b, v.get<uint32_t>()); break;
    case 5: raw<int32_t>(b, v.get<int32_t>()); break;
    case 6: raw<float>(b, v.get<float>()); break;
    case 7: raw<uint8_t>(b, v.get<bool>() ? 1 : 0); break;
    case 8: gstr(b, v.get<std::string>()); break;
    case 10: raw<uint64_t>(b, v.get<uint64_t>()); break;
    case 11: raw<int64_t>(b, v.get<int64_t>()); break;
    case 12: raw<double>(b, v.get<double>()); break;
    default: throw std::runtime_error("bad scalar type");
  }
}

}  // namespace

void GgufFixture::put(const std::string& key, Bytes encoded) {
  erase(key);
  kv_.push_back({key, std::move(encoded)});
}
void GgufFixture::erase(const std::string& key) {
  for (auto it = kv_.begin(); it != kv_.end(); ++it)
    if (it->key == key) {
      kv_.erase(it);
      return;
    }
}

void GgufFixture::u32(const std::string& k, uint32_t v) { Bytes b; raw<uint32_t>(b, kU32); raw(b, v); put(k, b); }
void GgufFixture::u64(const std::string& k, uint64_t v) { Bytes b; raw<uint32_t>(b, kU64); raw(b, v); put(k, b); }
void GgufFixture::i32(const std::string& k, int32_t v) { Bytes b; raw<uint32_t>(b, kI32); raw(b, v); put(k, b); }
void GgufFixture::f32(const std::string& k, float v) { Bytes b; raw<uint32_t>(b, kF32); raw(b, v); put(k, b); }
void GgufFixture::boolean(const std::string& k, bool v) { Bytes b; raw<uint32_t>(b, kBool); raw<uint8_t>(b, v); put(k, b); }
void GgufFixture::str(const std::string& k, const std::string& v) { Bytes b; raw<uint32_t>(b, kString); gstr(b, v); put(k, b); }

void GgufFixture::str_array(const std::string& k, const std::vector<std::string>& v) {
  Bytes b;
  raw<uint32_t>(b, kArray), raw<uint32_t>(b, kString), raw<uint64_t>(b, v.size());
  for (const auto& s : v) gstr(b, s);
  put(k, b);
}
void GgufFixture::i32_array(const std::string& k, const std::vector<int32_t>& v) {
  Bytes b;
  raw<uint32_t>(b, kArray), raw<uint32_t>(b, kI32), raw<uint64_t>(b, v.size());
  for (int32_t x : v) raw(b, x);
  put(k, b);
}
void GgufFixture::f32_array(const std::string& k, const std::vector<float>& v) {
  Bytes b;
  raw<uint32_t>(b, kArray), raw<uint32_t>(b, kF32), raw<uint64_t>(b, v.size());
  for (float x : v) raw(b, x);
  put(k, b);
}

void GgufFixture::from_json(const std::string& key, const nlohmann::json& e) {
  Bytes b;
  const uint32_t t = type_of(e.at("type").get<std::string>());
  raw<uint32_t>(b, t);
  if (t == kArray) {
    const uint32_t et = type_of(e.at("elem").get<std::string>());
    raw<uint32_t>(b, et), raw<uint64_t>(b, e.at("value").size());
    for (const auto& x : e.at("value")) scalar(b, et, x);
  } else {
    scalar(b, t, e.at("value"));
  }
  put(key, b);
}

void GgufFixture::tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& shape, Bytes data) {
  tensors_.push_back({name, type, shape, std::move(data)});
}

void GgufFixture::zeros(const std::string& name, const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  tensor(name, 0, shape, Bytes(n * 4, 0));
}

std::vector<uint8_t> GgufFixture::bytes() const {
  Bytes b = {'G', 'G', 'U', 'F'};
  raw<uint32_t>(b, 3), raw<uint64_t>(b, tensors_.size()), raw<uint64_t>(b, kv_.size());
  for (const auto& kv : kv_) gstr(b, kv.key), b.insert(b.end(), kv.encoded.begin(), kv.encoded.end());
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    gstr(b, t.name);
    raw<uint32_t>(b, uint32_t(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) raw<uint64_t>(b, *it);
    raw<uint32_t>(b, t.type), raw<uint64_t>(b, offset);
    offset += (t.data.size() + 31) / 32 * 32;
  }
  b.resize((b.size() + 31) / 32 * 32, 0);
  for (const auto& t : tensors_) {
    b.insert(b.end(), t.data.begin(), t.data.end());
    b.resize((b.size() + 31) / 32 * 32, 0);
  }
  return b;
}

void GgufFixture::write(const std::filesystem::path& p) const {
  const Bytes b = bytes();
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

GgufFixture GgufFixture::from_config_golden(const nlohmann::json& g) {
  GgufFixture f;
  for (const auto& e : g.at("metadata")) f.from_json(e.at("key").get<std::string>(), e);
  for (const auto& t : g.at("tensors")) f.zeros(t.at("name").get<std::string>(), t.at("shape").get<std::vector<uint64_t>>());
  return f;
}

}  // namespace qloom::test
