// The unquantized float tensors of the decoder layer a LayerRunner holds,
// addressed by checkpoint name, for stages that change them (AWQ /
// SmoothQuant fold scales into norms and producer linears) and for the
// pipeline, which hands their final values to the exporter.
//
//   "model.layers.3.input_layernorm.weight"   a norm (also post_attention_,
//                                             pre_feedforward_, post_feedforward_
//                                             layernorm, self_attn.q_norm / k_norm)
//   "model.layers.3.self_attn.v_proj.weight"  a linear's weight
//   "model.layers.3.self_attn.v_proj.bias"    a linear's bias
//
// Norms are held in engine form (gemma family: 1 + w); layer_tensor_value
// returns the checkpoint form (w), round_layer_tensor rounds the held value
// so that its checkpoint form is exactly representable in the checkpoint's
// dtype: what the exporter writes is then what later passes computed with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/engine/layer_runner.h"

namespace qloom::quant {

// A float tensor in checkpoint form (row-major), values exactly
// representable in the checkpoint's dtype once rounded (round_layer_tensor).
struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct LayerTensorRef {
  std::vector<float>* norm = nullptr;       // engine form
  bool gemma = false;                       // the checkpoint stores w, the engine holds 1 + w
  engine::LinearWeight* linear = nullptr;   // set for a linear's weight or bias
  std::string module;                       // the linear's module name
  bool bias = false;                        // the linear's bias rather than its weight
};

// The tensor `name` of the loaded layer. Throws Error(kNotFound) naming it
// when the layer has no such norm / linear (or the linear has no bias),
// Error(kUsage) when no layer is loaded.
LayerTensorRef find_layer_tensor(engine::LayerRunner& runner, const std::string& name);

// Its current value in checkpoint form.
FloatTensor layer_tensor_value(const LayerTensorRef& t);

// Rounds the held value (in place) so that its checkpoint form is
// representable in `dtype` (kBF16 / kF16: round to nearest even; kF32: no-op).
// A BF16 linear weight is already bf16: only F32 weights are rounded.
void round_layer_tensor(const LayerTensorRef& t, DType dtype);

}  // namespace qloom::quant
