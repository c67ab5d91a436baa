// PLACEHOLDER until the kernel family lands: no combination is supported.
#include "qloom/engine/native/bf16dot_linear.h"

#include "qloom/core/error.h"

namespace qloom::engine::native {

bool bf16dot_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in) {
  (void)weight, (void)act, (void)group, (void)in;
  return false;
}

std::shared_ptr<const QuantLinear> make_bf16dot_linear(QuantLinearData data) {
  throw Error(ErrorKind::kUnsupported, "", data.name, "native kernels not built yet", "use --runtime simulate");
}

}  // namespace qloom::engine::native
