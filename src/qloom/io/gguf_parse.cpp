// parse_gguf_header: the strict GGUF header parser (see gguf.h for the
// layout). Every read is bounds-checked against the bytes left, every count is
// checked against what the remaining bytes could hold before anything is
// allocated by it, and every size is computed with overflow checks.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/core/strings.h"
#include "qloom/io/gguf.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace {

constexpr const char* kGgufRemedy =
    "the file is corrupt or truncated; re-download it or convert it again";
constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Smallest encoding of one value of each type: what a count of them needs at
// the least, so a count beyond remaining / min_bytes is an error.
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
    case GgufValueType::kU16: case GgufValueType::kI16: return 2;
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
    case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kF64: return 8;
    case GgufValueType::kString: return 8;   // the length
    case GgufValueType::kArray: return 12;   // element type + count
  }
  return 1;
}

class Parser {
 public:
  Parser(std::span<const std::byte> bytes, const std::string& file) : b_(bytes), file_(file) {}

  GgufHeader parse();

 private:
  // --- raw reads ---
  uint64_t left() const { return b_.size() - pos_; }
  void need(uint64_t n, const std::string& item, const std::string& what) const {
    if (n > left())
      throw_invalid(file_, item,
                    "file ends at byte " + to_decimal(b_.size()) + " inside " + what + " (needs " +
                        to_decimal(n) + " bytes at offset " + to_decimal(pos_) + ", " + to_decimal(left()) +
                        " left): the file is truncated",
                    kGgufRemedy);
  }
  uint64_t read_le(unsigned n, const std::string& item, const std::string& what) {
    need(n, item, what);
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i) v |= static_cast<uint64_t>(b_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }
  uint32_t u32(const std::string& item, const std::string& what) {
    return static_cast<uint32_t>(read_le(4, item, what));
  }
  uint64_t u64(const std::string& item, const std::string& what) { return read_le(8, item, what); }
  std::string str(const std::string& item, const std::string& what);

  // --- header parts ---
  void parse_preamble(GgufHeader& h);
  void parse_kv(GgufHeader& h, uint64_t index);
  GgufValue parse_value(GgufValueType type, const std::string& key, uint32_t depth);
  void parse_array(GgufValue& v, const std::string& key, uint32_t depth);
  GgufValueType value_type(uint32_t raw, const std::string& key, const std::string& what) const;
  void take_alignment(GgufHeader& h) const;
  void parse_tensor_info(GgufHeader& h, uint64_t index);
  void check_tensor_size(GgufTensorInfo& t) const;
  void check_extents(const GgufHeader& h) const;

  std::span<const std::byte> b_;
  const std::string& file_;
  uint64_t pos_ = 0;
  uint64_t values_ = 0;  // metadata values so far, array elements included
  std::unordered_set<std::string> keys_, names_;
  uint64_t tensor_count_ = 0, kv_count_ = 0;
};

std::string Parser::str(const std::string& item, const std::string& what) {
  const uint64_t n = u64(item, what + " length");
  if (n > kMaxGgufStringBytes)
    throw_invalid(file_, item,
                  what + " claims " + to_decimal(n) + " bytes, more than the " +
                      to_decimal(kMaxGgufStringBytes) + "-byte limit",
                  kGgufRemedy);
  need(n, item, what);
  std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<size_t>(n));
  pos_ += n;
  return s;
}

void Parser::parse_preamble(GgufHeader& h) {
  need(4, "magic", "the magic");
  if (std::memcmp(b_.data(), "GGUF", 4) != 0)
    throw_invalid(file_, "magic", "file does not start with \"GGUF\": it is not a GGUF file",
                  "pass a .gguf file written by llama.cpp or the gguf Python package");
  pos_ = 4;
  h.version = u32("version", "the version");
  if (h.version != 2 && h.version != 3) {
    std::string why = "GGUF version " + to_decimal(h.version) + " is not supported (qloom reads 2 and 3)";
    if ((h.version & 0xFFFF) == 0 && h.version != 0)
      why = "the version field reads " + to_decimal(h.version) +
            ": this is a big-endian GGUF file, which qloom does not read";
    throw Error(ErrorKind::kUnsupported, file_, "version", why,
                "convert the model again with a current llama.cpp (little-endian, GGUF v3)");
  }
  tensor_count_ = u64("tensor_count", "the tensor count");
  kv_count_ = u64("metadata_kv_count", "the metadata key/value count");
  // A tensor info takes >= 24 bytes (empty name, no dims), a KV >= 13.
  if (tensor_count_ > left() / 24)
    throw_invalid(file_, "tensor_count",
                  "tensor count " + to_decimal(tensor_count_) + " cannot fit in the " + to_decimal(left()) +
                      " bytes left in the file",
                  kGgufRemedy);
  if (kv_count_ > left() / 13)
    throw_invalid(file_, "metadata_kv_count",
                  "metadata key/value count " + to_decimal(kv_count_) + " cannot fit in the " +
                      to_decimal(left()) + " bytes left in the file",
                  kGgufRemedy);
}

GgufValueType Parser::value_type(uint32_t raw, const std::string& key,
                                 const std::string& what) const {
  if (raw > static_cast<uint32_t>(GgufValueType::kF64))
    throw_invalid(file_, key,
                  what + " " + to_decimal(raw) + " is not a GGUF value type (0-12)", kGgufRemedy);
  return static_cast<GgufValueType>(raw);
}

GgufValue Parser::parse_value(GgufValueType type, const std::string& key, uint32_t depth) {
  if (++values_ > kMaxGgufValues)
    throw_invalid(file_, key,
                  "the metadata holds more than " + to_decimal(kMaxGgufValues) +
                      " values, more than any real model",
                  kGgufRemedy);
  GgufValue v;
  v.type = type;
  const std::string what = "a " + std::string(gguf_value_type_name(type)) + " value";
  switch (type) {
    case GgufValueType::kU8: v.u = read_le(1, key, what); break;
    case GgufValueType::kU16: v.u = read_le(2, key, what); break;
    case GgufValueType::kU32: v.u = read_le(4, key, what); break;
    case GgufValueType::kU64: v.u = read_le(8, key, what); break;
    case GgufValueType::kI8: v.i = static_cast<int8_t>(read_le(1, key, what)); break;
    case GgufValueType::kI16: v.i = static_cast<int16_t>(read_le(2, key, what)); break;
    case GgufValueType::kI32: v.i = static_cast<int32_t>(read_le(4, key, what)); break;
    case GgufValueType::kI64: v.i = static_cast<int64_t>(read_le(8, key, what)); break;
    case GgufValueType::kF32:
      v.f = std::bit_cast<float>(static_cast<uint32_t>(read_le(4, key, what)));
      break;
    case GgufValueType::kF64: v.f = std::bit_cast<double>(read_le(8, key, what)); break;
    case GgufValueType::kBool: {
      const uint64_t raw = read_le(1, key, what);
      if (raw > 1)
        throw_invalid(file_, key, "bool value is " + to_decimal(raw) + ", expected 0 or 1",
                      kGgufRemedy);
      v.u = raw;
      break;
    }
    case GgufValueType::kString: v.s = str(key, "a string value"); break;
    case GgufValueType::kArray: parse_array(v, key, depth + 1); break;
  }
  return v;
}

void Parser::parse_array(GgufValue& v, const std::string& key, uint32_t depth) {
  if (depth > kMaxGgufArrayDepth)
    throw_invalid(file_, key,
                  "arrays nest more than " + to_decimal(kMaxGgufArrayDepth) + " deep", kGgufRemedy);
  v.elem_type = value_type(u32(key, "the array element type"), key, "array element type");
  const uint64_t n = u64(key, "the array length");
  if (n > kMaxGgufArrayElements)
    throw_invalid(file_, key,
                  "array claims " + to_decimal(n) + " elements, more than the " +
                      to_decimal(kMaxGgufArrayElements) + "-element limit",
                  kGgufRemedy);
  const uint64_t min_bytes = min_value_bytes(v.elem_type);
  if (n > left() / min_bytes)
    throw_invalid(file_, key,
                  "array of " + to_decimal(n) + " " + std::string(gguf_value_type_name(v.elem_type)) +
                      " elements needs at least " + to_decimal(n) + " x " + to_decimal(min_bytes) +
                      " bytes but only " + to_decimal(left()) + " are left: the file is truncated",
                  kGgufRemedy);
  if (n > kMaxGgufValues - std::min(values_, kMaxGgufValues))
    throw_invalid(file_, key,
                  "the metadata holds more than " + to_decimal(kMaxGgufValues) +
                      " values, more than any real model",
                  kGgufRemedy);
  v.array.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) v.array.push_back(parse_value(v.elem_type, key, depth));
}

void Parser::parse_kv(GgufHeader& h, uint64_t index) {
  const std::string where = "metadata key #" + to_decimal(index);
  std::string key = str(where, "the key");
  if (key.empty()) throw_invalid(file_, where, "metadata key is empty", kGgufRemedy);
  size_t bad = 0;
  if (!is_valid_utf8(key, &bad))
    throw_invalid(file_, where,
                  "metadata key is not valid UTF-8 (bad byte at key offset " + to_decimal(bad) + ")",
                  kGgufRemedy);
  const auto type = value_type(u32(key, "the value type"), key, "value type");
  GgufValue v = parse_value(type, key, 0);
  h.kv.emplace_back(std::move(key), std::move(v));
  if (!keys_.insert(h.kv.back().first).second)
    throw_invalid(file_, h.kv.back().first, "metadata key appears twice in the file",
                  kGgufRemedy);
}

void Parser::take_alignment(GgufHeader& h) const {
  for (const auto& [key, v] : h.kv) {
    if (key != "general.alignment") continue;
    if (v.type != GgufValueType::kU32)
      throw_invalid(file_, key,
                    "must be a uint32, found a " + std::string(gguf_value_type_name(v.type)),
                    kGgufRemedy);
    if (v.u == 0 || (v.u & (v.u - 1)) != 0)
      throw_invalid(file_, key,
                    "alignment " + to_decimal(v.u) + " is not a nonzero power of two", kGgufRemedy);
    h.alignment = static_cast<uint32_t>(v.u);
  }
}

void Parser::parse_tensor_info(GgufHeader& h, uint64_t index) {
  const std::string where = "tensor info #" + to_decimal(index);
  GgufTensorInfo t;
  t.name = str(where, "the tensor name");
  if (t.name.empty()) throw_invalid(file_, where, "tensor name is empty", kGgufRemedy);
  size_t bad = 0;
  if (!is_valid_utf8(t.name, &bad))
    throw_invalid(file_, where,
                  "tensor name is not valid UTF-8 (bad byte at name offset " + to_decimal(bad) + ")",
                  kGgufRemedy);
  const std::string& name = t.name;
  const uint32_t n_dims = u32(name, "the dimension count");
  if (n_dims > kMaxGgufDims)
    throw_invalid(file_, name,
                  "tensor has " + to_decimal(n_dims) + " dimensions, more than ggml's " +
                      to_decimal(kMaxGgufDims),
                  kGgufRemedy);
  t.ne.reserve(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) t.ne.push_back(u64(name, "the dimensions"));
  const uint32_t raw_type = u32(name, "the ggml type");
  const GgmlTypeInfo* info = ggml_type_info(raw_type);
  if (info == nullptr)
    throw_invalid(file_, name,
                  "ggml type " + to_decimal(raw_type) + " is not a type ggml defines",
                  "the file is corrupt, or was written by a llama.cpp newer than qloom knows");
  t.type = info->type;
  t.offset = u64(name, "the data offset");
  check_tensor_size(t);
  if (t.offset % h.alignment != 0)
    throw_invalid(file_, name,
                  "data offset " + to_decimal(t.offset) + " is not a multiple of the alignment " +
                      to_decimal(h.alignment),
                  kGgufRemedy);
  h.tensors.push_back(std::move(t));
  if (!names_.insert(h.tensors.back().name).second)
    throw_invalid(file_, h.tensors.back().name, "tensor name appears twice in the file",
                  kGgufRemedy);
}

std::string ne_string(const std::vector<uint64_t>& ne) {
  std::string s = "ne [";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + to_decimal(ne[i]);
  return s + "]";
}

// numel and nbytes, with ggml's rules: each ne < 2^63 (ggml's ne is int64),
// their product too, ne[0] a multiple of the block size.
void Parser::check_tensor_size(GgufTensorInfo& t) const {
  const GgmlTypeInfo& info = ggml_type_info(t.type);
  const bool empty = std::find(t.ne.begin(), t.ne.end(), uint64_t{0}) != t.ne.end();
  uint64_t numel = 1;
  for (uint64_t d : t.ne) {
    if (d > kMaxInt64)
      throw_invalid(file_, t.name, ne_string(t.ne) + ": a dimension of 2^63 or more",
                    kGgufRemedy);
    if (!empty && d != 0 && numel > kMaxInt64 / d)
      throw_invalid(file_, t.name, ne_string(t.ne) + " has 2^63 elements or more", kGgufRemedy);
    numel = empty ? 0 : numel * d;
  }
  const uint64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
  if (ne0 % info.block_elems != 0)
    throw_invalid(file_, t.name,
                  ne_string(t.ne) + ": ne[0] = " + to_decimal(ne0) + " is not a multiple of " +
                      std::string(info.name) + "'s block size " + to_decimal(info.block_elems),
                  kGgufRemedy);
  const uint64_t blocks = numel / info.block_elems;
  if (blocks > std::numeric_limits<uint64_t>::max() / info.block_bytes)
    throw_invalid(file_, t.name,
                  ne_string(t.ne) + " of " + std::string(info.name) + " needs 2^64 bytes or more",
                  kGgufRemedy);
  t.nbytes = blocks * info.block_bytes;
}

void Parser::check_extents(const GgufHeader& h) const {
  std::vector<const GgufTensorInfo*> order;
  order.reserve(h.tensors.size());
  for (const auto& t : h.tensors) {
    if (t.offset > h.data_size || t.nbytes > h.data_size - t.offset)
      throw_invalid(file_, t.name,
                    "data [" + to_decimal(t.offset) + ", +" + to_decimal(t.nbytes) +
                        " bytes) extends past the end of the data section (" +
                        to_decimal(h.data_size) + " bytes): the file is truncated",
                    kGgufRemedy);
    if (t.nbytes > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->name < b->name;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& p = *order[i - 1];
    const GgufTensorInfo& t = *order[i];
    if (t.offset < p.offset + p.nbytes)
      throw_invalid(file_, t.name,
                    "data at offset " + to_decimal(t.offset) + " overlaps tensor " + p.name +
                        " at [" + to_decimal(p.offset) + ", " + to_decimal(p.offset + p.nbytes) + ")",
                    kGgufRemedy);
  }
}

GgufHeader Parser::parse() {
  GgufHeader h;
  parse_preamble(h);
  h.kv.reserve(static_cast<size_t>(kv_count_));
  for (uint64_t i = 0; i < kv_count_; ++i) parse_kv(h, i);
  take_alignment(h);
  if (tensor_count_ > left() / 24)  // re-checked: the KVs used some of the bytes
    throw_invalid(file_, "tensor_count",
                  "tensor count " + to_decimal(tensor_count_) + " cannot fit in the " + to_decimal(left()) +
                      " bytes left after the metadata",
                  kGgufRemedy);
  h.tensors.reserve(static_cast<size_t>(tensor_count_));
  for (uint64_t i = 0; i < tensor_count_; ++i) parse_tensor_info(h, i);
  // The data section starts at the next multiple of the alignment. A file
  // whose tensors hold no bytes may end before it.
  const uint64_t pad = (h.alignment - pos_ % h.alignment) % h.alignment;
  h.data_offset = pos_ + pad;  // pos_ <= size < 2^63, pad < 2^32: no overflow
  h.data_size = h.data_offset <= b_.size() ? b_.size() - h.data_offset : 0;
  check_extents(h);
  return h;
}

}  // namespace

GgufHeader parse_gguf_header(std::span<const std::byte> file_bytes, const std::string& file_label) {
  return Parser(file_bytes, file_label).parse();
}

}  // namespace qloom::io
