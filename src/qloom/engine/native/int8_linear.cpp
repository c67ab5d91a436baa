// PLACEHOLDER until the kernel family lands: no combination is supported.
#include "qloom/engine/native/int8_linear.h"

#include "qloom/core/error.h"

namespace qloom::engine::native {

bool int8_linear_supported(QActFormat act, int64_t group, int64_t in) {
  (void)act, (void)group, (void)in;
  return false;
}

std::shared_ptr<const QuantLinear> make_int8_linear(QuantLinearData data) {
  throw Error(ErrorKind::kUnsupported, "", data.name, "native kernels not built yet", "use --runtime simulate");
}

}  // namespace qloom::engine::native
