// --data_type bfloat16 for calibration: what qloom rounds to bf16 so that
// observed activations come out as they do in Quark run on a bf16 model
// (quantize_quark.py --data_type auto / bfloat16, its default), where torch
// keeps every activation tensor in bf16 (fp32 accumulation inside each op,
// the result rounded to bf16).
//
// qloom's engine computes in fp32; the calibration pass (quant/pipeline.h)
// rounds, round-to-nearest-even:
//   - each linear's input (what the linear reads and its observer sees),
//   - each linear's output (q/k/v before RoPE, o_proj, gate/up, down_proj),
//   - the attention probabilities (softmax output, as eager attention's
//     softmax(...).to(query.dtype)),
//   - the residual stream between decoder layers (each layer's output).
// Not rounded (fp32 where torch has bf16): RoPE, the attention scores, the
// residual add inside a layer, the RMSNorm output before its weight
// multiply, SiLU(gate)·up before down_proj reads it (rounded there as
// down_proj's input, once instead of twice). So scales agree with Quark's
// bf16 run more often than the fp32 path does, not always: the golden
// test (tests/real/quark013_golden_test.cpp) counts the differences.
#pragma once

#include <cstdint>

namespace qloom::quant {

// x[i] = bf16(x[i]) (RNE; NaN stays NaN, overflow to inf as torch's .to()).
void round_to_bf16(float* x, int64_t n);

}  // namespace qloom::quant
