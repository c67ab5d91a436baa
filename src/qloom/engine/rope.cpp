#include "qloom/engine/rope.h"

#include <cmath>
#include <numbers>

namespace qloom::engine {

Rope::Rope(const model::ModelConfig::Rope& p, int64_t rotary_dim) : rotary_dim_(rotary_dim) {
  const int64_t half = rotary_dim / 2;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // HF: 1 / base ** (arange(0, dim, 2).float() / dim), all in fp32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    float f = static_cast<float>(1.0 / std::pow(p.theta, static_cast<double>(expo)));
    if (p.type == "linear") {
      f = static_cast<float>(f / p.factor);
    } else if (p.type == "llama3") {
      const double old_ctx = static_cast<double>(p.original_max_position_embeddings);
      const double low_wavelen = old_ctx / p.low_freq_factor;
      const double high_wavelen = old_ctx / p.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / f;
      double g = wavelen > low_wavelen ? f / p.factor : f;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        const double smooth = (old_ctx / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        g = (1.0 - smooth) * g / p.factor + smooth * g;
      }
      f = static_cast<float>(g);
    }
    inv_freq_[static_cast<size_t>(i)] = f;
  }
}

void Rope::tables(int64_t pos0, int64_t n, std::vector<float>& cos, std::vector<float>& sin) const {
  const int64_t half = rotary_dim_ / 2;
  cos.resize(static_cast<size_t>(n * half));
  sin.resize(static_cast<size_t>(n * half));
  for (int64_t t = 0; t < n; ++t) {
    const float pos = static_cast<float>(pos0 + t);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq_[static_cast<size_t>(i)];  // fp32 product, as HF
      cos[static_cast<size_t>(t * half + i)] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin[static_cast<size_t>(t * half + i)] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void Rope::apply(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin) const {
  const int64_t half = rotary_dim_ / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

}  // namespace qloom::engine
