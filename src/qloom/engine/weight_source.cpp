// plain_weight_source: the tensors of a model directory's safetensors, copied
// out of the mapping as stored (F32 / BF16 / F16).
#include <cstring>

#include "qloom/core/error.h"
#include "qloom/engine/weight_source.h"

namespace qloom::engine {
namespace {

class PlainWeightSource final : public WeightSource {
 public:
  explicit PlainWeightSource(const io::ModelDir& dir) : dir_(dir) {}

  bool contains(const std::string& name) const override {
    return dir_.weights().find(name) != nullptr;
  }

  HostTensor load(const std::string& name) const override {
    const io::WeightIndex& w = dir_.weights();
    io::TensorView view = w.view(name);  // kNotFound naming the tensor
    DType dt = view.dtype();
    if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16) {
      std::string msg = "tensor dtype ";
      msg += dtype_name(dt);
      msg += " is not supported by the engine's plain weight source (F32, BF16, F16)";
      throw Error(ErrorKind::kUnsupported, dir_.path().string(), name, msg,
                  "load quantized checkpoints through their own weight source");
    }
    HostTensor t;
    t.dtype = dt;
    for (uint64_t d : view.shape()) t.shape.push_back(static_cast<int64_t>(d));
    t.bytes.resize(view.nbytes());
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), view.data.data(), view.nbytes());
    return t;
  }

  void release(const std::string& name) const override { dir_.weights().release(name); }

 private:
  const io::ModelDir& dir_;
};

}  // namespace

std::unique_ptr<WeightSource> plain_weight_source(const io::ModelDir& dir) {
  return std::make_unique<PlainWeightSource>(dir);
}

}  // namespace qloom::engine
