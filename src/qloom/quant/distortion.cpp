#include "qloom/quant/distortion.h"

#include <cmath>
#include <limits>

namespace qloom::quant {

DistortionStats measure_distortion(const float* ref, const float* approx, uint64_t n) {
  DistortionStats s;
  s.n = n;
  double sig = 0, err = 0, max_err = 0;
  bool nan = false;
  for (uint64_t i = 0; i < n; ++i) {
    const double r = ref[i], a = approx[i];
    const double d = r - a;
    if (std::isnan(d)) nan = true;
    sig += r * r;
    err += d * d;
    max_err = std::fmax(max_err, std::fabs(d));
    if ((r > 0 && a < 0) || (r < 0 && a > 0)) ++s.sign_flips;
    if (r != 0 && a == 0) ++s.rounded_to_zero;
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  if (nan) {
    s.mse = s.sqnr_db = s.rel_l2 = s.max_abs_err = kNan;
    return s;
  }
  s.max_abs_err = max_err;
  s.mse = n ? err / static_cast<double>(n) : 0.0;
  if (err == 0) {
    s.sqnr_db = kInf;
    s.rel_l2 = 0;
  } else if (sig == 0) {
    s.sqnr_db = -kInf;
    s.rel_l2 = kInf;
  } else {
    s.sqnr_db = 10.0 * std::log10(sig / err);
    s.rel_l2 = std::sqrt(err / sig);
  }
  return s;
}

}  // namespace qloom::quant
