#include "qloom/quant/smoothing.h"

#include <cmath>
#include <string>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

namespace qloom::quant {
namespace {

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, "", "scales", msg); }

void check_linear(const engine::LinearWeight& w) {
  const size_t n = static_cast<size_t>(w.out * w.in);
  const bool ok = w.type == engine::WeightType::kF32 ? w.f32.size() == n : w.bf16.size() == n;
  if (!ok || (!w.bias.empty() && w.bias.size() != static_cast<size_t>(w.out)))
    usage("a linear weight's buffers do not match its [out, in] shape");
}

// Applies f(value, row, col) -> new value to every element, in fp32, rounding
// back to bf16 for BF16 weights.
template <class F>
void update(engine::LinearWeight& w, int64_t row_begin, int64_t row_end, F f) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const size_t base = static_cast<size_t>(r * w.in);
    if (w.type == engine::WeightType::kF32) {
      for (int64_t c = 0; c < w.in; ++c) w.f32[base + c] = f(w.f32[base + c], r, c);
    } else {
      for (int64_t c = 0; c < w.in; ++c) {
        uint16_t& b = w.bf16[base + c];
        b = float_to_bf16(f(bf16_to_float(b), r, c));
      }
    }
  }
}

}  // namespace

void scale_linear_inputs(engine::LinearWeight& w, std::span<const float> s) {
  check_linear(w);
  if (static_cast<int64_t>(s.size()) != w.in) usage("scale count differs from the reader's in_features");
  update(w, 0, w.out, [&](float v, int64_t, int64_t c) { return v * s[static_cast<size_t>(c)]; });
}

void divide_linear_outputs(engine::LinearWeight& w, std::span<const float> s, int64_t row_offset) {
  check_linear(w);
  const int64_t n = static_cast<int64_t>(s.size());
  if (row_offset < 0 || row_offset + n > w.out) usage("scaled rows fall outside the producer's out_features");
  update(w, row_offset, row_offset + n,
         [&](float v, int64_t r, int64_t) { return v / s[static_cast<size_t>(r - row_offset)]; });
  if (!w.bias.empty()) {
    for (int64_t j = 0; j < n; ++j) w.bias[static_cast<size_t>(row_offset + j)] /= s[static_cast<size_t>(j)];
  }
}

void divide_norm_weight(std::vector<float>& w, std::span<const float> s, NormForm form) {
  if (w.size() != s.size()) usage("scale count differs from the norm's width");
  for (size_t j = 0; j < w.size(); ++j) {
    if (form == NormForm::kPlain) w[j] /= s[j];
    else w[j] = (1.0f + w[j]) / s[j] - 1.0f;
  }
}

void linear_to_f32(engine::LinearWeight& w) {
  if (w.type == engine::WeightType::kF32) return;
  w.f32 = w.values_f32();
  std::vector<uint16_t>().swap(w.bf16);
  w.type = engine::WeightType::kF32;
}

void fold_scales(const FoldTargets& t, std::span<const float> s) {
  for (size_t j = 0; j < s.size(); ++j) {
    if (!std::isfinite(s[j]) || !(s[j] > 0.0f)) {
      std::string msg = "scale ";
      msg += std::to_string(j);
      msg += " is ";
      msg += std::to_string(s[j]);
      msg += "; every scale must be finite and > 0";
      throw Error(ErrorKind::kInvalidInput, "", "scales", msg);
    }
  }
  if ((t.norm == nullptr) == (t.prev == nullptr)) usage("a fold needs exactly one producer (a norm or a linear)");
  if (t.readers.empty()) usage("a fold needs at least one reader linear");
  const int64_t n = static_cast<int64_t>(s.size());
  if (t.norm != nullptr && static_cast<int64_t>(t.norm->size()) != n) usage("scale count differs from the norm's width");
  if (t.prev != nullptr) {
    check_linear(*t.prev);
    if (t.prev_row_offset < 0 || t.prev_row_offset + n > t.prev->out)
      usage("scaled rows fall outside the producer's out_features");
  }
  for (const engine::LinearWeight* r : t.readers) {
    if (r == nullptr) usage("a reader linear is null");
    check_linear(*r);
    if (r->in != n) usage("scale count differs from a reader's in_features");
  }
  if (t.norm != nullptr) divide_norm_weight(*t.norm, s, t.norm_form);
  else divide_linear_outputs(*t.prev, s, t.prev_row_offset);
  for (engine::LinearWeight* r : t.readers) scale_linear_inputs(*r, s);
}

}  // namespace qloom::quant
