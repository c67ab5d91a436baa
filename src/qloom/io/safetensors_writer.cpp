#include "qloom/io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/io/json_read.h"

namespace qloom::io {
namespace fs = std::filesystem;

namespace {

constexpr size_t kBufferBytes = 16u << 20;  // 16 MiB
// Spans at least this large skip the buffer and go to write() directly.
constexpr size_t kDirectWriteBytes = 4u << 20;
// Linux write() moves at most ~2 GiB per call.
constexpr size_t kMaxWriteChunk = 1u << 30;

std::string json_string(std::string_view s) {
  // Names were checked to be valid UTF-8, so dump() cannot throw here.
  return nlohmann::json(std::string(s)).dump(-1, ' ', /*ensure_ascii=*/false);
}

void check_utf8(const std::string& s, const std::string& file, const std::string& item,
                const char* what) {
  size_t bad = 0;
  if (!is_valid_utf8(s, &bad))
    throw Error(ErrorKind::kUsage, file, item,
                std::string(what) + " is not valid UTF-8 (bad byte at offset " +
                    std::to_string(bad) + ")",
                "use UTF-8 names");
}

// The header JSON for tensors [first, last) of `specs` with the given
// data-area offsets, padded with spaces to a multiple of 8 bytes.
std::string build_header(const std::vector<TensorSpec>& specs, const std::vector<uint64_t>& nbytes,
                         size_t first, size_t last,
                         const std::map<std::string, std::string>& metadata) {
  std::string h = "{";
  bool need_comma = false;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool c = false;
    for (const auto& [k, v] : metadata) {
      if (c) h += ',';
      h += json_string(k);
      h += ':';
      h += json_string(v);
      c = true;
    }
    h += '}';
    need_comma = true;
  }
  uint64_t off = 0;
  for (size_t i = first; i < last; ++i) {
    const TensorSpec& s = specs[i];
    if (need_comma) h += ',';
    need_comma = true;
    h += json_string(s.name);
    h += ":{\"dtype\":";
    h += json_string(dtype_info(s.dtype).safetensors_name);
    h += ",\"shape\":[";
    for (size_t d = 0; d < s.shape.size(); ++d) {
      if (d) h += ',';
      h += std::to_string(s.shape[d]);
    }
    h += "],\"data_offsets\":[";
    h += std::to_string(off);
    h += ',';
    off += nbytes[i];
    h += std::to_string(off);
    h += "]}";
  }
  h += '}';
  while (h.size() % 8 != 0) h += ' ';
  return h;
}

std::string header_prefix(const std::string& header) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header;
}

// Validates names, dtypes and sizes; returns each spec's byte count.
std::vector<uint64_t> validate_specs(const std::vector<TensorSpec>& specs, const std::string& where) {
  std::vector<uint64_t> nbytes;
  nbytes.reserve(specs.size());
  std::unordered_set<std::string_view> seen;
  seen.reserve(specs.size());
  for (const auto& s : specs) {
    if (s.name.empty())
      throw Error(ErrorKind::kUsage, where, "", "a tensor has an empty name",
                  "give every tensor a name");
    if (s.name == "__metadata__")
      throw Error(ErrorKind::kUsage, where, s.name,
                  "\"__metadata__\" is reserved in safetensors headers", "rename the tensor");
    check_utf8(s.name, where, s.name, "tensor name");
    if (!seen.insert(s.name).second)
      throw Error(ErrorKind::kUsage, where, s.name, "tensor name appears twice in the write list",
                  "write each tensor once");
    if (dtype_info(s.dtype).safetensors_name.empty())
      throw Error(ErrorKind::kUnsupported, where, s.name,
                  "dtype " + std::string(dtype_name(s.dtype)) +
                      " has no safetensors name",
                  "pack 4-bit integer codes into I32/U8 before writing");
    nbytes.push_back(s.nbytes());
  }
  return nbytes;
}

}  // namespace

// ---------------------------------------------------------------------------

uint64_t TensorSpec::numel() const {
  uint64_t n = 1;
  const bool has_zero = std::find(shape.begin(), shape.end(), uint64_t{0}) != shape.end();
  if (has_zero) return 0;
  for (uint64_t d : shape) {
    if (n > std::numeric_limits<uint64_t>::max() / d)
      throw Error(ErrorKind::kUsage, "", name, "shape has more than 2^64 elements",
                  "check the tensor's shape");
    n *= d;
  }
  return n;
}

uint64_t TensorSpec::nbytes() const {
  const auto b = dtype_storage_bytes(dtype, numel());
  if (!b)
    throw Error(ErrorKind::kUsage, "", name,
                "a " + std::string(dtype_name(dtype)) + " tensor with " + std::to_string(numel()) +
                    " elements is not a whole number of bytes (or overflows)",
                "pad sub-byte tensors to a whole number of bytes");
  return *b;
}

// ---------------------------------------------------------------------------

struct SafetensorsWriter::Impl {
  struct Shard {
    std::string file;
    size_t first = 0, last = 0;  // spec range
    uint64_t data_bytes = 0;
  };

  fs::path dir;
  WriterOptions opts;
  std::vector<TensorSpec> specs;
  std::vector<uint64_t> nbytes;
  std::vector<size_t> shard_of;
  std::vector<Shard> shards;
  std::vector<std::string> shard_names, files;
  uint64_t total = 0;

  // Progress.
  size_t next = 0;           // next spec to begin
  bool open_tensor = false;  // between begin() and end()
  uint64_t written = 0;      // bytes of the open tensor so far
  size_t cur_shard = SIZE_MAX;
  int fd = -1;
  fs::path cur_path;
  std::vector<std::byte> buf;
  size_t used = 0;
  bool failed = false;
  bool finished = false;

  ~Impl() { close_quietly(); }

  std::string next_name() const { return next < specs.size() ? specs[next].name : std::string(); }

  void close_quietly() noexcept {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  [[noreturn]] void io_fail(int err, const char* what) {
    failed = true;
    close_quietly();
    throw_errno(err, cur_path.string(), what, /*writing=*/true);
  }

  void write_all(const std::byte* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, std::min(n, kMaxWriteChunk));
      if (w < 0) {
        if (errno == EINTR) continue;
        io_fail(errno, "write");
      }
      if (w == 0) io_fail(EIO, "write");
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  void flush() {
    if (used > 0) write_all(buf.data(), used);
    used = 0;
  }

  void put(const std::byte* p, size_t n) {
    if (n >= kDirectWriteBytes) {
      flush();
      write_all(p, n);
      return;
    }
    if (buf.empty()) buf.resize(kBufferBytes);
    while (n > 0) {
      if (used == buf.size()) flush();
      const size_t k = std::min(n, buf.size() - used);
      std::memcpy(buf.data() + used, p, k);
      used += k;
      p += k;
      n -= k;
    }
  }

  void close_shard() {
    if (fd < 0) return;
    flush();
    const int rc = ::close(fd);
    fd = -1;
    if (rc != 0 && errno != EINTR) {
      failed = true;
      throw_errno(errno, cur_path.string(), "close", true);
    }
  }

  void open_shard(size_t s) {
    close_shard();
    cur_shard = s;
    cur_path = dir / shards[s].file;
    do {
      fd = ::open(cur_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      failed = true;
      throw_errno(errno, cur_path.string(), "creating the file", true);
    }
    const std::string head =
        header_prefix(build_header(specs, nbytes, shards[s].first, shards[s].last, opts.metadata));
    // Reserve the whole file now so a full disk fails early, not after
    // gigabytes; filesystems that cannot preallocate are fine as they are.
    const uint64_t total_size = head.size() + shards[s].data_bytes;
    if (total_size > 0 && ::fallocate(fd, 0, 0, static_cast<off_t>(total_size)) != 0) {
      if (errno == ENOSPC || errno == EDQUOT) io_fail(errno, "reserving disk space");
    }
    put(reinterpret_cast<const std::byte*>(head.data()), head.size());
  }

  void check_usable(const char* op) const {
    if (finished)
      throw Error(ErrorKind::kUsage, dir.string(), "",
                  std::string(op) + "() called after finish()");
    if (failed)
      throw Error(ErrorKind::kUsage, dir.string(), "",
                  std::string(op) + "() called after an earlier write failed");
  }
};

SafetensorsWriter::SafetensorsWriter(fs::path dir, std::vector<TensorSpec> specs,
                                     WriterOptions opts)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dir = std::move(dir);
  m.opts = std::move(opts);
  m.specs = std::move(specs);
  const std::string where = m.dir.string();
  if (m.opts.base_name.empty() || m.opts.base_name.find('/') != std::string::npos)
    throw Error(ErrorKind::kUsage, where, "base_name",
                "base name \"" + m.opts.base_name + "\" must be a non-empty file name",
                "use e.g. \"model\"");
  for (const auto& [k, v] : m.opts.metadata) {
    check_utf8(k, where, "__metadata__", "metadata key");
    check_utf8(v, where, "__metadata__", "metadata value");
  }
  m.nbytes = validate_specs(m.specs, where);

  // Shard assignment in write order.
  m.shard_of.resize(m.specs.size());
  m.shards.push_back({});
  for (size_t i = 0; i < m.specs.size(); ++i) {
    Impl::Shard* cur = &m.shards.back();
    const bool nonempty = cur->last > cur->first;
    if (nonempty && (cur->data_bytes > m.opts.max_shard_bytes ||
                     m.nbytes[i] > m.opts.max_shard_bytes - cur->data_bytes)) {
      m.shards.push_back({});
      cur = &m.shards.back();
      cur->first = cur->last = i;
    }
    cur->last = i + 1;
    cur->data_bytes += m.nbytes[i];
    m.shard_of[i] = m.shards.size() - 1;
    m.total += m.nbytes[i];
  }
  const size_t n = m.shards.size();
  for (size_t s = 0; s < n; ++s) {
    if (n == 1) {
      m.shards[s].file = m.opts.base_name + ".safetensors";
    } else {
      char num[64];
      std::snprintf(num, sizeof num, "-%05zu-of-%05zu.safetensors", s + 1, n);
      m.shards[s].file = m.opts.base_name + num;
    }
    m.shard_names.push_back(m.shards[s].file);
  }
  m.files = m.shard_names;
  if (n > 1) m.files.push_back(m.opts.base_name + ".safetensors.index.json");
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&&) noexcept = default;
SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&&) noexcept = default;
SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::begin(std::string_view name) {
  Impl& m = *impl_;
  m.check_usable("begin");
  if (m.open_tensor)
    throw Error(ErrorKind::kUsage, m.dir.string(), m.specs[m.next].name,
                "begin(\"" + std::string(name) + "\") while this tensor is still open",
                "call end() first");
  if (m.next >= m.specs.size())
    throw Error(ErrorKind::kUsage, m.dir.string(), std::string(name),
                "every tensor in the write list was already written",
                "list the tensor when constructing the writer");
  if (m.specs[m.next].name != name)
    throw Error(ErrorKind::kUsage, m.dir.string(), std::string(name),
                "tensors must be written in the order given: expected \"" +
                    m.specs[m.next].name + "\" next",
                "write tensors in spec order");
  if (m.shard_of[m.next] != m.cur_shard) m.open_shard(m.shard_of[m.next]);
  m.open_tensor = true;
  m.written = 0;
}

void SafetensorsWriter::append(std::span<const std::byte> bytes) {
  Impl& m = *impl_;
  m.check_usable("append");
  if (!m.open_tensor)
    throw Error(ErrorKind::kUsage, m.dir.string(), m.next_name(), "append() without begin()",
                "call begin(name) first");
  const uint64_t need = m.nbytes[m.next];
  if (bytes.size() > need - m.written)
    throw Error(ErrorKind::kUsage, m.dir.string(), m.specs[m.next].name,
                "received " + std::to_string(m.written + bytes.size()) +
                    " bytes, more than the " + std::to_string(need) +
                    " its dtype and shape need",
                "pass exactly nbytes() bytes per tensor");
  m.put(bytes.data(), bytes.size());
  m.written += bytes.size();
}

void SafetensorsWriter::end() {
  Impl& m = *impl_;
  m.check_usable("end");
  if (!m.open_tensor)
    throw Error(ErrorKind::kUsage, m.dir.string(), m.next_name(), "end() without begin()",
                "call begin(name) first");
  const uint64_t need = m.nbytes[m.next];
  if (m.written != need)
    throw Error(ErrorKind::kUsage, m.dir.string(), m.specs[m.next].name,
                "received " + std::to_string(m.written) + " bytes, expected " +
                    std::to_string(need),
                "pass exactly nbytes() bytes per tensor");
  m.open_tensor = false;
  ++m.next;
}

void SafetensorsWriter::write(std::string_view name, std::span<const std::byte> bytes) {
  Impl& m = *impl_;
  m.check_usable("write");
  if (!m.open_tensor && m.next < m.specs.size() && m.specs[m.next].name == name &&
      bytes.size() != m.nbytes[m.next])
    throw Error(ErrorKind::kUsage, m.dir.string(), std::string(name),
                "got " + std::to_string(bytes.size()) + " bytes, expected " +
                    std::to_string(m.nbytes[m.next]) + " for its dtype and shape",
                "pass exactly nbytes() bytes per tensor");
  begin(name);
  append(bytes);
  end();
}

void SafetensorsWriter::finish() {
  Impl& m = *impl_;
  m.check_usable("finish");
  if (m.open_tensor)
    throw Error(ErrorKind::kUsage, m.dir.string(), m.specs[m.next].name,
                "finish() while this tensor is still open", "call end() first");
  if (m.next < m.specs.size())
    throw Error(ErrorKind::kUsage, m.dir.string(), m.specs[m.next].name,
                "finish() before this tensor" +
                    (m.specs.size() - m.next > 1
                         ? " and " + std::to_string(m.specs.size() - m.next - 1) + " more"
                         : std::string()) +
                    " was written",
                "write every tensor listed at construction");
  if (m.cur_shard == SIZE_MAX) m.open_shard(0);  // no tensors: header-only file
  m.close_shard();

  if (m.shards.size() > 1) {
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < m.specs.size(); ++i)
      weight_map[m.specs[i].name] = m.shards[m.shard_of[i]].file;
    nlohmann::json index = {{"metadata", {{"total_size", m.total}}},
                            {"weight_map", std::move(weight_map)}};
    // Like transformers: json.dumps(index, indent=2, sort_keys=True) + "\n",
    // whose default ensure_ascii escapes non-ASCII as \uXXXX.
    const std::string text = index.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
    m.cur_path = m.dir / m.files.back();
    do {
      m.fd = ::open(m.cur_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    } while (m.fd < 0 && errno == EINTR);
    if (m.fd < 0) m.io_fail(errno, "creating the file");
    m.write_all(reinterpret_cast<const std::byte*>(text.data()), text.size());
    m.close_shard();
  }
  m.finished = true;
}

const std::vector<std::string>& SafetensorsWriter::files() const { return impl_->files; }
const std::vector<std::string>& SafetensorsWriter::shard_files() const {
  return impl_->shard_names;
}
size_t SafetensorsWriter::num_shards() const { return impl_->shards.size(); }
size_t SafetensorsWriter::shard_of_spec(size_t i) const { return impl_->shard_of.at(i); }
uint64_t SafetensorsWriter::total_bytes() const { return impl_->total; }
std::string SafetensorsWriter::next_tensor() const { return impl_->next_name(); }
const fs::path& SafetensorsWriter::dir() const { return impl_->dir; }

// ---------------------------------------------------------------------------

void write_safetensors_file(
    const fs::path& file,
    const std::vector<std::pair<TensorSpec, std::span<const std::byte>>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const auto& [spec, bytes] : tensors) specs.push_back(spec);
  const std::string label = file.string();
  for (const auto& [k, v] : metadata) {
    check_utf8(k, label, "__metadata__", "metadata key");
    check_utf8(v, label, "__metadata__", "metadata value");
  }
  const std::vector<uint64_t> nbytes = validate_specs(specs, label);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].second.size() != nbytes[i])
      throw Error(ErrorKind::kUsage, label, specs[i].name,
                  "got " + std::to_string(tensors[i].second.size()) + " bytes, expected " +
                      std::to_string(nbytes[i]) + " for its dtype and shape",
                  "pass exactly nbytes() bytes per tensor");
  const std::string head = header_prefix(build_header(specs, nbytes, 0, specs.size(), metadata));

  int fd;
  do {
    fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_errno(errno, label, "creating the file", true);
  auto write_all = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, std::min(n, kMaxWriteChunk));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const int err = w < 0 ? errno : EIO;
        ::close(fd);
        throw_errno(err, label, "write", true);
      }
      c += w;
      n -= static_cast<size_t>(w);
    }
  };
  write_all(head.data(), head.size());
  for (const auto& [spec, bytes] : tensors) write_all(bytes.data(), bytes.size());
  if (::close(fd) != 0 && errno != EINTR) throw_errno(errno, label, "close", true);
}

}  // namespace qloom::io
