#include "qloom/quant/weight_overlay.h"

#include <cstring>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"

namespace qloom::quant {

void WeightOverlay::set_f32(const std::string& name, std::vector<int64_t> shape, std::span<const float> values) {
  engine::HostTensor t;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  set(name, std::move(t));
}

void WeightOverlay::set_linear(const std::string& module, const engine::LinearWeight& w) {
  if (w.type == engine::WeightType::kF32) {
    set_f32(module + ".weight", {w.out, w.in}, w.f32);
  } else {
    engine::HostTensor t;
    t.dtype = DType::kBF16;
    t.shape = {w.out, w.in};
    t.bytes.resize(w.bf16.size() * sizeof(uint16_t));
    if (!w.bf16.empty()) std::memcpy(t.bytes.data(), w.bf16.data(), t.bytes.size());
    set(module + ".weight", std::move(t));
  }
  if (!w.bias.empty()) set_f32(module + ".bias", {w.out}, w.bias);
}

bool WeightOverlay::contains(const std::string& name) const {
  return over_.count(name) != 0 || base_.contains(name);
}

engine::HostTensor WeightOverlay::load(const std::string& name) const {
  auto it = over_.find(name);
  if (it != over_.end()) return it->second;
  return base_.load(name);
}

void WeightOverlay::release(const std::string& name) const {
  if (over_.count(name) == 0) base_.release(name);
}

std::vector<float> host_tensor_f32(const engine::HostTensor& t, const std::string& name) {
  size_t n = 1;
  for (int64_t d : t.shape) n *= static_cast<size_t>(d);
  std::vector<float> out(n);
  if (t.dtype == DType::kF32 && t.bytes.size() == n * 4) {
    if (n) std::memcpy(out.data(), t.bytes.data(), n * 4);
  } else if ((t.dtype == DType::kBF16 || t.dtype == DType::kF16) && t.bytes.size() == n * 2) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      out[i] = t.dtype == DType::kBF16 ? bf16_to_float(h) : f16_to_float(h);
    }
  } else {
    throw Error(ErrorKind::kUnsupported, "", name, "tensor is not F32 / BF16 / F16 of its shape's size");
  }
  return out;
}

engine::LinearWeight load_linear_f32(const engine::WeightSource& src, const std::string& module) {
  const std::string wname = module + ".weight";
  const engine::HostTensor t = src.load(wname);
  if (t.shape.size() != 2) throw Error(ErrorKind::kInvalidInput, "", wname, "a linear weight must be 2-D");
  engine::LinearWeight w;
  w.type = engine::WeightType::kF32;
  w.out = t.shape[0];
  w.in = t.shape[1];
  w.f32 = host_tensor_f32(t, wname);
  const std::string bname = module + ".bias";
  if (src.contains(bname)) w.bias = host_tensor_f32(src.load(bname), bname);
  return w;
}

}  // namespace qloom::quant
