#include "qloom/io/safetensors_reader.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "qloom/core/strings.h"
#include "qloom/core/error.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace {

constexpr const char* kSafetensorsRemedy =
    "the file is corrupt or truncated; re-download it or export it again";

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += to_decimal(shape[i]);
  }
  return s + "]";
}

std::string range_string(uint64_t b, uint64_t e) { return "[" + to_decimal(b) + ", " + to_decimal(e) + "]"; }

std::string known_dtypes() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto& info = dtype_info(static_cast<DType>(i));
    if (info.safetensors_name.empty()) continue;
    if (!s.empty()) s += ", ";
    s += info.safetensors_name;
  }
  return s;
}

// The JSON type as a user would say it.
std::string json_kind(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return "the integer " + v.dump();
  if (v.is_number_integer()) return "the negative integer " + v.dump();
  if (v.is_number_float()) return "the non-integer number " + v.dump();
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "an unexpected value";
}

TensorInfo parse_entry(const std::string& name, const nlohmann::json& entry,
                       const std::string& file) {
  if (!entry.is_object())
    throw_invalid(file, name,
                  "header entry must be an object with dtype, shape and data_offsets, found " +
                      json_kind(entry),
                  kSafetensorsRemedy);

  const nlohmann::json* dtype_v = nullptr;
  const nlohmann::json* shape_v = nullptr;
  const nlohmann::json* offsets_v = nullptr;
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const std::string& key = it.key();
    if (key == "dtype") dtype_v = &it.value();
    else if (key == "shape") shape_v = &it.value();
    else if (key == "data_offsets") offsets_v = &it.value();
    else
      throw_invalid(file, name,
                    "unknown field \"" + key + "\" in the header entry (allowed: dtype, shape, "
                    "data_offsets)",
                    kSafetensorsRemedy);
  }
  for (auto [ptr, field] : {std::pair{dtype_v, "dtype"}, std::pair{shape_v, "shape"},
                            std::pair{offsets_v, "data_offsets"}})
    if (ptr == nullptr)
      throw_invalid(file, name, std::string("header entry lacks the \"") + field + "\" field",
                    kSafetensorsRemedy);

  TensorInfo t;
  t.name = name;

  // dtype
  if (!dtype_v->is_string())
    throw_invalid(file, name, "\"dtype\" must be a string, found " + json_kind(*dtype_v),
                  kSafetensorsRemedy);
  const std::string& dtype_s = dtype_v->get_ref<const std::string&>();
  const auto dtype = dtype_from_safetensors(dtype_s);
  if (!dtype)
    throw Error(ErrorKind::kUnsupported, file, name, "unknown dtype \"" + dtype_s + "\"",
                "qloom reads the safetensors dtypes " + known_dtypes() +
                    "; the file is corrupt or uses a newer format");
  t.dtype = *dtype;

  // shape
  if (!shape_v->is_array())
    throw_invalid(file, name,
                  "\"shape\" must be an array of non-negative integers, found " +
                      json_kind(*shape_v),
                  kSafetensorsRemedy);
  t.shape.reserve(shape_v->size());
  for (size_t i = 0; i < shape_v->size(); ++i) {
    const auto& d = (*shape_v)[i];
    if (!d.is_number_unsigned())
      throw_invalid(file, name,
                    "shape[" + std::to_string(i) + "] is " + json_kind(d) +
                        "; dimensions must be non-negative integers below 2^64",
                    kSafetensorsRemedy);
    t.shape.push_back(d.get<uint64_t>());
  }

  // data_offsets
  if (!offsets_v->is_array() || offsets_v->size() != 2)
    throw_invalid(file, name,
                  "\"data_offsets\" must be an array of exactly two integers [begin, end], "
                  "found " +
                      (offsets_v->is_array()
                           ? "an array of " + std::to_string(offsets_v->size()) + " elements"
                           : json_kind(*offsets_v)),
                  kSafetensorsRemedy);
  for (size_t i = 0; i < 2; ++i)
    if (!(*offsets_v)[i].is_number_unsigned())
      throw_invalid(file, name,
                    "data_offsets[" + std::to_string(i) + "] is " + json_kind((*offsets_v)[i]) +
                        "; offsets must be non-negative integers below 2^64",
                    kSafetensorsRemedy);
  t.data_begin = (*offsets_v)[0].get<uint64_t>();
  t.data_end = (*offsets_v)[1].get<uint64_t>();
  if (t.data_begin > t.data_end)
    throw_invalid(file, name,
                  "data_offsets " + range_string(t.data_begin, t.data_end) +
                      " end before they begin",
                  kSafetensorsRemedy);

  // Size: numel, then bits, with overflow checks at each step.
  uint64_t numel = 1;
  for (uint64_t d : t.shape) {
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d) {
      // A zero dimension anywhere makes the product 0; overflow only counts
      // when no dimension is zero.
      if (std::find(t.shape.begin(), t.shape.end(), uint64_t{0}) != t.shape.end()) {
        numel = 0;
        break;
      }
      throw_invalid(file, name,
                    "shape " + shape_string(t.shape) + " has more than 2^64 elements",
                    kSafetensorsRemedy);
    }
    numel *= d;
  }
  const uint64_t bits_per = static_cast<uint64_t>(dtype_bits(t.dtype));
  if (numel != 0 && numel > std::numeric_limits<uint64_t>::max() / bits_per)
    throw_invalid(file, name,
                  "shape " + shape_string(t.shape) + " of " + dtype_s +
                      " needs more than 2^64 bits",
                  kSafetensorsRemedy);
  const uint64_t bits = numel * bits_per;
  if (bits % 8 != 0)
    throw_invalid(file, name,
                  "shape " + shape_string(t.shape) + " of " + dtype_s + " is " + to_decimal(numel) +
                      " elements = " + to_decimal(bits) + " bits, not a whole number of bytes",
                  kSafetensorsRemedy);
  const uint64_t need = bits / 8;
  if (t.data_end - t.data_begin != need)
    throw_invalid(file, name,
                  "data_offsets " + range_string(t.data_begin, t.data_end) + " hold " +
                      to_decimal(t.data_end - t.data_begin) + " bytes but " + dtype_s + " shape " +
                      shape_string(t.shape) + " needs " + to_decimal(need) + " bytes",
                  kSafetensorsRemedy);
  return t;
}

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_bytes,
                                           const std::string& file_label) {
  const std::string& file = file_label;
  const uint64_t size = file_bytes.size();
  if (size < 8)
    throw_invalid(file, "header length",
                  "file is " + to_decimal(size) +
                      " bytes long, too short for a safetensors file (the header length alone "
                      "takes 8 bytes)",
                  kSafetensorsRemedy);

  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(file_bytes[i]) << (8 * i);
  if (n > kMaxSafetensorsHeaderBytes)
    throw_invalid(file, "header length",
                  "header length field claims " + to_decimal(n) + " bytes, more than the " +
                      to_decimal(kMaxSafetensorsHeaderBytes) + "-byte limit",
                  "the file is corrupt or not a safetensors file; re-download it");
  if (n > size - 8)
    throw_invalid(file, "header length",
                  "header length field claims " + to_decimal(n) + " bytes but only " + to_decimal(size - 8) +
                      " bytes follow it: the file is truncated or not a safetensors file",
                  kSafetensorsRemedy);
  if (n == 0)
    throw_invalid(file, "header", "header is empty (length 0); expected a JSON object",
                  kSafetensorsRemedy);

  const std::string_view text(reinterpret_cast<const char*>(file_bytes.data() + 8),
                              static_cast<size_t>(n));
  size_t bad = 0;
  if (!is_valid_utf8(text, &bad))
    throw_invalid(file, "header",
                  "header is not valid UTF-8 (bad byte at header offset " + std::to_string(bad) +
                      ")",
                  kSafetensorsRemedy);
  if (text[0] != '{')
    throw_invalid(file, "header", "header does not start with '{': it is not a JSON object",
                  kSafetensorsRemedy);

  JsonReadOptions opts;
  opts.reject_duplicate_keys = true;
  opts.max_depth = 16;  // valid headers nest 3 deep
  opts.remedy = kSafetensorsRemedy;
  const nlohmann::json j = parse_json_text(text, file, opts);
  if (!j.is_object())  // cannot happen after the '{' check, kept as a guard
    throw_invalid(file, "header", "header is not a JSON object", kSafetensorsRemedy);

  SafetensorsHeader h;
  h.header_len = n;
  h.data_size = size - 8 - n;
  h.tensors.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& val = it.value();
    if (key == "__metadata__") {
      if (!val.is_object())
        throw_invalid(file, "__metadata__",
                      "must be an object mapping strings to strings, found " + json_kind(val),
                      kSafetensorsRemedy);
      for (auto m = val.begin(); m != val.end(); ++m) {
        if (!m.value().is_string())
          throw_invalid(file, "__metadata__",
                        "value of metadata key \"" + m.key() + "\" is " + json_kind(m.value()) +
                            ", not a string",
                        kSafetensorsRemedy);
        h.metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, val, file));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
    if (a.data_end != b.data_end) return a.data_end < b.data_end;
    return a.name < b.name;
  });

  // The tensors must tile [0, data_size) exactly.
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : h.tensors) {
    if (t.data_begin < expected)
      throw_invalid(file, t.name,
                    "data at " + range_string(t.data_begin, t.data_end) +
                        " overlaps tensor " + prev->name + " at " +
                        range_string(prev->data_begin, prev->data_end),
                    kSafetensorsRemedy);
    if (t.data_begin > expected)
      throw_invalid(file, t.name,
                    "gap before tensor " + t.name + ": data-area bytes [" + to_decimal(expected) +
                        ", " + to_decimal(t.data_begin) + ") belong to no tensor",
                    kSafetensorsRemedy);
    expected = t.data_end;
    if (t.data_end > t.data_begin || prev == nullptr) prev = &t;
  }
  if (expected > h.data_size) {
    // Name the first tensor whose bytes are missing.
    std::string culprit;
    for (const auto& t : h.tensors)
      if (t.data_end > h.data_size) {
        culprit = t.name;
        break;
      }
    const uint64_t head = 8 + n;
    const std::string expected_total = expected <= std::numeric_limits<uint64_t>::max() - head
                                           ? to_decimal(head + expected)
                                           : "more than 2^64";
    throw_invalid(file, culprit,
                  "file is truncated: expected " + expected_total + " bytes, found " + to_decimal(size),
                  kSafetensorsRemedy);
  }
  if (expected < h.data_size)
    throw_invalid(file, "data",
                  "file has " + to_decimal(h.data_size - expected) +
                      " trailing bytes after the last tensor's data (expected " +
                      to_decimal(8 + n + expected) + " bytes, found " + to_decimal(size) + ")",
                  kSafetensorsRemedy);
  return h;
}

// ---------------------------------------------------------------------------

namespace {
}  // namespace

struct SafetensorsFile::Impl {
  MappedFile map;
  SafetensorsHeader header;
  std::unordered_map<std::string, size_t, TransparentStringHash, std::equal_to<>> by_name;
};

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->map = MappedFile::open(path);
  impl->header = parse_safetensors_header(impl->map.bytes(), path.string());
  impl->by_name.reserve(impl->header.tensors.size());
  for (size_t i = 0; i < impl->header.tensors.size(); ++i)
    impl->by_name.emplace(impl->header.tensors[i].name, i);
  return SafetensorsFile(std::move(impl));
}

const std::vector<TensorInfo>& SafetensorsFile::tensors() const { return impl_->header.tensors; }

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->header.tensors[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& info) const {
  const auto& ts = impl_->header.tensors;
  if (ts.empty() || &info < ts.data() || &info >= ts.data() + ts.size())
    throw Error(ErrorKind::kInternal, path().string(), info.name,
                "TensorInfo passed to view() does not belong to this file");
  const auto bytes = impl_->map.bytes();
  const uint64_t off = impl_->header.data_offset() + info.data_begin;
  return TensorView{&info, bytes.subspan(static_cast<size_t>(off), static_cast<size_t>(info.nbytes()))};
}

TensorView SafetensorsFile::view(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr)
    throw_not_found(path().string(), std::string(name), "no tensor of this name in the file",
                    "check the tensor name (qloom inspect lists them)");
  return view(*info);
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->header.metadata;
}
uint64_t SafetensorsFile::file_size() const { return impl_->map.size(); }
uint64_t SafetensorsFile::header_len() const { return impl_->header.header_len; }
const std::filesystem::path& SafetensorsFile::path() const { return impl_->map.path(); }
const MappedFile& SafetensorsFile::mapped() const { return impl_->map; }

}  // namespace qloom::io
