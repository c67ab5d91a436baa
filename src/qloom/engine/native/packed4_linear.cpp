// Native kernel family: int4 / uint4 / mxfp4 weight-only, fp32 activations.
//
// Bits: run() gives exactly what the fp32 engine's linear() gives on the
// dequantized weights (quant::dequantize_ref's values), on every ISA cap and
// thread count, because it keeps linear()'s canonical summation order
// (gemm_dispatch.h) and forms each weight with dequantize_ref's one rounding
// (packed4_kernels.h):
//   rows < 128   GEMV: the packed codes are streamed (half a byte per weight)
//                and turned into fp32 in registers through a 16-entry table
//                per scale group; 16 FMA lanes, fixed tree, + bias;
//   rows >= 128  GEMM: per k block the thread's W columns are dequantized
//                into the fp32 GEMM's B panels and its micro kernel runs on
//                them (GemmKernelSet::gemm_panels): one FMA chain per y from
//                the bias.
// Without AVX2 (QLOOM_MAX_ISA=scalar) both orders run in scalar C++ (std::fma),
// which is also run_ref(). So native == simulate bitwise for these schemes.
#include "qloom/engine/native/packed4_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/engine/gemm_kernels.h"
#include "qloom/engine/native/packed4_kernels.h"

namespace qloom::engine::native {
namespace {

using packed4::Packed4Kernels;
using packed4::Packed4View;

constexpr int64_t kGemmMinRows = 128;             // linear()'s GEMV / GEMM split (gemm.cpp)
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;  // below: the calling thread only (as gemm.cpp)

// A 64-byte aligned per-thread buffer of at least `floats` floats; `slot`
// picks one of a few independent buffers. Grows, never shrinks: no heap
// allocation once warm.
float* scratch(int slot, size_t floats) {
  thread_local std::vector<float> buf[3];
  std::vector<float>& b = buf[slot];
  if (b.size() < floats + 16) b.resize(floats + 16);
  auto p = reinterpret_cast<uintptr_t>(b.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

// Splits [0, out) in blocks of `align` columns over the pool. The lambda
// handed to parallel_for captures one reference, so std::function holds it
// without a heap allocation.
template <class F>
void over_columns(ThreadPool& pool, int64_t out, int64_t align, int64_t macs_per_col, const F& body) {
  struct Ctx {
    const F* body;
    int64_t align, out;
  } ctx{&body, align, out};
  const int64_t blocks = (out + align - 1) / align;
  const int64_t min_blocks = std::max<int64_t>(1, kMinParallelMacs / std::max<int64_t>(1, macs_per_col * align));
  pool.parallel_for(
      blocks, [&ctx](int64_t b, int64_t e) { (*ctx.body)(b * ctx.align, std::min(ctx.out, e * ctx.align)); },
      min_blocks);
}

// The canonical GEMV order (gemm.cpp gemv_order_dot) on one decoded W row.
float gemv_order_dot(const float* xr, const float* wr, int64_t in, float bias) {
  float p[16] = {};
  for (int64_t k0 = 0; k0 < in; k0 += 16)
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t k = k0 + l;
      p[l] = k < in ? std::fma(xr[k], wr[k], p[l]) : std::fma(0.0f, 0.0f, p[l]);
    }
  float t[8], q[4];
  for (int i = 0; i < 8; ++i) t[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; ++i) q[i] = t[i] + t[i + 4];
  return bias + ((q[0] + q[2]) + (q[1] + q[3]));
}

// The canonical GEMM order (gemm.cpp gemm_order_dot): one chain from the bias.
float gemm_order_dot(const float* xr, const float* wr, int64_t in, float bias) {
  float acc = bias;
  for (int64_t k = 0; k < in; ++k) acc = std::fma(xr[k], wr[k], acc);
  return acc;
}

// Scalar columns [n0, n1): W row o decoded once, then every x row.
void scalar_cols(const Packed4View& w, const float* x, int64_t rows, const float* bias, int64_t n0, int64_t n1,
                 float* y) {
  float* wr = scratch(0, static_cast<size_t>(w.in));
  const bool gemv = rows < kGemmMinRows;
  for (int64_t o = n0; o < n1; ++o) {
    for (int64_t k = 0; k < w.in; ++k) wr[k] = w.weight(o, k);
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      y[r * w.out + o] = gemv ? gemv_order_dot(x + r * w.in, wr, w.in, b) : gemm_order_dot(x + r * w.in, wr, w.in, b);
  }
}

// GEMM columns [n0, n1) (n0 a multiple of nr): per k block, dequantize the
// columns' panels, then the fp32 micro kernel over all rows.
void gemm_cols(const Packed4Kernels& k, const Packed4View& w, const float* x, int64_t rows, const float* bias,
               int64_t n0, int64_t n1, float* y) {
  const detail::GemmKernelSet& g = *k.gemm;
  const int64_t ncols = n1 - n0, kcmax = g.kc;
  float* bp = scratch(0, static_cast<size_t>((ncols + g.nr - 1) / g.nr * g.nr * kcmax));
  float* abuf = scratch(1, static_cast<size_t>(g.mc * kcmax));
  float* tmp = scratch(2, static_cast<size_t>(16 * (kcmax + 16)));
  for (int64_t k0 = 0; k0 < w.in || k0 == 0; k0 += kcmax) {
    const int64_t kc = std::min(kcmax, w.in - k0);
    k.dequant_panels(w, n0, ncols, k0, kc, g.nr, bp, tmp);
    g.gemm_panels(x, w.in, rows, k0, kc, bp, ncols, bias ? bias + n0 : nullptr, k0 == 0, y + n0, w.out, abuf);
    if (w.in == 0) break;
  }
}

const Packed4Kernels* kernels_now() {
  if (isa_supported(Isa::kAvx512) && packed4::packed4_kernels_avx512()) return packed4::packed4_kernels_avx512();
  if (isa_supported(Isa::kAvx2) && packed4::packed4_kernels_avx2()) return packed4::packed4_kernels_avx2();
  return nullptr;
}

// base(n): the value of index n before the zero point and scale.
float base_value(QWeightFormat f, int n) {
  if (f == QWeightFormat::kMxfp4) return fp4_e2m1_to_float(static_cast<uint8_t>(n));
  return static_cast<float>(f == QWeightFormat::kInt4 ? n - 8 : n);
}

class Packed4Linear final : public QuantLinear {
 public:
  explicit Packed4Linear(const QuantLinearData& d);
  QWeightFormat weight_format() const override { return format_; }
  QActFormat act_format() const override { return QActFormat::kF32; }
  int64_t out() const override { return out_; }
  int64_t in() const override { return in_; }
  void run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const override;
  void run_ref(const float* x, int64_t rows, const float* bias, float* y) const override;
  std::vector<float> dequantize() const override;
  size_t bytes() const override {
    return codes_.size() + scales_.size() * sizeof(float) + zps_.size() + sizeof basez_;
  }
  const char* kernel_name() const override;

 private:
  Packed4View view() const;

  QWeightFormat format_;
  int64_t out_, in_;
  int64_t nfull_ = 0, tail_steps_ = 0, tail_bpl_ = 0, tile_bytes_ = 0;  // see Packed4View
  int64_t groups_ = 0, steps_per_group_ = 1;
  // packed4_kernels.h layout (superchunks, tiles of 4 rows, out padded).
  std::vector<uint8_t> codes_;
  std::vector<float> scales_;  // [tiles][groups_][4]
  std::vector<uint8_t> zps_;   // like scales_ for uint4, else empty
  float basez_[16][16];         // basez_[zp][n] = base(n) - zp
};

Packed4Linear::Packed4Linear(const QuantLinearData& d) : format_(d.weight), out_(d.out), in_(d.in) {
  using packed4::kSuperBytes;
  using packed4::kTileRows;
  nfull_ = in_ / 128;
  tail_steps_ = (in_ % 128 + 15) / 16;
  tail_bpl_ = tail_steps_ == 0 ? 0 : tail_steps_ <= 2 ? 1 : tail_steps_ <= 4 ? 2 : 4;
  tile_bytes_ = kTileRows * (nfull_ * kSuperBytes + 16 * tail_bpl_);
  // Per-tensor (group 0) and per-channel (group == in) are one group per row.
  const bool one_group = d.group == 0 || d.group == in_;
  groups_ = one_group ? 1 : in_ / d.group;
  steps_per_group_ = one_group ? std::max<int64_t>(1, (in_ + 15) / 16) : d.group / 16;
  for (int zp = 0; zp < 16; ++zp)
    for (int n = 0; n < 16; ++n) basez_[zp][n] = base_value(format_, n) - static_cast<float>(zp);
  const int64_t tiles = (out_ + kTileRows - 1) / kTileRows;
  codes_.assign(static_cast<size_t>(tiles * tile_bytes_), 0);
  scales_.assign(static_cast<size_t>(tiles * groups_ * kTileRows), 0.0f);
  if (format_ == QWeightFormat::kUInt4) zps_.assign(scales_.size(), 0);
  const Packed4View v = view();
  for (int64_t o = 0; o < out_; ++o) {
    for (int64_t k = 0; k < in_; ++k) {
      const uint8_t c = d.codes[static_cast<size_t>(o * in_ + k)];
      const uint8_t n = format_ == QWeightFormat::kInt4 ? static_cast<uint8_t>(static_cast<int8_t>(c) + 8) : c;
      uint8_t& byte = codes_[static_cast<size_t>(v.byte_offset(o, k))];
      byte = static_cast<uint8_t>(byte | ((k / 16) % 2 == 0 ? n & 15 : (n & 15) << 4));
    }
    for (int64_t g = 0; g < groups_; ++g) {
      const size_t src = d.group == 0 ? 0 : static_cast<size_t>(o * groups_ + g);
      scales_[static_cast<size_t>(v.group_index(o, g))] = d.scales[src];
      if (!zps_.empty()) zps_[static_cast<size_t>(v.group_index(o, g))] = static_cast<uint8_t>(d.zero_points[src]);
    }
  }
}

Packed4View Packed4Linear::view() const {
  Packed4View v;
  v.codes = codes_.data();
  v.nfull = nfull_;
  v.tail_steps = tail_steps_;
  v.tail_bpl = tail_bpl_;
  v.tile_bytes = tile_bytes_;
  v.scales = scales_.data();
  v.zps = zps_.empty() ? nullptr : zps_.data();
  v.basez = &basez_[0][0];
  v.groups = groups_;
  v.steps_per_group = steps_per_group_;
  v.in = in_;
  v.out = out_;
  return v;
}

void Packed4Linear::run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const {
  if (rows <= 0 || out_ <= 0) return;
  const Packed4View w = view();
  const int64_t macs_per_col = rows * std::max<int64_t>(1, in_);
  const Packed4Kernels* k = kernels_now();
  if (k == nullptr) {
    over_columns(pool, out_, 1, macs_per_col,
                 [&](int64_t n0, int64_t n1) { scalar_cols(w, x, rows, bias, n0, n1, y); });
  } else if (rows < kGemmMinRows) {
    // Blocks of 8 outputs: whole 4-row code tiles (packed4_kernels.h).
    over_columns(pool, out_, 8, macs_per_col,
                 [&](int64_t n0, int64_t n1) { k->gemv(w, x, rows, bias, n0, n1, y); });
  } else {
    over_columns(pool, out_, k->gemm->nr, macs_per_col,
                 [&](int64_t n0, int64_t n1) { gemm_cols(*k, w, x, rows, bias, n0, n1, y); });
  }
}

void Packed4Linear::run_ref(const float* x, int64_t rows, const float* bias, float* y) const {
  if (rows <= 0 || out_ <= 0) return;
  scalar_cols(view(), x, rows, bias, 0, out_, y);
}

std::vector<float> Packed4Linear::dequantize() const {
  const Packed4View w = view();
  std::vector<float> out(static_cast<size_t>(out_ * in_));
  for (int64_t o = 0; o < out_; ++o)
    for (int64_t k = 0; k < in_; ++k) out[static_cast<size_t>(o * in_ + k)] = w.weight(o, k);
  return out;
}

const char* Packed4Linear::kernel_name() const {
  const Packed4Kernels* k = kernels_now();
  if (k == nullptr) return "scalar-packed4";
  return std::strcmp(k->name, "avx512") == 0 ? "avx512-packed4" : "avx2-packed4";
}

}  // namespace

bool packed4_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in) {
  if (act != QActFormat::kF32 || in < 0) return false;
  switch (weight) {
    case QWeightFormat::kInt4:
    case QWeightFormat::kUInt4:  // groups tile the 128-k superchunks (packed4_kernels.h)
      return group == 0 || group == in || group == 32 || group == 64 || (group > 0 && group % 128 == 0);
    case QWeightFormat::kMxfp4: return group == 32;
    default: return false;
  }
}

std::shared_ptr<const QuantLinear> make_packed4_linear(QuantLinearData data) {
  if (!packed4_linear_supported(data.weight, data.act, data.group, data.in))
    throw Error(ErrorKind::kUnsupported, "", data.name.empty() ? "native linear" : data.name,
                std::string("the packed 4-bit kernels take int4 / uint4 (group 0, 32, 64, 128·n or in) and "
                            "mxfp4 (group 32) weights with f32 activations, not ") +
                    qweight_format_name(data.weight) + " group " + std::to_string(data.group),
                "use --runtime simulate for this checkpoint");
  return std::make_shared<const Packed4Linear>(data);
}

}  // namespace qloom::engine::native
