// Deterministic test weights for the quantizer tests: the same numbers on
// every platform (own generator, no std::*_distribution, whose algorithms
// are implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "qloom/core/float_codec.h"

namespace qloom::quant::testgen {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  double student_t3() {  // Student-t with 3 degrees of freedom
    double chi2 = 0;
    for (int i = 0; i < 3; ++i) {
      const double z = normal();
      chi2 += z * z;
    }
    return normal() / std::sqrt(chi2 / 3.0);
  }
  double laplace() {
    const double u = uniform() - 0.5;
    return (u < 0 ? 1.0 : -1.0) * std::log(1.0 - 2.0 * std::fabs(u));
  }

 private:
  uint64_t s_;
};

enum class Dist { kGaussian, kStudentT3, kLaplace };

inline std::vector<float> make_weights(uint64_t n, Dist d, uint64_t seed, float scale = 0.02f) {
  Rng r(seed);
  std::vector<float> w(n);
  for (auto& x : w) {
    const double v = d == Dist::kGaussian ? r.normal() : d == Dist::kStudentT3 ? r.student_t3() : r.laplace();
    x = static_cast<float>(v * scale);
  }
  return w;
}

// Rounds every element to bf16 (weights as they come from a bf16 checkpoint).
inline void to_bf16_grid(std::vector<float>& w) {
  for (auto& x : w) x = bf16_to_float(float_to_bf16(x));
}
inline void to_f16_grid(std::vector<float>& w) {
  for (auto& x : w) x = f16_to_float(float_to_f16(x));
}

}  // namespace qloom::quant::testgen
