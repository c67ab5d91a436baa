// WeightSource: where the engine gets each named tensor. The default reads
// a model directory's safetensors (F32/BF16/F16 as stored); layers above the
// engine (eval, quant) supply others, e.g. one that dequantizes a Quark
// checkpoint's packed weights, so the engine knows nothing of quantization.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qloom/core/dtype.h"
#include "qloom/engine/native/qlinear.h"
#include "qloom/io/model_dir.h"

namespace qloom::engine {

struct HostTensor {
  DType dtype = DType::kF32;  // kF32, kBF16 or kF16
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool contains(const std::string& name) const = 0;
  // Throws qloom::Error naming the tensor when it is absent or has a dtype
  // the source cannot turn into F32/BF16/F16.
  virtual HostTensor load(const std::string& name) const = 0;
  // A linear (module = checkpoint name minus ".weight") the source hands over
  // in quantized form for a native kernel (native/qlinear.h), or nullopt to
  // have its ".weight" loaded as F32/BF16. The engine builds the kernel with
  // make_quant_linear; the bias (if any) still comes from load().
  virtual std::optional<QuantLinearData> load_native(const std::string& /*module*/) const { return std::nullopt; }
  // Called once the engine holds its own copy, so a mapped source can drop pages.
  virtual void release(const std::string& /*name*/) const {}
};

// Reads the tensors of `dir` as stored (F32, BF16, F16; other dtypes throw
// kUnsupported naming the tensor). `dir` must outlive the source.
std::unique_ptr<WeightSource> plain_weight_source(const io::ModelDir& dir);

}  // namespace qloom::engine
