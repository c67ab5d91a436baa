#include "qloom/quant/progressive.h"

#include <string>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

bool is_int(QDtype d) { return d == QDtype::kInt8 || d == QDtype::kUInt8 || d == QDtype::kInt4 || d == QDtype::kUInt4; }

void check_pair(const QuantSpec& first, const QuantSpec& second, std::string_view tensor_name) {
  if (is_supported_progressive(first, second)) return;
  throw Error(ErrorKind::kUnsupported, "", std::string(tensor_name),
              std::string("progressive quantization ") + quant_dtype_name(first.dtype) + " -> " +
                  quant_dtype_name(second.dtype) + " is not implemented",
              "qloom implements Quark's int4_fp8 progression: static fp8_e4m3 per tensor, then static symmetric "
              "int per channel or per group");
}

// Stage 1's codes as the values Quark hands to stage 2 (.to(param_dtype):
// exact, every e4m3 value is a bf16 / f16 / f32).
std::vector<float> stage1_values(const QuantizedTensor& q1) {
  std::vector<float> v(q1.codes.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = fp8_e4m3_to_float(q1.codes[i]);
  return v;
}

template <class Quantize>
ProgressiveTensor run_progressive(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first, const QuantSpec& second,
                      std::string_view tensor_name, DType model_dtype, Quantize&& quantize) {
  check_pair(first, second, tensor_name);
  ProgressiveTensor t;
  t.first = quantize(w, first);
  const std::vector<float> v = stage1_values(t.first);
  t.first.codes.clear();
  t.first.codes.shrink_to_fit();
  t.second = quantize(v.data(), second);
  (void)rows, (void)cols, (void)model_dtype;
  return t;
}

}  // namespace

bool is_supported_progressive(const QuantSpec& first, const QuantSpec& second) {
  return first.dtype == QDtype::kFp8E4M3 && first.qscheme == QScheme::kPerTensor && !first.is_dynamic &&
         first.scale_format == ScaleFormat::kFloat && is_int(second.dtype) && second.symmetric &&
         !second.is_dynamic && !second.is_scale_quant &&
         (second.qscheme == QScheme::kPerChannel || second.qscheme == QScheme::kPerGroup);
}

ProgressiveTensor quantize_progressive_ref(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                           const QuantSpec& second, std::string_view tensor_name, DType model_dtype) {
  return run_progressive(w, rows, cols, first, second, tensor_name, model_dtype, [&](const float* x, const QuantSpec& s) {
    return quantize_weight_ref(x, rows, cols, s, quark_scale_dtype(s, model_dtype), tensor_name, model_dtype);
  });
}

ProgressiveTensor quantize_progressive(const float* w, uint64_t rows, uint64_t cols, const QuantSpec& first,
                                       const QuantSpec& second, std::string_view tensor_name, DType model_dtype,
                                       unsigned threads) {
  return run_progressive(w, rows, cols, first, second, tensor_name, model_dtype, [&](const float* x, const QuantSpec& s) {
    return quantize_weight(x, rows, cols, s, quark_scale_dtype(s, model_dtype), tensor_name, model_dtype, threads);
  });
}

std::vector<float> dequantize_progressive(const ProgressiveTensor& t, unsigned threads) {
  std::vector<float> out = dequantize(t.second, threads);
  const float s1 = t.first.scales.at(0);
  for (float& x : out) x *= s1;
  return out;
}

}  // namespace qloom::quant
