// ModelRotation's arithmetic (the steps rotation.cpp planned) and the
// writing of a rotated model directory.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <system_error>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/core/thread_pool.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/io/text_file.h"
#include "qloom/quant/hadamard.h"
#include "qloom/quant/rotation.h"

namespace qloom::quant {
namespace {

namespace fs = std::filesystem;

// torch's float64 -> dtype: through float32, then round to nearest even.
double round_to(DType dt, double v) {
  const float f = static_cast<float>(v);
  switch (dt) {
    case DType::kBF16: return bf16_to_float(float_to_bf16(f));
    case DType::kF16: return f16_to_float(float_to_f16(f));
    case DType::kF32: return f;
    default: throw Error(ErrorKind::kUnsupported, "", "rotation", "rotation handles F32, BF16 and F16 tensors only", "");
  }
}

std::vector<double> load_f64(const io::TensorView& v) {
  std::vector<float> f(v.numel());
  to_f32(v.dtype(), v.data.data(), f.data(), f.size());
  return std::vector<double>(f.begin(), f.end());
}

// The tensor as rows x cols (a 1-D tensor is one row).
void dims(const io::TensorView& v, int64_t& rows, int64_t& cols) {
  const auto& s = v.shape();
  if (s.size() == 1) rows = 1, cols = static_cast<int64_t>(s[0]);
  else if (s.size() == 2) rows = static_cast<int64_t>(s[0]), cols = static_cast<int64_t>(s[1]);
  else throw Error(ErrorKind::kUnsupported, "", v.name(), "rotation expects 1-D or 2-D tensors", "");
}

void check_divides(int64_t size, int64_t dim, const std::string& tensor) {
  if (size <= 0 || dim % size != 0)
    throw Error(ErrorKind::kInvalidInput, "", tensor,
                "the rotation size " + std::to_string(size) + " does not divide the dimension " + std::to_string(dim),
                "choose a rotation_size dividing the model's dimensions");
}

// Rotates each row's channels in blocks of `size`: x <- x R (row-local).
void rotate_in(std::vector<double>& w, int64_t rows, int64_t cols, int64_t size, ThreadPool& pool,
               const std::string& tensor) {
  check_divides(size, cols, tensor);
  pool.parallel_for(rows, [&](int64_t b, int64_t e) { rotate_rows(w.data() + b * cols, (e - b) * cols / size, size); },
                    16);
}

// Rotates the output channels (the rows' index) in blocks of `size`:
// W <- R^T W, i.e. every column c <- c R; columns in chunks, transposed.
void rotate_out(std::vector<double>& w, int64_t rows, int64_t cols, int64_t size, ThreadPool& pool,
                const std::string& tensor) {
  check_divides(size, rows, tensor);
  constexpr int64_t kChunk = 32;
  const int64_t chunks = (cols + kChunk - 1) / kChunk;
  pool.parallel_for(chunks, [&](int64_t b, int64_t e) {
    std::vector<double> buf(static_cast<size_t>(kChunk * rows));
    for (int64_t ch = b; ch < e; ++ch) {
      const int64_t c0 = ch * kChunk, n = std::min(kChunk, cols - c0);
      for (int64_t c = 0; c < n; ++c)
        for (int64_t r = 0; r < rows; ++r) buf[static_cast<size_t>(c * rows + r)] = w[static_cast<size_t>(r * cols + c0 + c)];
      rotate_rows(buf.data(), n * rows / size, size);
      for (int64_t c = 0; c < n; ++c)
        for (int64_t r = 0; r < rows; ++r) w[static_cast<size_t>(r * cols + c0 + c)] = buf[static_cast<size_t>(c * rows + r)];
    }
  });
}

}  // namespace

namespace {

bool row_local(const std::vector<RotationOp>& ops) {
  for (const RotationOp& op : ops)
    if (op.kind == RotationOp::kRotateOut) return false;
  return true;
}

// Applies `ops` to w (rows x cols, in place), rounding to `dt` after each.
// `norms`: the scale columns' norms (by tensor name), as double.
void apply_ops(const std::vector<RotationOp>& ops, std::vector<double>& w, int64_t rows, int64_t cols, bool vector,
               DType dt, const std::map<std::string, std::vector<double>>& norms, ThreadPool& pool,
               const std::string& name) {
  for (const RotationOp& op : ops) {
    switch (op.kind) {
      case RotationOp::kOnes: std::fill(w.begin(), w.end(), 1.0); break;
      case RotationOp::kScaleColumns: {
        const std::vector<double>& g = norms.at(op.norm);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(r * cols + c)] *= g[static_cast<size_t>(c)];
        break;
      }
      case RotationOp::kRotateIn: rotate_in(w, rows, cols, op.size, pool, name); break;
      case RotationOp::kRotateOut:
        if (vector) rotate_in(w, 1, cols, op.size, pool, name);  // a bias: b <- b R
        else rotate_out(w, rows, cols, op.size, pool, name);
        break;
    }
    for (double& x : w) x = round_to(dt, x);
  }
}

}  // namespace

engine::HostTensor ModelRotation::tensor(const std::string& name, unsigned threads) const {
  const io::WeightIndex& wi = src_.weights();
  const io::TensorView v = wi.view(source_of(name));
  engine::HostTensor out;
  out.dtype = v.dtype();
  out.shape.assign(v.shape().begin(), v.shape().end());
  out.bytes.resize(v.nbytes());
  const auto it = ops_.find(name);
  if (it == ops_.end()) {
    std::memcpy(out.bytes.data(), v.data.data(), v.nbytes());
    return out;
  }
  int64_t rows = 0, cols = 0;
  dims(v, rows, cols);
  std::map<std::string, std::vector<double>> norms;
  for (const RotationOp& op : it->second) {
    if (op.kind != RotationOp::kScaleColumns || norms.count(op.norm)) continue;
    const io::TensorView nv = wi.view(op.norm);
    if (nv.numel() != static_cast<uint64_t>(cols))
      throw Error(ErrorKind::kInvalidInput, "", name,
                  "has " + std::to_string(cols) + " input channels, its norm " + op.norm + " " +
                      std::to_string(nv.numel()),
                  "check scaling_layers");
    norms[op.norm] = load_f64(nv);
  }
  const bool vector = v.shape().size() == 1;
  ThreadPool pool(threads);
  if (!row_local(it->second)) {  // column steps: the whole tensor at once
    std::vector<double> w = load_f64(v);
    apply_ops(it->second, w, rows, cols, vector, out.dtype, norms, pool, name);
    std::vector<float> f(w.begin(), w.end());
    from_f32(out.dtype, f.data(), out.bytes.data(), f.size());
    return out;
  }
  // Row-local steps (norm folding, input rotation): blocks of rows, so an
  // embedding never needs a double copy of itself. Rows are independent, so
  // the blocking does not change a bit.
  const size_t elem = v.nbytes() / v.numel();
  constexpr int64_t kRows = 256;
  const int64_t blocks = (rows + kRows - 1) / kRows;
  pool.parallel_for(blocks, [&](int64_t b, int64_t e) {
    ThreadPool inline_pool(1);
    std::vector<float> f;
    std::vector<double> w;
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t r0 = blk * kRows, n = std::min(kRows, rows - r0);
      const size_t count = static_cast<size_t>(n * cols), offset = static_cast<size_t>(r0 * cols) * elem;
      f.resize(count);
      to_f32(v.dtype(), v.data.data() + offset, f.data(), count);
      w.assign(f.begin(), f.end());
      apply_ops(it->second, w, n, cols, vector, out.dtype, norms, inline_pool, name);
      f.assign(w.begin(), w.end());
      from_f32(out.dtype, f.data(), out.bytes.data() + offset, count);
    }
  });
  return out;
}

void write_rotated_model(const ModelRotation& rotation, const fs::path& out, unsigned threads) {
  std::error_code ec;
  if (fs::exists(out, ec))
    throw Error(ErrorKind::kUsage, out.string(), "rotation", "the rotated model's directory exists already", "");
  fs::create_directories(out, ec);
  if (ec) throw Error(ErrorKind::kIo, out.string(), "rotation", "cannot create the directory: " + ec.message(), "");
  std::vector<io::TensorSpec> specs;
  for (const auto& name : rotation.tensor_names()) {
    const io::TensorInfo* info = rotation.source().weights().find(rotation.source_of(name));
    specs.push_back({name, info->dtype, info->shape});
  }
  io::SafetensorsWriter writer(out, specs);
  for (const auto& s : specs) {
    const engine::HostTensor t = rotation.tensor(s.name, threads);
    writer.write(s.name, std::span<const std::byte>(reinterpret_cast<const std::byte*>(t.bytes.data()), t.bytes.size()));
  }
  writer.finish();
  const fs::path src = rotation.source().path();
  for (const fs::path& f : rotation.source().aux_files()) {
    fs::create_directories((out / f).parent_path(), ec);
    fs::copy_file(src / f, out / f, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error(ErrorKind::kIo, (out / f).string(), "rotation", "cannot copy an auxiliary file: " + ec.message(), "");
  }
}

ScratchDir::ScratchDir(const std::string& prefix, fs::path parent) {
  static std::atomic<uint64_t> counter{0};
  if (parent.empty()) parent = fs::temp_directory_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    fs::path p = parent / (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    if (fs::create_directory(p, ec)) {
      path_ = p;
      return;
    }
  }
  throw Error(ErrorKind::kIo, parent.string(), "scratch directory", "cannot create a scratch directory: " + ec.message(),
              "check that TMPDIR is writable");
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

}  // namespace qloom::quant
