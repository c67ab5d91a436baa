// The optimized fp4 block quantizer (fp4_block.h): rows split over threads,
// and per group a straight-line loop the compiler vectorizes (one f32
// division per element, then a branch-free e2m1 encoder made of seven
// threshold comparisons). Scales come from the same scalar functions as the
// reference (fp4_block.h, namespace detail), so only the element loops
// differ; tests/quant/fp4_block_test.cpp checks both bit for bit on random
// and adversarial inputs for every thread count.
#include <algorithm>
#include <bit>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "qloom/core/float_codec.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

// e2m1 RNE of q with saturation, as float_to_fp4_e2m1 + "zero magnitude is
// +0": the magnitude code counts the midpoints below |q|, a midpoint itself
// going to the even code (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2,
// 2.5 -> 2, 3.5 -> 4, 5 -> 4). NaN compares false everywhere: code 0.
inline uint8_t fp4_code(float q) {
  const float a = std::fabs(q);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  const uint32_t neg = (std::bit_cast<uint32_t>(q) >> 31) & static_cast<uint32_t>(c != 0);
  return static_cast<uint8_t>(c | (neg << 3));
}

// codes of x[0..g) / scale (scale 0 -> eps, as fp4_encode).
void encode_group(const float* x, uint64_t g, float scale, uint8_t* out) {
  const float s = scale == 0.0f ? detail::kEps : scale;
  for (uint64_t i = 0; i < g; ++i) out[i] = fp4_code(x[i] / s);
}

float group_amax(const float* x, uint64_t g) {
  float m = 0.0f;
  for (uint64_t i = 0; i < g; ++i) m = std::max(m, std::fabs(x[i]));  // finite inputs: same as fmax
  return m;
}

unsigned thread_count(unsigned requested, uint64_t rows, uint64_t n) {
  const unsigned t = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  const uint64_t by_size = std::max<uint64_t>(1, n / (uint64_t{1} << 16));
  return static_cast<unsigned>(std::min<uint64_t>({t, rows, by_size}));
}

// fn(r0, r1) over `t` contiguous row chunks; the first chunk's exception
// (lowest rows) is rethrown, so errors do not depend on scheduling.
template <class F>
void for_rows(uint64_t rows, unsigned t, F&& fn) {
  if (t <= 1) {
    fn(uint64_t{0}, rows);
    return;
  }
  const uint64_t chunk = (rows + t - 1) / t;
  std::vector<std::exception_ptr> errors(t);
  std::vector<std::thread> workers;
  auto run = [&](unsigned i) {
    const uint64_t r0 = i * chunk, r1 = std::min(rows, r0 + chunk);
    if (r0 >= r1) return;
    try {
      detail::FpEnvGuard env;
      fn(r0, r1);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  for (unsigned i = 0; i + 1 < t; ++i) workers.emplace_back(run, i);
  run(t - 1);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

QuantizedTensor quantize_fp4_block(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                   const std::optional<QuantSpec>& second, float global_scale,
                                   std::string_view tensor_name, DType model_dtype, unsigned threads) {
  detail::FpEnvGuard env;
  check_fp4_block_specs(first, second, tensor_name);
  if (rows == 0 || cols == 0 || first.group_size <= 0 || cols % static_cast<uint64_t>(first.group_size) != 0)
    return quantize_fp4_block_ref(w, rows, cols, first, second, global_scale, tensor_name, model_dtype);  // its error
  const uint64_t g = static_cast<uint64_t>(first.group_size), gpr = cols / g, n = rows * cols;
  QuantizedTensor t;
  t.spec = first;
  t.shape = {rows, cols};
  t.codes.resize(n);
  t.scales.resize(n / g);
  t.scale_dtype = second && second->dtype == QDtype::kFp8E4M3 ? DType::kF8_E4M3 : DType::kU8;
  if (second) {
    t.scale_spec = second;
    t.global_scale = global_scale;
  }
  for_rows(rows, thread_count(threads, rows, n), [&](uint64_t r0, uint64_t r1) {
    for (uint64_t r = r0; r < r1; ++r) {
      const float* row = w + r * cols;
      for (uint64_t i = 0; i < cols; ++i)
        if (!std::isfinite(row[i])) detail::throw_nonfinite(tensor_name, r, i, row[i]);
      for (uint64_t j = 0; j < gpr; ++j) {
        const uint64_t gi = r * gpr + j;
        uint8_t code = 0;
        t.scales[gi] = detail::fp4_weight_group_scale(first, second, global_scale, group_amax(row + j * g, g),
                                                      model_dtype, &code);
        encode_group(row + j * g, g, group_scale(t, gi), t.codes.data() + gi * g);
      }
    }
  });
  return t;
}

void fake_quantize_fp4_block(float* x, int64_t rows, int64_t cols, const QuantSpec& first,
                             const std::optional<QuantSpec>& second, float global_scale) {
  detail::FpEnvGuard env;
  check_fp4_block_specs(first, second, "activation");
  if (rows <= 0 || cols <= 0) return;
  const uint64_t g = static_cast<uint64_t>(first.group_size), n = static_cast<uint64_t>(rows * cols);
  if (static_cast<uint64_t>(cols) % g != 0)
    return fake_quantize_fp4_block_ref(x, rows, cols, first, second, global_scale);  // its error
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return;
  uint8_t codes[256];
  std::vector<uint8_t> big;
  uint8_t* c = codes;
  if (g > sizeof codes) {
    big.resize(g);
    c = big.data();
  }
  for (uint64_t gi = 0; gi < n / g; ++gi) {
    float* v = x + gi * g;
    const float s = detail::fp4_act_group_scale(first, second, global_scale, group_amax(v, g));
    encode_group(v, g, s, c);
    for (uint64_t i = 0; i < g; ++i) v[i] = fp4_e2m1_to_float(c[i]) * s;
  }
}

}  // namespace qloom::quant
