// WeightOverlay: an engine::WeightSource that serves another source's
// tensors with some of them replaced (e.g. AWQ / SmoothQuant folded weights),
// so engine::Model::load can run a modified model without writing a
// checkpoint. Plus small helpers to read / write linears and norms of a
// source as fp32 (checkpoint naming: "<module>.weight", "<module>.bias").
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "qloom/engine/gemm.h"
#include "qloom/engine/weight_source.h"

namespace qloom::quant {

class WeightOverlay final : public engine::WeightSource {
 public:
  // `base` must outlive the overlay.
  explicit WeightOverlay(const engine::WeightSource& base) : base_(base) {}
  WeightOverlay(const WeightOverlay&) = delete;  // stack overlays: WeightOverlay(static_cast<const WeightSource&>(o))
  WeightOverlay& operator=(const WeightOverlay&) = delete;

  // Replaces (or adds) tensor `name`.
  void set(const std::string& name, engine::HostTensor t) { over_[name] = std::move(t); }
  void set_f32(const std::string& name, std::vector<int64_t> shape, std::span<const float> values);
  // Stores w (as F32, or BF16 when w is BF16) as "<module>.weight" and its
  // bias, if any, as "<module>.bias".
  void set_linear(const std::string& module, const engine::LinearWeight& w);

  bool contains(const std::string& name) const override;
  engine::HostTensor load(const std::string& name) const override;
  void release(const std::string& name) const override;

 private:
  const engine::WeightSource& base_;
  std::map<std::string, engine::HostTensor> over_;
};

// A tensor's values as fp32 (F32, BF16, F16 widen exactly); Error(kUnsupported)
// for other dtypes.
std::vector<float> host_tensor_f32(const engine::HostTensor& t, const std::string& name);

// "<module>.weight" ([out, in]) and "<module>.bias" (when the source has it)
// as an F32 LinearWeight. Error(kInvalidInput) for a weight that is not 2-D.
engine::LinearWeight load_linear_f32(const engine::WeightSource& src, const std::string& module);

}  // namespace qloom::quant
