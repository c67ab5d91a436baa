// The bf16 dot-product family (bf16dot_linear.h): fp8 e4m3 weights with fp8
// activations (static per-tensor or dynamic per-token scales) and bf16
// weights with bf16 activations, both multiplied as bf16 pairs with fp32
// accumulation (vdpbf16ps; the arithmetic is defined in bf16dot_kernels.h).
//
// make: W packed into panels of 16 outputs x k pairs, the operand layout of
// vdpbf16ps: bf16 W as it is, fp8 W as its codes (1 byte per weight; the
// kernels widen them to bf16, exactly: an e4m3 value has 4 significant bits).
// run:  (1) the activation rows quantized to bf16 codes (bf16dot_act.h),
//       parallel over rows; (2) the kernel of this CPU, parallel over panels
//       (decode of one row splits its outputs over every thread). Every
//       output is one fixed chain, so the bits depend neither on the thread
//       count nor (tested) on the ISA.
// A dynamic (per-token) call whose activations hold NaN or inf is not
// quantized at all, as in the simulate path: it computes x · dequantized W
// with engine::linear() (linear_ref() in run_ref), so it equals simulate.
//
// Measured on the dev machine (AMD EPYC, AVX512_BF16; vdpbf16ps zmm ~2 per
// cycle, latency 6; ~3.7 GHz: peak ~480 GFLOP/s per core, fp32 FMA ~240),
// GFLOP/s = 2·rows·in·out / time, one thread, best of 10 by thread CPU time
// (the machine is shared: wall-clock figures under load are lower and noisy):
//   rows, in x out     f32 linear()  bf16  fp8 static  fp8 dynamic  llama.cpp BF16
//   1,    576x1536         36          93     102          100             70
//   1,   1536x576          49         104     101          103             69
//   1,    576x576          47         156      97          101             75
//   1,   5632x2048         19          44      96           95             38
//   512,  576x1536        187         421     410          427            260
//   512, 1536x576         188         379     344          400            272
//   512,  576x576         206         417     307          394            245
//   512, 5632x2048        178         413     404          432            276
// Decode streams W: fp8's 1-byte codes halve the bytes (5632x2048: 2x over
// bf16) while the widening caps a cache-resident W near 100 GFLOP/s.
#include "qloom/engine/native/bf16dot_linear.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <utility>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/native/bf16dot_act.h"
#include "qloom/engine/native/bf16dot_kernels.h"

namespace qloom::engine::native {
namespace {

using bf16dot::ActCode;
using bf16dot::kPanel;

// Multiply-adds below which a call stays on the calling thread.
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;

enum class Path : uint8_t { kAvx512Bf16, kAvx2, kScalar };

Path kernel_path() {
  if (bf16dot::avx512bf16_kernel_built() && cpu_has_avx512_bf16()) return Path::kAvx512Bf16;
  if (bf16dot::avx2_kernel_built() && isa_supported(Isa::kAvx2)) return Path::kAvx2;
  return Path::kScalar;
}

Isa quantizer_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  return isa_supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
}

// Per-thread buffers that only grow: no heap allocation once warm.
template <class T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// What one call's parallel bodies share (captured by pointer, so the
// std::function holding the lambda needs no heap).
struct Call {
  const float* x = nullptr;
  int64_t in = 0;
  ActCode kind = ActCode::kBf16;
  float act_scale = 1.0f;
  Isa isa = Isa::kScalar;
  Path path = Path::kScalar;
  bf16dot::Args args;
  uint16_t* xq = nullptr;
  float* sx = nullptr;
  std::atomic<bool> nonfinite{false};
};

// Rows [r0, r1) of the activations into their codes (bf16dot_kernels.h, Args::xq).
void quantize_rows(Call& c, int64_t r0, int64_t r1) {
  bf16dot::IeeeEnv env;
  for (int64_t r = r0; r < r1; ++r)
    if (!bf16dot::quantize_row(c.isa, c.kind, c.x + r * c.in, c.in, c.act_scale, c.xq + r * 2 * c.args.pairs, c.sx + r))
      c.nonfinite.store(true, std::memory_order_relaxed);
}

void run_panels(const Call& c, int64_t q0, int64_t q1) {
  switch (c.path) {
    case Path::kAvx512Bf16: return bf16dot::run_avx512bf16(c.args, q0, q1);
    case Path::kAvx2: return bf16dot::run_avx2(c.args, q0, q1);
    case Path::kScalar: return bf16dot::run_scalar(c.args, q0, q1);
  }
}

class Bf16DotLinear final : public QuantLinear {
 public:
  explicit Bf16DotLinear(const QuantLinearData& d);

  QWeightFormat weight_format() const override { return weight_; }
  QActFormat act_format() const override { return act_; }
  int64_t out() const override { return out_; }
  int64_t in() const override { return in_; }
  void run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const override;
  void run_ref(const float* x, int64_t rows, const float* bias, float* y) const override;
  std::vector<float> dequantize() const override;
  size_t bytes() const override {
    return w_.size() * sizeof(uint32_t) + w8_.size() + (sw_.size() + sw_run_.size()) * sizeof(float) +
           nan_codes_.size() * sizeof(nan_codes_[0]);
  }
  const char* kernel_name() const override;

 private:
  ActCode act_code() const {
    if (act_ == QActFormat::kBf16) return ActCode::kBf16;
    return act_ == QActFormat::kFp8PerTensor ? ActCode::kFp8Static : ActCode::kFp8Dynamic;
  }
  // W[o, k] as the value the kernels multiply (bf16 / e4m3 widened).
  float w_at(int64_t o, int64_t k) const {
    const size_t i = static_cast<size_t>(((o / kPanel) * pairs_ + k / 2) * kPanel + o % kPanel);
    if (!w8_.empty()) {
      const auto nan = std::lower_bound(nan_codes_.begin(), nan_codes_.end(), std::make_pair(o * in_ + k, uint8_t{0}));
      const bool is_nan = nan != nan_codes_.end() && nan->first == o * in_ + k;
      return fp8_e4m3_to_float(is_nan ? nan->second : w8_[2 * i + static_cast<size_t>(k % 2)]);
    }
    return bf16_to_float(static_cast<uint16_t>(k % 2 ? w_[i] >> 16 : w_[i]));
  }
  bf16dot::Args args(int64_t rows, const float* bias, float* y) const;
  // x · dequantized W for a dynamic call with non-finite activations.
  LinearWeight dequantized_weight(const float* bias) const;

  QWeightFormat weight_;
  QActFormat act_;
  int64_t out_, in_, pairs_, panels_;
  float act_scale_;
  std::vector<uint32_t> w_;  // bf16 W in panels (bf16dot_kernels.h)
  std::vector<uint8_t> w8_;  // or fp8 W in panels, NaN codes replaced by 0
  std::vector<float> sw_;    // per output (panels_ * 16); 1 for bf16, 0 past out_
  // fp8 W with NaN codes: (element, code) of each, and the scales the kernels
  // use (NaN for the outputs those rows feed: bf16dot_kernels.h, Args::w8).
  std::vector<std::pair<int64_t, uint8_t>> nan_codes_;
  std::vector<float> sw_run_;
};

Bf16DotLinear::Bf16DotLinear(const QuantLinearData& d)
    : weight_(d.weight), act_(d.act), out_(d.out), in_(d.in), pairs_((d.in + 1) / 2),
      panels_((d.out + kPanel - 1) / kPanel), act_scale_(d.act == QActFormat::kFp8PerTensor ? d.act_scale : 1.0f) {
  // Element (o, k) goes to half k % 2 of slot ((o / 16) * pairs + k / 2) * 16 + o % 16.
  const size_t slots = static_cast<size_t>(panels_ * pairs_ * kPanel);
  const bool fp8 = d.weight == QWeightFormat::kFp8E4M3;
  if (fp8) w8_.assign(2 * slots, 0);  // 0 = +0 in e4m3
  else w_.assign(slots, 0u);
  for (int64_t o = 0; o < out_; ++o) {
    const size_t base = static_cast<size_t>((o / kPanel) * pairs_ * kPanel + o % kPanel);
    for (int64_t k = 0; k < in_; ++k) {
      const size_t slot = base + static_cast<size_t>((k / 2) * kPanel), e = static_cast<size_t>(o * in_ + k);
      if (fp8 && (d.codes[e] & 0x7F) == 0x7F) nan_codes_.emplace_back(o * in_ + k, d.codes[e]);
      else if (fp8) w8_[2 * slot + static_cast<size_t>(k % 2)] = d.codes[e];
      else w_[slot] |= static_cast<uint32_t>(d.codes[2 * e] | (d.codes[2 * e + 1] << 8)) << (16 * (k % 2));
    }
  }
  sw_.assign(static_cast<size_t>(panels_ * kPanel), 0.0f);
  for (int64_t o = 0; o < out_; ++o)
    sw_[static_cast<size_t>(o)] = d.weight == QWeightFormat::kBf16 ? 1.0f
                                  : d.group == 0                   ? d.scales[0]
                                                                   : d.scales[static_cast<size_t>(o)];
  if (!nan_codes_.empty()) {
    sw_run_ = sw_;
    for (const auto& [e, code] : nan_codes_) sw_run_[static_cast<size_t>(e / in_)] = std::bit_cast<float>(0x7FC00000u);
  }
}

const char* Bf16DotLinear::kernel_name() const {
  switch (kernel_path()) {
    case Path::kAvx512Bf16: return "avx512-bf16";
    case Path::kAvx2: return "avx2-fma";
    case Path::kScalar: break;
  }
  return "scalar";
}

bf16dot::Args Bf16DotLinear::args(int64_t rows, const float* bias, float* y) const {
  bf16dot::Args a;
  a.w = w_.empty() ? nullptr : w_.data();
  a.w8 = w8_.empty() ? nullptr : w8_.data();
  a.pairs = pairs_;
  a.rows = rows;
  a.sw = sw_run_.empty() ? sw_.data() : sw_run_.data();
  a.bias = bias;
  a.y = y;
  a.out = out_;
  return a;
}

LinearWeight Bf16DotLinear::dequantized_weight(const float* bias) const {
  LinearWeight w;
  w.type = WeightType::kF32;
  w.out = out_;
  w.in = in_;
  w.f32 = dequantize();
  if (bias) w.bias.assign(bias, bias + out_);
  return w;
}

void Bf16DotLinear::run(const float* x, int64_t rows, const float* bias, float* y, ThreadPool& pool) const {
  if (rows <= 0 || out_ <= 0) return;
  bf16dot::IeeeEnv env;
  thread_local std::vector<uint16_t> xq_buf;
  thread_local std::vector<float> sx_buf;
  Call c;
  c.x = x;
  c.in = in_;
  c.kind = act_code();
  c.act_scale = act_scale_;
  c.isa = quantizer_isa();
  c.path = kernel_path();
  c.args = args(rows, bias, y);
  c.args.xq = c.xq = grow(xq_buf, static_cast<size_t>(rows * 2 * pairs_ + 2));
  c.args.sx = c.sx = grow(sx_buf, static_cast<size_t>(rows));
  Call* cp = &c;
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, in_));
  pool.parallel_for(rows, [cp](int64_t r0, int64_t r1) { quantize_rows(*cp, r0, r1); }, min_rows);
  if (c.nonfinite.load()) {
    linear(x, rows, dequantized_weight(bias), y, pool);
    return;
  }
  const int64_t macs_per_panel = std::max<int64_t>(1, rows * in_ * kPanel);
  const int64_t min_panels = std::max<int64_t>(1, kMinParallelMacs / macs_per_panel);
  pool.parallel_for(panels_, [cp](int64_t q0, int64_t q1) { run_panels(*cp, q0, q1); }, min_panels);
}

void Bf16DotLinear::run_ref(const float* x, int64_t rows, const float* bias, float* y) const {
  if (rows <= 0 || out_ <= 0) return;
  bf16dot::IeeeEnv env;
  std::vector<uint16_t> xq(static_cast<size_t>(rows * 2 * pairs_ + 2));
  std::vector<float> sx(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    if (!bf16dot::quantize_row(Isa::kScalar, act_code(), x + r * in_, in_, act_scale_, &xq[r * 2 * pairs_], &sx[r])) {
      linear_ref(x, rows, dequantized_weight(bias), y);
      return;
    }
  bf16dot::Args a = args(rows, bias, y);
  a.xq = xq.data();
  a.sx = sx.data();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_; ++o)
      y[r * out_ + o] = bf16dot::epilogue_ref(bf16dot::dot_ref(a, r, o), sx[r], a.sw[o], bias, o);
}

std::vector<float> Bf16DotLinear::dequantize() const {
  std::vector<float> w(static_cast<size_t>(out_ * in_));
  for (int64_t o = 0; o < out_; ++o)
    for (int64_t k = 0; k < in_; ++k) {
      const float v = w_at(o, k);
      // quant::dequantize_ref: fp8 value * scale; bf16 as it is.
      w[static_cast<size_t>(o * in_ + k)] = weight_ == QWeightFormat::kBf16 ? v : v * sw_[static_cast<size_t>(o)];
    }
  return w;
}

}  // namespace

bool bf16dot_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in) {
  if (weight == QWeightFormat::kBf16) return act == QActFormat::kBf16;
  if (weight != QWeightFormat::kFp8E4M3) return false;
  const bool fp8_act = act == QActFormat::kFp8PerTensor || act == QActFormat::kFp8PerToken;
  return fp8_act && (group == 0 || group == in);
}

std::shared_ptr<const QuantLinear> make_bf16dot_linear(QuantLinearData data) {
  if (!bf16dot_linear_supported(data.weight, data.act, data.group, data.in))
    throw Error(ErrorKind::kUnsupported, "", data.name.empty() ? "native linear" : data.name,
                std::string("the bf16 dot-product kernels do not take ") + qweight_format_name(data.weight) +
                    " weights with " + qact_format_name(data.act) + " activations",
                "use --runtime simulate for this checkpoint");
  return std::make_shared<Bf16DotLinear>(data);
}

}  // namespace qloom::engine::native
