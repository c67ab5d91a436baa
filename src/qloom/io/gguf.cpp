// GGUF: the ggml type table, metadata value helpers and GgufFile (the
// memory-mapped file with typed metadata getters). The header parser is in
// gguf_parse.cpp.
#include "qloom/io/gguf.h"

#include <array>
#include <limits>
#include <unordered_map>
#include <utility>

#include "qloom/core/strings.h"
#include "qloom/core/error.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace {

using T = GgmlType;

// Block sizes as ggml defines them (ggml-common.h; gguf-py's GGML_QUANT_SIZES).
constexpr std::array<GgmlTypeInfo, 34> kTypes{{
    {T::kF32, "F32", 1, 4, true},
    {T::kF16, "F16", 1, 2, true},
    {T::kQ4_0, "Q4_0", 32, 18, true},
    {T::kQ4_1, "Q4_1", 32, 20, true},
    {T::kQ5_0, "Q5_0", 32, 22, true},
    {T::kQ5_1, "Q5_1", 32, 24, true},
    {T::kQ8_0, "Q8_0", 32, 34, true},
    {T::kQ8_1, "Q8_1", 32, 40, false},
    {T::kQ2_K, "Q2_K", 256, 84, true},
    {T::kQ3_K, "Q3_K", 256, 110, true},
    {T::kQ4_K, "Q4_K", 256, 144, true},
    {T::kQ5_K, "Q5_K", 256, 176, true},
    {T::kQ6_K, "Q6_K", 256, 210, true},
    {T::kQ8_K, "Q8_K", 256, 292, false},
    {T::kIQ2_XXS, "IQ2_XXS", 256, 66, false},
    {T::kIQ2_XS, "IQ2_XS", 256, 74, false},
    {T::kIQ3_XXS, "IQ3_XXS", 256, 98, false},
    {T::kIQ1_S, "IQ1_S", 256, 50, false},
    {T::kIQ4_NL, "IQ4_NL", 32, 18, false},
    {T::kIQ3_S, "IQ3_S", 256, 110, false},
    {T::kIQ2_S, "IQ2_S", 256, 82, false},
    {T::kIQ4_XS, "IQ4_XS", 256, 136, false},
    {T::kI8, "I8", 1, 1, false},
    {T::kI16, "I16", 1, 2, false},
    {T::kI32, "I32", 1, 4, false},
    {T::kI64, "I64", 1, 8, false},
    {T::kF64, "F64", 1, 8, false},
    {T::kIQ1_M, "IQ1_M", 256, 56, false},
    {T::kBF16, "BF16", 1, 2, true},
    {T::kTQ1_0, "TQ1_0", 256, 54, false},
    {T::kTQ2_0, "TQ2_0", 256, 66, false},
    {T::kMXFP4, "MXFP4", 32, 17, false},
    {T::kNVFP4, "NVFP4", 64, 36, false},
    {T::kQ1_0, "Q1_0", 128, 18, false},
}};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == type) return &t;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  const GgmlTypeInfo* t = ggml_type_info(static_cast<uint32_t>(type));
  if (t == nullptr)
    throw Error(ErrorKind::kInternal, "", "ggml type " + std::to_string(static_cast<uint32_t>(type)),
                "not a ggml type number");
  return *t;
}

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: return "uint8";
    case GgufValueType::kI8: return "int8";
    case GgufValueType::kU16: return "uint16";
    case GgufValueType::kI16: return "int16";
    case GgufValueType::kU32: return "uint32";
    case GgufValueType::kI32: return "int32";
    case GgufValueType::kF32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kU64: return "uint64";
    case GgufValueType::kI64: return "int64";
    case GgufValueType::kF64: return "float64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kU16:
    case GgufValueType::kI16: case GgufValueType::kU32: case GgufValueType::kI32:
    case GgufValueType::kU64: case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

uint64_t GgufTensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n;
}

std::vector<uint64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

// ---------------------------------------------------------------------------

namespace {

using NameIndex = std::unordered_map<std::string, size_t, TransparentStringHash, std::equal_to<>>;

// "a uint32", "an array of string", ... for error messages.
std::string describe(const GgufValue& v) {
  if (v.type == GgufValueType::kArray)
    return "an array of " + std::string(gguf_value_type_name(v.elem_type));
  const std::string_view n = gguf_value_type_name(v.type);
  return (n[0] == 'i' || n[0] == 'a' ? "an " : "a ") + std::string(n);
}

}  // namespace

struct GgufFile::Impl {
  MappedFile map;
  GgufHeader header;
  NameIndex keys;
  NameIndex tensors;

  std::string file() const { return map.path().string(); }

  [[noreturn]] void wrong_type(std::string_view key, const GgufValue& v,
                               const std::string& wanted) const {
    throw_invalid(file(), std::string(key),
                  "metadata value is " + describe(v) + ", expected " + wanted,
                  "the file does not follow the GGUF conventions for this key; re-convert it "
                  "with a current llama.cpp");
  }
  const GgufValue& need(std::string_view key) const {
    const auto it = keys.find(key);
    if (it == keys.end())
      throw_not_found(file(), std::string(key), "the GGUF file has no metadata key of this name",
                      "the file may come from another architecture or an older converter; "
                      "re-convert it with a current llama.cpp");
    return header.kv[it->second].second;
  }

  uint64_t as_uint(std::string_view key, const GgufValue& v) const {
    if (!v.is_integer()) wrong_type(key, v, "an integer");
    if (v.type == GgufValueType::kI8 || v.type == GgufValueType::kI16 ||
        v.type == GgufValueType::kI32 || v.type == GgufValueType::kI64) {
      if (v.i < 0)
        throw_invalid(file(), std::string(key),
                      "metadata value " + std::to_string(v.i) + " is negative, expected >= 0",
                      "the file is corrupt or was written by a faulty converter");
      return static_cast<uint64_t>(v.i);
    }
    return v.u;
  }
  int64_t as_int(std::string_view key, const GgufValue& v) const {
    if (!v.is_integer()) wrong_type(key, v, "an integer");
    if (v.type == GgufValueType::kU8 || v.type == GgufValueType::kU16 ||
        v.type == GgufValueType::kU32 || v.type == GgufValueType::kU64) {
      if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw_invalid(file(), std::string(key),
                      "metadata value " + std::to_string(v.u) + " does not fit in int64",
                      "the file is corrupt or was written by a faulty converter");
      return static_cast<int64_t>(v.u);
    }
    return v.i;
  }
  double as_float(std::string_view key, const GgufValue& v) const {
    if (v.is_float()) return v.f;
    if (!v.is_integer()) wrong_type(key, v, "a number");
    if (v.type == GgufValueType::kU8 || v.type == GgufValueType::kU16 ||
        v.type == GgufValueType::kU32 || v.type == GgufValueType::kU64)
      return static_cast<double>(v.u);
    return static_cast<double>(v.i);
  }
  const GgufValue& need_array(std::string_view key, const std::string& wanted) const {
    const GgufValue& v = need(key);
    if (v.type != GgufValueType::kArray) wrong_type(key, v, wanted);
    return v;
  }
};

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->map = MappedFile::open(path);
  impl->header = parse_gguf_header(impl->map.bytes(), path.string());
  impl->keys.reserve(impl->header.kv.size());
  for (size_t i = 0; i < impl->header.kv.size(); ++i) impl->keys.emplace(impl->header.kv[i].first, i);
  impl->tensors.reserve(impl->header.tensors.size());
  for (size_t i = 0; i < impl->header.tensors.size(); ++i)
    impl->tensors.emplace(impl->header.tensors[i].name, i);
  return GgufFile(std::move(impl));
}

const std::filesystem::path& GgufFile::path() const { return impl_->map.path(); }
const GgufHeader& GgufFile::header() const { return impl_->header; }
const MappedFile& GgufFile::mapped() const { return impl_->map; }

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = impl_->keys.find(key);
  return it == impl_->keys.end() ? nullptr : &impl_->header.kv[it->second].second;
}

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = impl_->need(key);
  if (v.type != GgufValueType::kString) impl_->wrong_type(key, v, "a string");
  size_t bad = 0;
  if (!is_valid_utf8(v.s, &bad))
    throw_invalid(impl_->file(), std::string(key),
                  "metadata string is not valid UTF-8 (bad byte at offset " + std::to_string(bad) + " of " +
                      std::to_string(v.s.size()) + ")",
                  "the file is corrupt or was written by a faulty converter; re-convert it with a current llama.cpp");
  return v.s;
}
uint64_t GgufFile::get_uint(std::string_view key) const { return impl_->as_uint(key, impl_->need(key)); }
int64_t GgufFile::get_int(std::string_view key) const { return impl_->as_int(key, impl_->need(key)); }
double GgufFile::get_float(std::string_view key) const { return impl_->as_float(key, impl_->need(key)); }

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue& v = impl_->need(key);
  if (v.type != GgufValueType::kBool) impl_->wrong_type(key, v, "a bool");
  return v.u != 0;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = impl_->need_array(key, "an array of string");
  if (v.elem_type != GgufValueType::kString) impl_->wrong_type(key, v, "an array of string");
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(e.s);
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue& v = impl_->need_array(key, "an array of numbers");
  std::vector<double> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) {
    if (!e.is_float() && !e.is_integer()) impl_->wrong_type(key, v, "an array of numbers");
    out.push_back(impl_->as_float(key, e));
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue& v = impl_->need_array(key, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) {
    if (!e.is_integer()) impl_->wrong_type(key, v, "an array of integers");
    out.push_back(impl_->as_int(key, e));
  }
  return out;
}

std::optional<std::string> GgufFile::get_string_opt(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}
std::optional<uint64_t> GgufFile::get_uint_opt(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_uint(key);
}
std::optional<double> GgufFile::get_float_opt(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = impl_->tensors.find(name);
  return it == impl_->tensors.end() ? nullptr : &impl_->header.tensors[it->second];
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensorInfo& info) const {
  const auto& ts = impl_->header.tensors;
  if (ts.empty() || &info < ts.data() || &info >= ts.data() + ts.size())
    throw Error(ErrorKind::kInternal, impl_->file(), info.name,
                "GgufTensorInfo passed to tensor_bytes() does not belong to this file");
  if (info.nbytes == 0) return {};  // an empty tensor may sit past the end of a file
  // The parser checked data_offset + offset + nbytes <= file size.
  const uint64_t off = impl_->header.data_offset + info.offset;
  return impl_->map.bytes().subspan(static_cast<size_t>(off), static_cast<size_t>(info.nbytes));
}

}  // namespace qloom::io
