#include "qloom/io/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <system_error>

#include "qloom/core/error.h"
#include "qloom/io/atomic_dir.h"
#include "qloom/io/staging_cleanup.h"

namespace qloom::io {
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kVersion = 3;
std::atomic<unsigned> g_writer_counter{0};

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

[[noreturn]] void usage(const std::string& item, const std::string& what) {
  throw Error(ErrorKind::kUsage, "", item, what, "fix the caller of io::GgufWriter");
}

// Little-endian serialization into a byte string (the header is built whole,
// then written; tensor data goes straight to the file).
struct Bytes {
  std::string b;
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
  }
  void str(std::string_view s) {
    le(s.size(), 8);
    b.append(s);
  }
};

int scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
    case GgufValueType::kU16: case GgufValueType::kI16: return 2;
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
    case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kF64: return 8;
    default: return 0;
  }
}

bool is_signed(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 || t == GgufValueType::kI64;
}

void put_value(Bytes& out, const GgufValue& v, const std::string& key) {
  if (v.type == GgufValueType::kString) return out.str(v.s);
  if (v.type == GgufValueType::kArray) {
    out.le(static_cast<uint32_t>(v.elem_type), 4);
    out.le(v.array.size(), 8);
    for (const GgufValue& e : v.array) {
      if (e.type != v.elem_type) usage(key, "array element of another type than the array's");
      put_value(out, e, key);
    }
    return;
  }
  const int n = scalar_bytes(v.type);
  if (n == 0) usage(key, "unknown GGUF value type " + std::to_string(static_cast<uint32_t>(v.type)));
  if (v.type == GgufValueType::kF32) {
    const float f = static_cast<float>(v.f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return out.le(u, 4);
  }
  if (v.type == GgufValueType::kF64) {
    uint64_t u;
    std::memcpy(&u, &v.f, 8);
    return out.le(u, 8);
  }
  out.le(is_signed(v.type) ? static_cast<uint64_t>(v.i) : v.u, n);
}

}  // namespace

GgufValue gguf_scalar(GgufValueType type, uint64_t u, int64_t i, double f) {
  GgufValue v;
  v.type = type;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}
GgufValue gguf_u32(uint32_t v) { return gguf_scalar(GgufValueType::kU32, v, 0, 0); }
GgufValue gguf_i32(int32_t v) { return gguf_scalar(GgufValueType::kI32, 0, v, 0); }
GgufValue gguf_u64(uint64_t v) { return gguf_scalar(GgufValueType::kU64, v, 0, 0); }
GgufValue gguf_f32(float v) { return gguf_scalar(GgufValueType::kF32, 0, 0, v); }
GgufValue gguf_bool(bool v) { return gguf_scalar(GgufValueType::kBool, v ? 1 : 0, 0, 0); }
GgufValue gguf_string(std::string s) {
  GgufValue v;
  v.type = GgufValueType::kString;
  v.s = std::move(s);
  return v;
}

GgufValue gguf_array(GgufValueType elem_type, std::vector<GgufValue> items) {
  for (const GgufValue& e : items)
    if (e.type != elem_type) usage("", "gguf_array: an element's type differs from the array's element type");
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.elem_type = elem_type;
  v.array = std::move(items);
  return v;
}
GgufValue gguf_string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(gguf_string(s));
  return gguf_array(GgufValueType::kString, std::move(v));
}
GgufValue gguf_i32_array(const std::vector<int32_t>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(gguf_i32(x));
  return gguf_array(GgufValueType::kI32, std::move(v));
}
GgufValue gguf_f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(gguf_f32(x));
  return gguf_array(GgufValueType::kF32, std::move(v));
}

uint64_t gguf_tensor_nbytes(GgmlType type, const std::vector<uint64_t>& ne, std::string_view name) {
  const GgmlTypeInfo& t = ggml_type_info(type);
  if (ne.empty() || ne.size() > kMaxGgufDims) usage(std::string(name), "a GGUF tensor has 1 to 4 dimensions");
  if (ne[0] % t.block_elems != 0)
    usage(std::string(name), "ne[0] = " + std::to_string(ne[0]) + " is not a multiple of " + std::string(t.name) +
                                 "'s block of " + std::to_string(t.block_elems));
  uint64_t n = 1;
  for (uint64_t d : ne) {
    if (d != 0 && n > (1ULL << 62) / d) usage(std::string(name), "tensor too large");
    n *= d;
  }
  return n / t.block_elems * t.block_bytes;
}

struct GgufWriter::Impl {
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t nbytes = 0, offset = 0;
  };
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::set<std::string, std::less<>> keys, names;
  std::vector<Tensor> tensors;
  uint32_t alignment = kGgufDefaultAlignment;
  fs::path target, staging_dir, staging_file;
  bool overwrite = false;
  std::FILE* f = nullptr;
  int slot = -1;
  size_t next = 0;
  uint64_t written = 0;
  bool committed = false;

  void write(const void* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f) != n) throw_errno(errno, target.string(), "writing the GGUF file", true);
    written += n;
  }
  void pad() {
    static const char zeros[64] = {};
    uint64_t r = (alignment - written % alignment) % alignment;
    while (r > 0) {
      const size_t k = std::min<uint64_t>(r, sizeof zeros);
      write(zeros, k);
      r -= k;
    }
  }
  void discard() noexcept {
    if (f) std::fclose(f), f = nullptr;
    if (!staging_dir.empty()) {
      std::error_code ec;
      fs::remove_all(staging_dir, ec);
      staging_dir.clear();
    }
    if (slot >= 0) unregister_staging_dir(slot), slot = -1;
  }
  void open_staging();
};

void GgufWriter::Impl::open_staging() {
  const fs::path parent = target.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw_errno(ec.value(), parent.string(), "creating the output directory", true);
  sweep_stale_partials(parent);
  for (int attempt = 0;; ++attempt) {
    std::string name = ".";
    name += target.filename().string();
    name += ".qloom-partial-";
    name += std::to_string(static_cast<long>(::getpid()));
    name += '-';
    name += std::to_string(g_writer_counter++ + 1000000u);
    staging_dir = parent / name;
    if (fs::create_directory(staging_dir, ec)) break;
    if (ec || attempt > 100) throw_errno(ec ? ec.value() : EEXIST, staging_dir.string(), "creating a staging directory", true);
  }
  slot = register_staging_dir(staging_dir);
  staging_file = staging_dir / target.filename();
  f = std::fopen(staging_file.c_str(), "wb");
  if (!f) throw_errno(errno, staging_file.string(), "creating the GGUF staging file", true);
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
}

GgufWriter::GgufWriter() : impl_(std::make_unique<Impl>()) {}
GgufWriter::~GgufWriter() {
  if (!impl_->committed) impl_->discard();
}

void GgufWriter::add(std::string key, GgufValue value) {
  if (impl_->f) usage(key, "metadata added after begin()");
  if (key.empty() || !valid_utf8(key)) usage(key, "a metadata key must be non-empty valid UTF-8");
  if (!impl_->keys.insert(key).second) usage(key, "duplicate metadata key");
  if (key == "general.alignment") {
    const uint32_t a = static_cast<uint32_t>(value.u);
    if (value.type != GgufValueType::kU32 || a == 0 || (a & (a - 1)) != 0)
      usage(key, "general.alignment must be a u32 power of two");
    impl_->alignment = a;
  }
  impl_->kv.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne) {
  if (impl_->f) usage(name, "tensor declared after begin()");
  if (name.empty() || !valid_utf8(name)) usage(name, "a tensor name must be non-empty valid UTF-8");
  if (!impl_->names.insert(name).second) usage(name, "duplicate tensor name");
  Impl::Tensor t{std::move(name), type, std::move(ne)};
  t.nbytes = gguf_tensor_nbytes(type, t.ne, t.name);
  impl_->tensors.push_back(std::move(t));
}

void GgufWriter::begin(const fs::path& out_file, bool overwrite) {
  Impl& m = *impl_;
  if (m.f || m.committed) usage(out_file.string(), "begin() called twice");
  m.target = fs::absolute(out_file).lexically_normal();
  m.overwrite = overwrite;
  if (m.target.filename().empty()) usage(out_file.string(), "the output file has no name");
  if (fs::exists(m.target) && (!overwrite || fs::is_directory(m.target)))
    throw Error(ErrorKind::kUsage, m.target.string(), "", fs::is_directory(m.target) ? "is a directory" : "already exists",
                "choose another output file or allow overwriting");
  uint64_t offset = 0;
  for (auto& t : m.tensors) {
    t.offset = offset;
    offset += (t.nbytes + m.alignment - 1) / m.alignment * m.alignment;
  }
  Bytes h;
  h.b = "GGUF";
  h.le(kVersion, 4);
  h.le(m.tensors.size(), 8);
  h.le(m.kv.size(), 8);
  for (const auto& [k, v] : m.kv) {
    h.str(k);
    h.le(static_cast<uint32_t>(v.type), 4);
    put_value(h, v, k);
  }
  for (const auto& t : m.tensors) {
    h.str(t.name);
    h.le(t.ne.size(), 4);
    for (uint64_t d : t.ne) h.le(d, 8);
    h.le(static_cast<uint32_t>(t.type), 4);
    h.le(t.offset, 8);
  }
  m.open_staging();
  m.write(h.b.data(), h.b.size());
  m.pad();
}

void GgufWriter::write_tensor(std::span<const std::byte> bytes) {
  Impl& m = *impl_;
  if (!m.f) usage("", "write_tensor() before begin()");
  if (m.next >= m.tensors.size()) usage("", "more tensors written than declared");
  const auto& t = m.tensors[m.next];
  if (bytes.size() != t.nbytes)
    usage(t.name, "has " + std::to_string(bytes.size()) + " bytes, its type and shape need " + std::to_string(t.nbytes));
  m.write(bytes.data(), bytes.size());
  m.pad();
  ++m.next;
}

void GgufWriter::commit() {
  Impl& m = *impl_;
  if (!m.f) usage("", "commit() before begin()");
  if (m.next != m.tensors.size())
    usage(m.tensors[m.next].name, "commit() before every declared tensor was written");
  if (std::fflush(m.f) != 0) throw_errno(errno, m.target.string(), "flushing the GGUF file", true);
  if (::fsync(::fileno(m.f)) != 0) throw_errno(errno, m.target.string(), "fsync of the GGUF file", true);
  const int rc = std::fclose(m.f);
  m.f = nullptr;
  if (rc != 0) throw_errno(errno, m.target.string(), "closing the GGUF file", true);
  if (!m.overwrite && fs::exists(m.target))
    throw Error(ErrorKind::kUsage, m.target.string(), "", "appeared while it was being written", "choose another output file");
  if (::rename(m.staging_file.c_str(), m.target.c_str()) != 0)
    throw_errno(errno, m.target.string(), "renaming the finished GGUF into place", true);
  fsync_path(m.target.parent_path());
  m.committed = true;
  m.discard();
}

uint32_t GgufWriter::alignment() const { return impl_->alignment; }
uint64_t GgufWriter::tensors_declared() const { return impl_->tensors.size(); }
uint64_t GgufWriter::bytes_written() const { return impl_->written; }

}  // namespace qloom::io
