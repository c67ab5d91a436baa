// Issue 30 item 5: a NaN or inf calibration statistic is an error naming the
// module — the amax observations (static scales, and the AWQ / SmoothQuant /
// AutoSmoothQuant input statistics through the same check) and the GPTQ,
// GPTAQ and Qronos statistics matrices (an H with NaN used to make GPTQ fall
// back to RTN silently).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "qloom/quant/activation_observer.h"
#include "qloom/quant/gptaq.h"
#include "qloom/quant/gptq.h"
#include "qloom/quant/qronos.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using test::catch_error;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(NonFiniteStats, ObservedAmaxIsTheMaxOfFiniteValues) {
  const std::vector<float> x = {0.5f, -3.0f, 2.0f};
  EXPECT_EQ(observed_amax("m", "input", x.data(), 3), 3.0f);
  EXPECT_EQ(observed_amax("m", "input", x.data(), 0), 0.0f);
}

TEST(NonFiniteStats, ObservedAmaxNamesTheModuleOfANanOrInf) {
  for (const float bad : {kNaN, -kInf, kInf}) {
    const std::vector<float> x = {1.0f, bad, 2.0f};
    const Error e = catch_error([&] { (void)observed_amax("model.layers.3.mlp.down_proj", "input", x.data(), 3); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.item(), "model.layers.3.mlp.down_proj");
    EXPECT_NE(e.message().find("the input of model.layers.3.mlp.down_proj holds NaN or inf"), std::string::npos)
        << e.message();
  }
}

QuantSpec int4_per_channel() {
  QuantSpec s;
  s.dtype = QDtype::kInt4;
  s.qscheme = QScheme::kPerChannel;
  s.symmetric = true;
  s.ch_axis = 0;
  return s;
}

std::vector<double> identity(size_t n) {
  std::vector<double> h(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) h[i * n + i] = 1.0;
  return h;
}

TEST(NonFiniteStats, GptqFamilyRefusesANonFiniteStatistic) {
  const size_t rows = 8, cols = 16;
  std::vector<float> w(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i));
  std::vector<double> bad = identity(cols);
  bad[3 * cols + 5] = std::nan("");
  const std::string t = "model.layers.1.mlp.up_proj.weight";
  const QuantSpec spec = int4_per_channel();
  // Finite statistics quantize.
  EXPECT_NO_THROW((void)gptq_quantize(w.data(), rows, cols, identity(cols), spec, DType::kF32, t, DType::kF32));
  const Error g = catch_error(
      [&] { (void)gptq_quantize(w.data(), rows, cols, bad, spec, DType::kF32, t, DType::kF32); });
  EXPECT_EQ(g.item(), t);
  EXPECT_NE(g.message().find("the GPTQ Hessian of " + t + " holds NaN or inf"), std::string::npos) << g.message();
  const Error a = catch_error([&] {
    (void)gptaq_quantize(w.data(), rows, cols, identity(cols), bad, spec, DType::kF32, t, DType::kF32);
  });
  EXPECT_EQ(a.item(), t);
  EXPECT_NE(a.message().find("gptaq statistics matrix"), std::string::npos) << a.message();
  const Error q = catch_error([&] {
    (void)qronos_quantize(w.data(), rows, cols, bad, identity(cols), spec, DType::kF32, t, DType::kF32);
  });
  EXPECT_EQ(q.item(), t);
  EXPECT_NE(q.message().find("qronos statistics matrix"), std::string::npos) << q.message();
}

}  // namespace
}  // namespace qloom::quant
