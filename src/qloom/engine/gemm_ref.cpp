#include <cstring>

#include "qloom/core/convert.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/native/qlinear.h"

namespace qloom::engine {

float LinearWeight::at(int64_t r, int64_t c) const {
  const int64_t i = r * in + c;
  if (native) return native->dequantize()[static_cast<size_t>(i)];
  if (type == WeightType::kF32) return f32[static_cast<size_t>(i)];
  const uint32_t bits = static_cast<uint32_t>(bf16[static_cast<size_t>(i)]) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::vector<float> LinearWeight::values_f32() const {
  if (native) return native->dequantize();
  if (type == WeightType::kF32) return f32;
  std::vector<float> out(bf16.size());
  bf16_to_f32(bf16.data(), out.data(), out.size());
  return out;
}

size_t LinearWeight::bytes() const {
  return f32.size() * sizeof(float) + bf16.size() * sizeof(uint16_t) + bias.size() * sizeof(float) +
         (native ? native->bytes() : 0);
}

void linear_ref(const float* x, int64_t rows, const LinearWeight& w, float* y) {
  if (w.native) return w.native->run_ref(x, rows, w.bias.empty() ? nullptr : w.bias.data(), y);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < w.out; ++o) {
      double acc = w.bias.empty() ? 0.0 : w.bias[static_cast<size_t>(o)];
      for (int64_t c = 0; c < w.in; ++c) acc += static_cast<double>(x[r * w.in + c]) * w.at(o, c);
      y[r * w.out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace qloom::engine
