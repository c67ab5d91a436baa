#include "qloom/export/tensor_lookup.h"

#include "qloom/core/error.h"
#include "qloom/core/format.h"

namespace qloom::exporter {

io::TensorView need_tensor(const TensorLookup& lookup, const std::string& name) {
  auto v = lookup(name);
  if (!v)
    throw Error(ErrorKind::kNotFound, "", name, "tensor not found in the checkpoint",
                "the checkpoint is incomplete or was not written with this scheme");
  return *v;
}

void tensor_layout_error(const std::string& name, const std::string& msg, const std::string& what) {
  throw Error(ErrorKind::kInvalidInput, "", name, msg,
              "the tensor does not have the layout Quark's hf_format export gives " + what);
}

void expect_tensor_layout(const io::TensorView& v, DType dt, const std::vector<uint64_t>& shape) {
  if (v.dtype() != dt)
    tensor_layout_error(v.name(), "expected dtype " + std::string(dtype_name(dt)) + ", got " +
                                      std::string(dtype_name(v.dtype())));
  if (v.shape() != shape)
    tensor_layout_error(v.name(), "expected shape " + format_shape(shape) + ", got " + format_shape(v.shape()));
}

}  // namespace qloom::exporter
