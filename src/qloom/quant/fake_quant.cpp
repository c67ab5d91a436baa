#include "qloom/quant/fake_quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_fast.h"

namespace qloom::quant {
namespace {

void static_per_tensor(float* x, int64_t n, const QuantSpec& spec, const StaticQParams& q) {
  const float scale = q.scale;
  switch (spec.dtype) {
    case QDtype::kFp8E4M3:
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) continue;
        const float v = std::clamp(x[i] / scale, -448.0f, 448.0f);
        x[i] = fp8_e4m3_to_float(float_to_fp8_e4m3(v)) * scale;
      }
      return;
    case QDtype::kInt8:
    case QDtype::kUInt8: {
      const float qmin = spec.dtype == QDtype::kInt8 ? -128.0f : 0.0f;
      const float qmax = spec.dtype == QDtype::kInt8 ? 127.0f : 255.0f;
      const float inv = 1.0f / scale, zp = static_cast<float>(q.zero_point);
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) continue;
        const float code = std::clamp(std::nearbyint(x[i] * inv) + zp, qmin, qmax);
        x[i] = (code - zp) * scale;
      }
      return;
    }
    default:
      throw Error(ErrorKind::kUnsupported, "", quant_dtype_name(spec.dtype),
                  "static activation quantization is simulated for fp8_e4m3 and int8/uint8 only");
  }
}

}  // namespace

void fake_quantize_activation(float* x, int64_t rows, int64_t cols, const QuantSpec& spec,
                              const std::optional<StaticQParams>& qparams) {
  if (rows <= 0 || cols <= 0) return;
  if (!spec.is_dynamic) {
    if (spec.qscheme != QScheme::kPerTensor)
      throw Error(ErrorKind::kUnsupported, "", quant_dtype_name(spec.dtype),
                  "static activation quantization other than per_tensor",
                  "Quark exports static activation scales per tensor only");
    if (!qparams)
      throw Error(ErrorKind::kUsage, "", quant_dtype_name(spec.dtype), "static activation spec without a scale");
    static_per_tensor(x, rows * cols, spec, *qparams);
    return;
  }
  // AMD FP4 (e5m3 group scales): its own quantizer. A two-stage first stage
  // (nvfp4) needs its global scale: fp4_block.h, which says so.
  if (is_fp4_block_spec(spec)) {
    fake_quantize_fp4_block(x, rows, cols, spec, std::nullopt, 1.0f);
    return;
  }
  // Dynamic: per-token (per_channel) and MX per-group work row by row, like
  // a weight's output channels; per-tensor looks at the whole matrix.
  for (int64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(x[i])) return;  // a blown-up activation: leave it, the logits show it
  // Per-token scales (Quark ch_axis 1 of [batch, seq, hidden]) are one per row
  // here, which is what the weight quantizer calls ch_axis 0.
  QuantSpec rowwise = spec;
  if (rowwise.qscheme == QScheme::kPerChannel) rowwise.ch_axis = 0;
  // The optimized quantizer (bit-identical to quantize_ref's, tested): this
  // runs on every linear call of an evaluation. One thread: hooks may run
  // inside the engine's own parallel sections.
  const QuantizedTensor q = quantize_weight(x, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rowwise,
                                            DType::kF32, "activation", DType::kF32, 1);
  dequantize(q, x, 1);
}

}  // namespace qloom::quant
