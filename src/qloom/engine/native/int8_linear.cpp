// Native int8 x int8 linear (W8A8): int8 weights (per-tensor or per-channel
// scales) with int8 activations, static per tensor (the checkpoint's
// input_scale) or dynamic per token.
//
// run(x, rows):
//  1. Quantize every row once (parallel over blocks of 8 rows) into the
//     calling thread's scratch, in the layout of int8_kernels.h, with
//     exactly simulate's codes and scales (int8_act_quant.h).
//  2. Tiles of 8 rows x 48 outputs (int8_kernels.h), parallel over output
//     panels: decode (one row) splits its outputs over every thread too.
//     VNNI walks k in chunks of kKChunkQuads so a panel's chunk of W stays
//     in L1 while all row blocks pass over it.
//     Per output: y = ((float)Σ_k q_x q_w · s_x[row]) · s_w[o] (+ bias[o]),
//     integer sums exact, the three float operations in that order: so run()
//     and run_ref() agree bit for bit on every ISA and thread count.
//  3. Non-finite activations, as simulate treats them:
//     static: a row holding a NaN gives NaN in all its outputs (simulate
//       leaves the NaN in x); ±inf quantize to 127 / -128 (the clamp).
//     dynamic: simulate quantizes nothing in a call whose x holds any NaN or
//       inf, so the whole call computes x · dequantize(W) in double from the
//       bias, rounded once to float: linear_ref()'s arithmetic, bit for bit
//       (slow; only for blown-up activations).
// The int32 sums cannot overflow: in <= kInt8MaxIn (int8_kernels.h).
#include "qloom/engine/native/int8_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/native/int8_act_quant.h"
#include "qloom/engine/native/int8_kernels.h"

namespace qloom::engine::native {
namespace {

// Work below which a call stays on the calling thread: multiply-adds for the
// tiles, activation elements for the quantization.
constexpr int64_t kMinParallelMacs = int64_t{1} << 17;
constexpr int64_t kMinParallelQuant = int64_t{1} << 15;
// VNNI k chunks: at most 160 quads (640 k: 30 KiB of a 48-output panel; L1
// is 32-48 KiB), as equal as possible (no short last chunk).
constexpr int64_t kKChunkQuads = 160;

constexpr uint8_t kRowNan = 1;        // the row holds a NaN
constexpr uint8_t kRowNonFinite = 2;  // the row holds a NaN or an inf

enum class Kernel { kScalar, kAvx2, kVnni };

struct alignas(64) Line {
  int8_t b[64];
};

// The calling thread's per-call activation codes ([rows, kq · 4]), scales
// and row flags (grow-only: no allocation once warm). Workers write distinct
// rows of it.
struct ActScratch {
  std::vector<uint8_t> codes;
  std::vector<float> sx;
  std::vector<uint8_t> flags;
};

ActScratch& act_scratch(int64_t rows, int64_t kq) {
  thread_local ActScratch s;
  const size_t bytes = static_cast<size_t>(rows * kq * 4);
  if (s.codes.size() < bytes) s.codes.resize(bytes);
  if (s.sx.size() < static_cast<size_t>(rows)) {
    s.sx.resize(static_cast<size_t>(rows));
    s.flags.resize(static_cast<size_t>(rows));
  }
  return s;
}

// One row of W's codes, per thread.
int8_t* row_codes(int64_t bytes) {
  thread_local std::vector<int8_t> buf;
  if (buf.size() < static_cast<size_t>(bytes)) buf.resize(static_cast<size_t>(bytes));
  return buf.data();
}

// VNNI k-blocking sums of one panel, [rows rounded up to 8, 48], per thread.
int32_t* part_sums(int64_t rows) {
  thread_local std::vector<int32_t> buf;
  const size_t n = static_cast<size_t>((rows + kInt8RowBlock) * kInt8PanelOuts);
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Code bytes q -> q + 128 (the VNNI kernel's u8 activations): flip the top bit.
void flip_top_bits(uint8_t* p, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    v ^= 0x8080808080808080ull;
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] ^= 0x80u;
}

// One row of W as floats, per thread (the non-finite fallback).
float* row_floats(int64_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

class Int8Linear final : public QuantLinear {
 public:
  explicit Int8Linear(const QuantLinearData& d);

  QWeightFormat weight_format() const override { return QWeightFormat::kInt8; }
  QActFormat act_format() const override { return act_; }
  int64_t out() const override { return out_; }
  int64_t in() const override { return in_; }
  void run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const override;
  void run_ref(const float* x, int64_t rows, const float* bias, float* y) const override;
  std::vector<float> dequantize() const override;
  size_t bytes() const override {
    return packed_.size() * sizeof(Line) + sw_.size() * sizeof(float) + wsum_.size() * sizeof(int32_t);
  }
  const char* kernel_name() const override;

 private:
  bool dynamic() const { return act_ == QActFormat::kInt8PerToken; }
  int panel_blocks(int64_t p) const {
    return static_cast<int>(std::min<int64_t>(kInt8PanelBlocks, blocks_ - p * kInt8PanelBlocks));
  }
  int64_t panel_offset(int64_t p) const { return p * kInt8PanelBlocks * kq_ * 64; }
  const int8_t* panel(int64_t p) const {
    return reinterpret_cast<const int8_t*>(packed_.data()) + panel_offset(p);
  }
  // Byte offset of (output o, k = 0) in the packed layout; k = 4q + t is at
  // + q · panel_blocks · 64 + t.
  int64_t row_offset(int64_t o) const {
    return panel_offset(o / kInt8PanelOuts) + 4 * (o % kInt8PanelOuts);
  }
  void pack(const QuantLinearData& d);
  void unpack_row(int64_t o, int8_t* dst) const;
  void quantize_block(const float* x, int64_t rows, int64_t b, ActScratch& s) const;
  void tiles(int64_t rows, const ActScratch& s, const float* bias, float* y, int64_t p0, int64_t p1) const;
  void fallback_cols(const float* x, int64_t rows, const float* bias, float* y, int64_t o0, int64_t o1) const;
  void nan_rows(int64_t rows, const uint8_t* flags, float* y) const;

  QActFormat act_;
  int64_t out_, in_, kq_, blocks_, panels_;
  float act_scale_ = 0.0f, act_inv_ = 0.0f;  // static only
  std::vector<Line> packed_;                  // W, layout of int8_kernels.h
  std::vector<float> sw_;                     // s_w per output (zero-padded to blocks_ · 16)
  std::vector<int32_t> wsum_;                 // 128 · Σ_k q_w per output (padded)
  Kernel kernel_;
  Isa quant_isa_;  // the activation quantizer's ISA (every ISA gives the same codes)
};

Int8Linear::Int8Linear(const QuantLinearData& d)
    : act_(d.act), out_(d.out), in_(d.in), kq_((d.in + 3) / 4), blocks_((d.out + 15) / 16),
      panels_((blocks_ + kInt8PanelBlocks - 1) / kInt8PanelBlocks), quant_isa_(best_isa()) {
  if (!dynamic()) {
    act_scale_ = d.act_scale;
    act_inv_ = 1.0f / d.act_scale;  // as simulate computes it (f32, once)
  }
  kernel_ = cpu_has_avx512_vnni() ? Kernel::kVnni : isa_supported(Isa::kAvx2) ? Kernel::kAvx2 : Kernel::kScalar;
  pack(d);
}

void Int8Linear::pack(const QuantLinearData& d) {
  packed_.assign(static_cast<size_t>(blocks_ * kq_), Line{});
  sw_.assign(static_cast<size_t>(blocks_ * 16), 0.0f);
  wsum_.assign(static_cast<size_t>(blocks_ * 16), 0);
  int8_t* packed = reinterpret_cast<int8_t*>(packed_.data());
  for (int64_t o = 0; o < out_; ++o) {
    const int8_t* src = reinterpret_cast<const int8_t*>(d.codes.data()) + o * in_;
    int8_t* dst = packed + row_offset(o);
    const int64_t stride = int64_t{panel_blocks(o / kInt8PanelOuts)} * 64;
    int32_t sum = 0;
    for (int64_t k = 0; k < in_; ++k) {
      dst[(k / 4) * stride + k % 4] = src[k];
      sum += src[k];
    }
    wsum_[static_cast<size_t>(o)] = 128 * sum;
    sw_[static_cast<size_t>(o)] = d.group == 0 ? d.scales[0] : d.scales[static_cast<size_t>(o)];
  }
}

void Int8Linear::unpack_row(int64_t o, int8_t* dst) const {
  const int8_t* src = reinterpret_cast<const int8_t*>(packed_.data()) + row_offset(o);
  const int64_t stride = int64_t{panel_blocks(o / kInt8PanelOuts)} * 64;
  for (int64_t k = 0; k < in_; ++k) dst[k] = src[(k / 4) * stride + k % 4];
}

const char* Int8Linear::kernel_name() const {
  switch (kernel_) {
    case Kernel::kVnni: return "avx512-vnni";
    case Kernel::kAvx2: return "avx2";
    case Kernel::kScalar: break;
  }
  return "scalar";
}

std::vector<float> Int8Linear::dequantize() const {
  std::vector<float> w(static_cast<size_t>(out_ * in_));
  std::vector<int8_t> row(static_cast<size_t>(in_));
  for (int64_t o = 0; o < out_; ++o) {
    unpack_row(o, row.data());
    const float s = sw_[static_cast<size_t>(o)];
    for (int64_t k = 0; k < in_; ++k) w[static_cast<size_t>(o * in_ + k)] = static_cast<float>(row[k]) * s;
  }
  return w;
}

// Rows [8b, 8b + mr) of x: scale, flags and codes into s (zero-padded to
// whole quads; the VNNI kernel takes q + 128, the code's byte with its top
// bit flipped).
void Int8Linear::quantize_block(const float* x, int64_t rows, int64_t b, ActScratch& s) const {
  const int64_t r0 = b * kInt8RowBlock;
  const int64_t mr = std::min<int64_t>(kInt8RowBlock, rows - r0);
  const int64_t ld = kq_ * 4;
  for (int64_t r = r0; r < r0 + mr; ++r) {
    const float* xr = x + r * in_;
    uint8_t* codes = s.codes.data() + r * ld;
    float scale = act_scale_, inv = act_inv_;
    uint8_t flags = 0;
    if (dynamic()) {
      bool bad = false;
      scale = int8_token_scale(int8_row_amax(quant_isa_, xr, in_, &bad));
      inv = 1.0f / scale;
      if (bad) flags |= kRowNonFinite;
    }
    if (int8_quantize_row(quant_isa_, xr, in_, inv, reinterpret_cast<int8_t*>(codes))) flags |= kRowNan | kRowNonFinite;
    std::fill(codes + in_, codes + ld, uint8_t{0});
    if (kernel_ == Kernel::kVnni) flip_top_bits(codes, ld);
    s.sx[static_cast<size_t>(r)] = scale;
    s.flags[static_cast<size_t>(r)] = flags;
  }
}

// Output panels [p0, p1) for all rows: panel-major (and, VNNI, k-chunk
// major), so a panel's W stays in cache while the row blocks stream past.
void Int8Linear::tiles(int64_t rows, const ActScratch& s, const float* bias, float* y, int64_t p0,
                       int64_t p1) const {
  void (*tile)(const Int8Tile&) = kernel_ == Kernel::kVnni   ? int8_tile_avx512_vnni
                                  : kernel_ == Kernel::kAvx2 ? int8_tile_avx2
                                                             : int8_tile_scalar;
  const int64_t chunks = kernel_ == Kernel::kVnni ? (kq_ + kKChunkQuads - 1) / kKChunkQuads : 1;
  const int64_t chunk = (kq_ + chunks - 1) / chunks;
  int32_t* part = chunk < kq_ ? part_sums(rows) : nullptr;
  Int8Tile t;
  t.act_ld = kq_ * 4;
  t.ldy = out_;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t o0 = p * kInt8PanelOuts;
    t.nb = panel_blocks(p);
    t.n = static_cast<int>(std::min<int64_t>(kInt8PanelOuts, out_ - o0));
    t.sw = sw_.data() + o0;
    t.wsum = wsum_.data() + o0;
    t.bias = bias ? bias + o0 : nullptr;
    for (int64_t c0 = 0; c0 < kq_; c0 += chunk) {
      t.kq = std::min(chunk, kq_ - c0);
      t.w = panel(p) + c0 * t.nb * 64;
      t.first = c0 == 0;
      t.last = c0 + t.kq == kq_;
      for (int64_t r0 = 0; r0 < rows; r0 += kInt8RowBlock) {
        t.act = s.codes.data() + r0 * t.act_ld + c0 * 4;
        t.mr = static_cast<int>(std::min<int64_t>(kInt8RowBlock, rows - r0));
        t.sx = s.sx.data() + r0;
        t.y = y + r0 * out_ + o0;
        t.part = part ? part + r0 * kInt8PanelOuts : nullptr;
        tile(t);
      }
    }
  }
}

// y[r, o] for o in [o0, o1) as linear_ref() computes x · dequantize()ᵀ + b:
// a double sum from the bias, in k order, rounded once to float.
void Int8Linear::fallback_cols(const float* x, int64_t rows, const float* bias, float* y, int64_t o0,
                               int64_t o1) const {
  int8_t* codes = row_codes(in_);
  float* w = row_floats(in_);
  for (int64_t o = o0; o < o1; ++o) {
    unpack_row(o, codes);
    const float s = sw_[static_cast<size_t>(o)];
    for (int64_t k = 0; k < in_; ++k) w[k] = static_cast<float>(codes[k]) * s;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * in_;
      double acc = bias ? bias[o] : 0.0;
      for (int64_t k = 0; k < in_; ++k) acc += static_cast<double>(xr[k]) * w[k];
      y[r * out_ + o] = static_cast<float>(acc);
    }
  }
}

void Int8Linear::nan_rows(int64_t rows, const uint8_t* flags, float* y) const {
  for (int64_t r = 0; r < rows; ++r)
    if (flags[r] & kRowNan) std::fill(y + r * out_, y + (r + 1) * out_, std::numeric_limits<float>::quiet_NaN());
}

void Int8Linear::run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const {
  if (rows <= 0 || out_ <= 0) return;
  const Int8FpEnv env;  // the workers inherit it (thread_pool.h)
  // The lambdas capture two pointers, which std::function stores without a
  // heap allocation.
  struct Call {
    const float* x;
    int64_t rows;
    const float* bias;
    float* y;
    ActScratch* s;
  } c{x, rows, bias, y, &act_scratch(rows, kq_)};
  const int64_t row_blocks = (rows + kInt8RowBlock - 1) / kInt8RowBlock;
  pool.parallel_for(
      row_blocks, [this, &c](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) quantize_block(c.x, c.rows, b, *c.s);
      },
      std::max<int64_t>(1, kMinParallelQuant / (kInt8RowBlock * in_)));
  const int64_t min_panels = std::max<int64_t>(1, kMinParallelMacs / (rows * kInt8PanelOuts * in_));
  const uint8_t* flags = c.s->flags.data();
  if (dynamic() && std::any_of(flags, flags + rows, [](uint8_t f) { return f != 0; })) {
    pool.parallel_for(
        panels_, [this, &c](int64_t p0, int64_t p1) {
          fallback_cols(c.x, c.rows, c.bias, c.y, p0 * kInt8PanelOuts, std::min(out_, p1 * kInt8PanelOuts));
        },
        min_panels);
    return;
  }
  pool.parallel_for(
      panels_, [this, &c](int64_t p0, int64_t p1) { tiles(c.rows, *c.s, c.bias, c.y, p0, p1); }, min_panels);
  if (!dynamic()) nan_rows(rows, flags, y);
}

// The same arithmetic in plain loops: scalar quantizer, int32 dot products in
// k order, int8_epilogue.
void Int8Linear::run_ref(const float* x, int64_t rows, const float* bias, float* y) const {
  if (rows <= 0 || out_ <= 0) return;
  const Int8FpEnv env;
  std::vector<int8_t> q(static_cast<size_t>(rows * in_));
  std::vector<float> sx(static_cast<size_t>(rows));
  std::vector<uint8_t> flags(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * in_;
    float scale = act_scale_, inv = act_inv_;
    if (dynamic()) {
      bool bad = false;
      scale = int8_token_scale(int8_row_amax_ref(xr, in_, &bad));
      inv = 1.0f / scale;
      if (bad) return fallback_cols(x, rows, bias, y, 0, out_);
    }
    sx[static_cast<size_t>(r)] = scale;
    if (int8_quantize_row_ref(xr, in_, inv, q.data() + r * in_)) flags[static_cast<size_t>(r)] = kRowNan;
  }
  std::vector<int8_t> w(static_cast<size_t>(in_));
  for (int64_t o = 0; o < out_; ++o) {
    unpack_row(o, w.data());
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* qr = q.data() + r * in_;
      int32_t acc = 0;
      for (int64_t k = 0; k < in_; ++k) acc += int32_t{qr[k]} * int32_t{w[static_cast<size_t>(k)]};
      y[r * out_ + o] = int8_epilogue(acc, sx[static_cast<size_t>(r)], sw_[static_cast<size_t>(o)], bias, o);
    }
  }
  nan_rows(rows, flags.data(), y);
}

}  // namespace

bool int8_linear_supported(QActFormat act, int64_t group, int64_t in) {
  const bool int8_act = act == QActFormat::kInt8PerTensor || act == QActFormat::kInt8PerToken;
  return int8_act && in >= 1 && in <= kInt8MaxIn && (group == 0 || group == in);
}

std::shared_ptr<const QuantLinear> make_int8_linear(QuantLinearData data) {
  const std::string item = data.name.empty() ? "native linear" : data.name;
  if (data.weight != QWeightFormat::kInt8 || !int8_linear_supported(data.act, data.group, data.in))
    throw Error(ErrorKind::kUnsupported, "", item,
                std::string("the int8 kernels take int8 weights with per-tensor or per-channel scales, int8 "
                            "activations and 1 <= in <= ") + std::to_string(kInt8MaxIn) + "; got " +
                    qweight_format_name(data.weight) + " with " + qact_format_name(data.act) + ", group " +
                    std::to_string(data.group) + ", in " + std::to_string(data.in),
                "use --runtime simulate for this checkpoint");
  if (data.act == QActFormat::kInt8PerTensor && !std::isfinite(1.0f / data.act_scale))
    throw Error(ErrorKind::kInvalidInput, "", item,
                "static activation scale " + std::to_string(data.act_scale) +
                    " is so small that its reciprocal overflows float",
                "re-export the checkpoint with its calibrated input_scale");
  return std::make_shared<Int8Linear>(data);
}

}  // namespace qloom::engine::native
