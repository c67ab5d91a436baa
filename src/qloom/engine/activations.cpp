#include "qloom/engine/activations.h"

#include <algorithm>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/engine/vector_exp.h"

namespace qloom::engine {
namespace {

// SiLU has its own run<> below (exp over blocks with engine/vector_exp).
template <Activation A>
inline float apply(float x) {
  static_assert(A != Activation::kSilu, "SiLU runs through run<Activation::kSilu>");
  if constexpr (A == Activation::kGeluTanh) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
  } else if constexpr (A == Activation::kGeluErf) {
    return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
  } else {
    return x > 0.0f ? x : 0.0f;
  }
}

template <Activation A>
void run(const float* gate, int64_t gs, const float* up, int64_t us, float* out, int64_t b,
         int64_t e, int64_t n) {
  for (int64_t r = b; r < e; ++r) {
    const float* g = gate + r * gs;
    const float* u = up + r * us;
    float* o = out + r * n;
    for (int64_t i = 0; i < n; ++i) o[i] = apply<A>(g[i]) * u[i];
  }
}

// SiLU as x / (1 + exp(-x)) with engine/vector_exp (blocks of kBlock).
template <>
void run<Activation::kSilu>(const float* gate, int64_t gs, const float* up, int64_t us, float* out, int64_t b,
                            int64_t e, int64_t n) {
  constexpr int64_t kBlock = 256;
  float neg[kBlock], ex[kBlock];
  for (int64_t r = b; r < e; ++r) {
    const float* g = gate + r * gs;
    const float* u = up + r * us;
    float* o = out + r * n;
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      const int64_t m = std::min(kBlock, n - i0);
      for (int64_t i = 0; i < m; ++i) neg[i] = -g[i0 + i];
      exp_f32(neg, ex, m);
      for (int64_t i = 0; i < m; ++i) o[i0 + i] = g[i0 + i] / (1.0f + ex[i]) * u[i0 + i];
    }
  }
}

}  // namespace

Activation parse_activation(const std::string& name, const std::string& source) {
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") return Activation::kGeluTanh;
  if (name == "gelu") return Activation::kGeluErf;
  if (name == "relu") return Activation::kRelu;
  std::string msg = "activation \"";
  msg += name;
  msg += "\" is not supported by the engine (silu, gelu, gelu_pytorch_tanh, gelu_new, relu)";
  throw Error(ErrorKind::kUnsupported, source, "hidden_act", msg);
}

void gated_activation(Activation act, const float* gate, int64_t gate_stride, const float* up,
                      int64_t up_stride, float* out, int64_t rows, int64_t n, ThreadPool& pool) {
  auto body = [&](int64_t b, int64_t e) {
    switch (act) {
      case Activation::kSilu: run<Activation::kSilu>(gate, gate_stride, up, up_stride, out, b, e, n); break;
      case Activation::kGeluTanh: run<Activation::kGeluTanh>(gate, gate_stride, up, up_stride, out, b, e, n); break;
      case Activation::kGeluErf: run<Activation::kGeluErf>(gate, gate_stride, up, up_stride, out, b, e, n); break;
      case Activation::kRelu: run<Activation::kRelu>(gate, gate_stride, up, up_stride, out, b, e, n); break;
    }
  };
  if (rows * n >= 32768) pool.parallel_for(rows, body, std::max<int64_t>(1, 8192 / n));
  else body(0, rows);
}

}  // namespace qloom::engine
