// Gated-MLP activations: out = act(gate) * up, by transformers' ACT2FN name.
#pragma once

#include <cstdint>
#include <string>

#include "qloom/core/thread_pool.h"

namespace qloom::engine {

enum class Activation { kSilu, kGeluTanh, kGeluErf, kRelu };

// "silu"/"swish", "gelu_pytorch_tanh"/"gelu_new"/"gelu_fast", "gelu", "relu".
// Throws kUnsupported naming the activation (file = source) otherwise.
Activation parse_activation(const std::string& name, const std::string& source);

// For r in rows, i in [0, n): out[r*n + i] = act(gate[r*gate_stride + i]) * up[r*up_stride + i].
void gated_activation(Activation act, const float* gate, int64_t gate_stride, const float* up,
                      int64_t up_stride, float* out, int64_t rows, int64_t n, ThreadPool& pool);

}  // namespace qloom::engine
