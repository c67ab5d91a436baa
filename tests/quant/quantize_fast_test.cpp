// The optimized quantizer against the reference: bit-exact codes, scales and
// zero points for every scheme, model dtype and thread count, on Gaussian,
// heavy-tailed (Student-t 3, Laplace), all-zero rows and groups, a single huge
// outlier, float denormals, exact rounding ties, and widths that are not a
// multiple of the SIMD width; the same errors; and the fast dequantizer
// against the reference one. The whole suite runs again in a child process
// with QLOOM_MAX_ISA=scalar for the portable path.
#include "qloom/quant/quantize_fast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/weight_gen.h"
#include "support/expect_error.h"
#include "support/subprocess.h"

namespace qloom::quant {
namespace {

using qloom::test::catch_error;
using testgen::Dist;
using testgen::make_weights;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Compares everything; returns a description of the first difference, or "".
std::string diff(const QuantizedTensor& a, const QuantizedTensor& b) {
  if (a.shape != b.shape) return "shape";
  if (a.scale_dtype != b.scale_dtype) return "scale_dtype";
  if (!same_bits(a.scales, b.scales)) {
    for (size_t i = 0; i < std::min(a.scales.size(), b.scales.size()); ++i)
      if (std::memcmp(&a.scales[i], &b.scales[i], 4))
        return "scale " + std::to_string(i) + ": " + std::to_string(a.scales[i]) + " vs " + std::to_string(b.scales[i]);
    return "scale count";
  }
  if (a.zero_points != b.zero_points) return "zero points";
  if (a.codes.size() != b.codes.size()) return "code count";
  for (size_t i = 0; i < a.codes.size(); ++i)
    if (a.codes[i] != b.codes[i])
      return "code " + std::to_string(i) + ": " + std::to_string(a.codes[i]) + " vs " + std::to_string(b.codes[i]);
  return "";
}

void to_grid(std::vector<float>& w, DType md) {
  if (md == DType::kBF16) testgen::to_bf16_grid(w);
  if (md == DType::kF16) testgen::to_f16_grid(w);
}

// The schemes this quantizer handles; the fp4 block schemes (nvfp4, amdfp4*)
// have their own, tested in fp4_block_test.cpp.
const std::vector<std::string>& all_schemes() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (const auto& n : scheme_names())
      if (!is_fp4_block_spec(*get_scheme(n).linear.weight)) out.push_back(n);
    return out;
  }();
  return v;
}

// Widths valid for a scheme: per-group / MX need multiples of the group.
std::vector<uint64_t> widths_for(const QuantSpec& s) {
  if (s.qscheme == QScheme::kPerGroup) {
    const uint64_t g = static_cast<uint64_t>(s.group_size);
    return {g, 3 * g, 5 * g, 1024};
  }
  return {1, 7, 37, 100, 257, 1024};
}

void check_case(const std::vector<float>& w, uint64_t rows, uint64_t cols, const std::string& scheme, DType md,
                DType sd, const std::string& label) {
  const QuantSpec spec = *get_scheme(scheme).linear.weight;
  SCOPED_TRACE(label + " " + scheme + " " + std::string(dtype_name(md)) + "/" + std::string(dtype_name(sd)) +
               " [" + std::to_string(rows) + "," + std::to_string(cols) + "]");
  const QuantizedTensor ref = quantize_weight_ref(w.data(), rows, cols, spec, sd, "w", md);
  for (unsigned threads : {1u, 2u, 3u, 7u, 0u}) {
    const QuantizedTensor fast = quantize_weight(w.data(), rows, cols, spec, sd, "w", md, threads);
    const std::string d = diff(ref, fast);
    ASSERT_EQ(d, "") << "threads " << threads;
  }
  // The fast dequantizer reads the codes exactly as the reference does.
  ASSERT_TRUE(same_bits(dequantize_ref(ref), dequantize(ref, 3)));
}

struct Model {
  DType md;
  bool quark_scale;  // scale dtype as Quark stores it, else f32
};

void check_all(const std::vector<float>& base, uint64_t rows, uint64_t cols, const std::string& scheme,
               const std::string& label) {
  for (DType md : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<float> w = base;
    to_grid(w, md);
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    DType sd = quark_scale_dtype(spec, md);
    if (sd == DType::kE8M0) sd = DType::kF32;
    check_case(w, rows, cols, scheme, md, sd, label);
    if (sd != DType::kF32) check_case(w, rows, cols, scheme, md, DType::kF32, label);
  }
}

TEST(QuantizeFast, ReportsIsa) {
  std::printf("quantizer ISA: %s\n", isa_supported(Isa::kAvx2) ? "avx2" : "scalar");
}

TEST(QuantizeFast, BitExactRandomDistributions) {
  uint64_t seed = 1;
  for (const auto& scheme : all_schemes()) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    for (uint64_t cols : widths_for(spec)) {
      const uint64_t rows = cols >= 1024 ? 9 : 13;
      for (Dist d : {Dist::kGaussian, Dist::kStudentT3, Dist::kLaplace}) {
        const auto w = make_weights(rows * cols, d, seed++);
        check_all(w, rows, cols, scheme, "dist" + std::to_string(static_cast<int>(d)));
      }
    }
  }
}

TEST(QuantizeFast, BitExactZerosOutliersDenormals) {
  uint64_t seed = 100;
  for (const auto& scheme : all_schemes()) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    for (uint64_t cols : widths_for(spec)) {
      const uint64_t rows = 6;
      auto w = make_weights(rows * cols, Dist::kGaussian, seed++);
      // Row 1 all zero; the first half of row 2 zero (whole groups for
      // group-wise schemes, part of a row otherwise); -0.0 in row 3.
      for (uint64_t c = 0; c < cols; ++c) w[1 * cols + c] = 0.0f;
      for (uint64_t c = 0; c < cols / 2; ++c) w[2 * cols + c] = 0.0f;
      w[3 * cols] = -0.0f;
      // Row 4: one huge outlier (finite in f16 too) among tiny values.
      w[4 * cols + cols / 3] = 60000.0f;
      // Row 5: float denormals (flushed to zero on the bf16 / f16 grids, fine).
      testgen::Rng r(seed);
      for (uint64_t c = 0; c < cols; ++c)
        w[5 * cols + c] = static_cast<float>((r.uniform() - 0.5) * 1e-39);
      check_all(w, rows, cols, scheme, "special");
      // An all-zero tensor.
      std::vector<float> z(rows * cols, 0.0f);
      check_all(z, rows, cols, scheme, "zeros");
    }
  }
}

TEST(QuantizeFast, BitExactRoundingTies) {
  // Values sitting exactly on the rounding midpoints of every format, scaled
  // so that the group's scale is a power of two (so x / scale is exact).
  for (const auto& scheme : all_schemes()) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    for (uint64_t cols : widths_for(spec)) {
      const uint64_t rows = 4;
      const uint64_t g = spec.qscheme == QScheme::kPerGroup ? static_cast<uint64_t>(spec.group_size) : cols;
      std::vector<float> w(rows * cols);
      for (uint64_t r = 0; r < rows; ++r) {
        const float unit = std::ldexp(1.0f, -static_cast<int>(r) - 3);
        for (uint64_t c = 0; c < cols; ++c) {
          float v;
          if (spec.dtype == QDtype::kFp4) {
            static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
            v = mids[c % 8] * unit;
          } else if (spec.dtype == QDtype::kFp8E4M3) {
            // Midpoints between neighbouring e4m3 values, from 2^-9 up.
            v = (fp8_e4m3_to_float(static_cast<uint8_t>(1 + (c * 7) % 125)) +
                 fp8_e4m3_to_float(static_cast<uint8_t>(2 + (c * 7) % 125))) * 0.5f * unit;
          } else {
            v = (static_cast<float>(c % 15) - 7.0f + 0.5f) * unit;  // k + 0.5
          }
          if (c % 3 == 1) v = -v;
          // The group's extremes make its scale exactly `unit`: amax 448 (fp8),
          // 6 = 1.5 * 2^2 (MX: e = 2 - 2 = 0), 127.5 (int8), +-7.5 (int4; uint4
          // gets range 15 and zero point 8).
          const float lead = spec.dtype == QDtype::kInt8      ? 127.5f
                             : spec.dtype == QDtype::kFp8E4M3 ? 448.0f
                             : spec.dtype == QDtype::kFp4     ? 6.0f
                                                              : 7.5f;
          if (c % g == 0) v = lead * unit;
          if (c % g == 1 && g > 1 && spec.dtype != QDtype::kFp4 && spec.dtype != QDtype::kFp8E4M3) v = -lead * unit;
          w[r * cols + c] = v;
        }
      }
      check_all(w, rows, cols, scheme, "ties");
    }
  }
}

TEST(QuantizeFast, LargeMatrixAllThreads) {
  const uint64_t rows = 256, cols = 4096;
  auto w = make_weights(rows * cols, Dist::kStudentT3, 7);
  testgen::to_bf16_grid(w);
  for (const char* scheme : {"fp8", "int4_wo_128", "uint4_wo_128", "mxfp4", "int8", "ptpc_fp8"}) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    DType sd = quark_scale_dtype(spec, DType::kBF16);
    if (sd == DType::kE8M0) sd = DType::kF32;
    check_case(w, rows, cols, scheme, DType::kBF16, sd, "large");
  }
}

TEST(QuantizeFast, SameErrorsAsTheReference) {
  // Big enough to be split across threads (chunks of 64 rows with 4).
  const uint64_t rows = 256, cols = 1024;
  auto w = make_weights(rows * cols, Dist::kGaussian, 3);
  w[200 * cols + 3] = std::numeric_limits<float>::quiet_NaN();
  w[40 * cols + 17] = std::numeric_limits<float>::infinity();
  for (const auto& scheme : all_schemes()) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    Error want = catch_error([&] { quantize_weight_ref(w.data(), rows, cols, spec, DType::kF32, "m.w"); });
    for (unsigned threads : {1u, 4u, 16u}) {
      Error got = catch_error([&] { quantize_weight(w.data(), rows, cols, spec, DType::kF32, "m.w", DType::kF32, threads); });
      EXPECT_EQ(got.kind(), want.kind()) << scheme;
      EXPECT_EQ(got.item(), want.item());
      EXPECT_EQ(got.message(), want.message()) << scheme;
      EXPECT_NE(got.message().find("[40, 17] is +inf"), std::string::npos) << got.message();
    }
  }
  std::vector<float> odd(3 * 100, 1.0f);
  const QuantSpec g32 = *get_scheme("int4_wo_32").linear.weight;
  Error want = catch_error([&] { quantize_weight_ref(odd.data(), 3, 100, g32, DType::kF32, "x"); });
  Error got = catch_error([&] { quantize_weight(odd.data(), 3, 100, g32, DType::kF32, "x"); });
  EXPECT_EQ(got.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(got.message(), want.message());
  EXPECT_EQ(got.remedy(), want.remedy());
  // Scale overflow in f16 storage: the first group in row order is reported.
  const uint64_t brows = 4096;
  std::vector<float> big(brows * 32, 1.0f);
  big[20 * 32] = 1e6f;
  big[3000 * 32] = 2e6f;
  const QuantSpec pc = *get_scheme("int4_wo_per_channel").linear.weight;
  want = catch_error([&] { quantize_weight_ref(big.data(), brows, 32, pc, DType::kF16, "x"); });
  EXPECT_NE(want.message().find("133333"), std::string::npos) << want.message();  // 1e6 / 7.5
  for (unsigned threads : {1u, 2u, 8u}) {
    got = catch_error([&] { quantize_weight(big.data(), brows, 32, pc, DType::kF16, "x", DType::kF32, threads); });
    EXPECT_EQ(got.message(), want.message());
  }
}

TEST(QuantizeFast, DequantizeMatchesReference) {
  for (const auto& scheme : all_schemes()) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    const uint64_t rows = 40, cols = 512;
    const auto w = make_weights(rows * cols, Dist::kLaplace, 11);
    const QuantizedTensor t = quantize_weight(w.data(), rows, cols, spec, DType::kF32, "w");
    const auto a = dequantize_ref(t);
    for (unsigned threads : {1u, 5u, 0u}) EXPECT_TRUE(same_bits(a, dequantize(t, threads))) << scheme;
  }
}

TEST(QuantizeFast, ScalarPathInAChildProcess) {
  if (std::getenv("QLOOM_QUANT_TEST_CHILD")) GTEST_SKIP() << "already the child";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto r = qloom::test::run_command({"env", "QLOOM_MAX_ISA=scalar", "QLOOM_QUANT_TEST_CHILD=1", self,
                                    "--gtest_filter=QuantizeFast.*-QuantizeFast.ScalarPathInAChildProcess"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("quantizer ISA: scalar"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qloom::quant
