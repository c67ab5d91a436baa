// linear() and every explicit GemmPath (gemm_dispatch.h) against linear_ref().
//
// Tolerance. linear_ref accumulates in double, so it is the exact dot product
// up to one final rounding. Every optimized path forms the same n = in + 1
// terms (bias included) with fp32 products and fp32 sums in some order (FMA
// chains, SIMD lanes, blocked K, OpenBLAS's own order). The classic bound for
// any such summation is |y - exact| <= γ_n · Σ|terms|, γ_n = n·u/(1 - n·u),
// u = 2^-24, plus one rounding of the reference itself (u·|ref|). We check
//   |y - ref| <= 2·(in + 2)·u · (Σ_i |x_i·w_i| + |b|) + u·|ref| + (in + 2)·2^-149
// (the factor 2 covers γ's denominator and the double-rounding of the
// reference; the last term covers gradual underflow, ≤ 2^-150 per operation,
// for the denormal cases). The max observed error relative to Σ|terms| is
// printed; it is orders of magnitude below the bound on these shapes.
//
// Non-finite results: where the reference is NaN the path must give NaN;
// where it is ±inf the path must give the same inf. (That holds when no finite
// partial sum overflows fp32 but not double; the cases below avoid that, and
// the overflow case is built so both overflow to the same inf.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/gemm.h"
#include "qloom/engine/gemm_dispatch.h"
#include "support/subprocess.h"

namespace qloom::engine {
namespace {

constexpr double kU = 0x1.0p-24;

const std::vector<GemmPath>& all_paths() {
  static const std::vector<GemmPath> p = {GemmPath::kAuto,       GemmPath::kScalar,
                                          GemmPath::kAvx2Gemv,   GemmPath::kAvx2Gemm,
                                          GemmPath::kAvx512Gemv, GemmPath::kAvx512Gemm,
                                          GemmPath::kBlas};
  return p;
}

std::vector<GemmPath> available_paths() {
  std::vector<GemmPath> out;
  for (GemmPath p : all_paths())
    if (gemm_path_available(p)) out.push_back(p);
  return out;
}

LinearWeight make_weight(WeightType type, int64_t out, int64_t in, bool bias, std::mt19937& rng,
                         float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  LinearWeight w;
  w.type = type;
  w.out = out;
  w.in = in;
  std::vector<float> v(static_cast<size_t>(out * in));
  for (float& f : v) f = dist(rng);
  if (type == WeightType::kF32) {
    w.f32 = v;
  } else {
    w.bf16.resize(v.size());
    f32_to_bf16(v.data(), w.bf16.data(), v.size());
  }
  if (bias) {
    w.bias.resize(static_cast<size_t>(out));
    for (float& b : w.bias) b = dist(rng);
  }
  return w;
}

std::vector<float> random_x(int64_t rows, int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (float& f : x) f = dist(rng);
  return x;
}

double g_max_rel_err = 0.0;  // max |y - ref| / (Σ|x·w| + |b|) over finite results

// Runs every available path at 1 and 2 threads and checks against linear_ref.
void check_all_paths(const std::vector<float>& x, int64_t rows, const LinearWeight& w,
                     const std::string& what) {
  std::vector<float> ref(static_cast<size_t>(rows * w.out));
  linear_ref(x.data(), rows, w, ref.data());
  std::vector<double> mag(ref.size());  // Σ|x_i·w_i| + |b|
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < w.out; ++o) {
      double s = w.bias.empty() ? 0.0 : std::fabs(w.bias[static_cast<size_t>(o)]);
      for (int64_t c = 0; c < w.in; ++c) s += std::fabs(double{x[r * w.in + c]} * w.at(o, c));
      mag[r * w.out + o] = s;
    }
  for (unsigned threads : {1u, 2u}) {
    ThreadPool pool(threads);
    for (GemmPath path : available_paths()) {
      std::vector<float> y(ref.size(), -12345.0f);
      linear_path(path, x.data(), rows, w, y.data(), pool);
      int failures = 0;
      for (size_t i = 0; i < y.size() && failures < 5; ++i) {
        const std::string where = what + " path=" + gemm_path_name(path) + " threads=" +
                                  std::to_string(threads) + " row=" + std::to_string(i / w.out) +
                                  " col=" + std::to_string(i % w.out);
        if (std::isnan(ref[i])) {
          if (!std::isnan(y[i])) ++failures, ADD_FAILURE() << where << ": want NaN, got " << y[i];
        } else if (std::isinf(ref[i])) {
          if (y[i] != ref[i]) ++failures, ADD_FAILURE() << where << ": want " << ref[i] << ", got " << y[i];
        } else {
          const double err = std::fabs(double{y[i]} - ref[i]);
          const double tol = 2.0 * (w.in + 2) * kU * mag[i] + kU * std::fabs(ref[i]) +
                             (w.in + 2) * 0x1.0p-149;
          if (!(err <= tol)) ++failures, ADD_FAILURE() << where << ": got " << y[i] << " want " << ref[i]
                                                       << " err " << err << " > tol " << tol;
          if (mag[i] > 0 && std::isfinite(mag[i])) g_max_rel_err = std::max(g_max_rel_err, err / mag[i]);
        }
      }
    }
  }
}

const char* type_name(WeightType t) { return t == WeightType::kF32 ? "f32" : "bf16"; }

TEST(GemmTest, RandomShapesMatchReference) {
  struct Shape {
    int64_t in, out;
  };
  // Odd sizes (not multiples of 8/16/32/64), K beyond one packed block (128),
  // a single column, and in = 0 (y = bias).
  const std::vector<Shape> shapes = {{1, 1},    {7, 5},    {33, 17},  {64, 96},  {100, 70},
                                     {129, 65}, {300, 257}, {17, 1},  {0, 9},    {257, 33}};
  const std::vector<int64_t> rows_list = {1, 2, 3, 17, 64, 130};
  std::mt19937 rng(20240611);
  g_max_rel_err = 0.0;
  for (const Shape& s : shapes)
    for (int64_t rows : rows_list)
      for (WeightType type : {WeightType::kF32, WeightType::kBF16})
        for (bool bias : {false, true}) {
          const LinearWeight w = make_weight(type, s.out, s.in, bias, rng);
          const std::vector<float> x = random_x(rows, s.in, rng);
          check_all_paths(x, rows, w,
                          "in=" + std::to_string(s.in) + " out=" + std::to_string(s.out) + " rows=" +
                              std::to_string(rows) + " " + type_name(type) + (bias ? " bias" : ""));
        }
  // More rows than one packed row block (240) and columns over several panels.
  const LinearWeight w = make_weight(WeightType::kBF16, 100, 40, true, rng);
  check_all_paths(random_x(250, 40, rng), 250, w, "rows=250");
  std::printf("[ GemmTest ] max |y - ref| / sum|x*w| = %.3g (paths:", g_max_rel_err);
  for (GemmPath p : available_paths()) std::printf(" %s", gemm_path_name(p));
  std::printf("; best_isa %s)\n", isa_name(best_isa()));
}

// A NaN anywhere in a row of x makes every output of that row NaN, and only
// that row (the other rows stay finite and accurate).
TEST(GemmTest, NanPropagatesToWholeRow) {
  std::mt19937 rng(7);
  for (WeightType type : {WeightType::kF32, WeightType::kBF16}) {
    const LinearWeight w = make_weight(type, 37, 45, true, rng);
    for (int64_t rows : {1, 3, 17}) {
      std::vector<float> x = random_x(rows, 45, rng);
      x[static_cast<size_t>((rows / 2) * 45 + 44)] = std::numeric_limits<float>::quiet_NaN();  // k tail
      if (rows > 2) x[0] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> ref(static_cast<size_t>(rows * 37));
      linear_ref(x.data(), rows, w, ref.data());
      for (int64_t o = 0; o < 37; ++o) ASSERT_TRUE(std::isnan(ref[(rows / 2) * 37 + o]));
      check_all_paths(x, rows, w, std::string("nan ") + type_name(type));
    }
  }
}

// inf in x: inf·w is ±inf, inf·0 is NaN, +inf + -inf is NaN, as IEEE says.
TEST(GemmTest, InfFollowsIeee) {
  std::mt19937 rng(8);
  for (WeightType type : {WeightType::kF32, WeightType::kBF16}) {
    LinearWeight w = make_weight(type, 20, 33, false, rng);
    // Column 3 of W is zero in output 0 (inf·0 = NaN there).
    if (type == WeightType::kF32) w.f32[3] = 0.0f;
    else w.bf16[3] = 0;
    std::vector<float> x = random_x(4, 33, rng);
    const float inf = std::numeric_limits<float>::infinity();
    x[3] = inf;                          // row 0: ±inf per sign of w[o,3], NaN for o = 0
    x[33 + 5] = inf, x[33 + 6] = -inf;   // row 1: mostly NaN (opposite infinities) or ±inf
    x[66 + 32] = -inf;                   // row 2: in the k tail
    check_all_paths(x, 4, w, std::string("inf ") + type_name(type));
  }
}

// Zeros, huge values (finite sums near 1e31) and overflow of every product
// (1e30 · 1e9 > FLT_MAX): the reference's double sum also exceeds FLT_MAX, so
// both give the same ±inf.
TEST(GemmTest, ZerosHugeValuesAndOverflow) {
  std::mt19937 rng(9);
  for (WeightType type : {WeightType::kF32, WeightType::kBF16}) {
    const LinearWeight w = make_weight(type, 19, 70, true, rng);
    std::vector<float> zeros(static_cast<size_t>(3 * 70), 0.0f);
    check_all_paths(zeros, 3, w, "zeros");
    std::vector<float> huge = random_x(18, 70, rng);
    for (float& v : huge) v *= 1e30f;
    check_all_paths(huge, 18, w, "huge");

    LinearWeight big = make_weight(type, 21, 50, false, rng);
    std::uniform_real_distribution<float> pos(0.5f, 1.0f);
    for (size_t i = 0; i < big.f32.size(); ++i) big.f32[i] = pos(rng) * 1e9f;
    std::vector<float> tmp(big.bf16.size());
    for (float& v : tmp) v = pos(rng) * 1e9f;
    if (!big.bf16.empty()) f32_to_bf16(tmp.data(), big.bf16.data(), tmp.size());
    std::vector<float> x(static_cast<size_t>(18 * 50));
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 50) % 2 ? -1e30f : 1e30f;  // rows alternate sign
    std::vector<float> ref(static_cast<size_t>(18 * 21));
    linear_ref(x.data(), 18, big, ref.data());
    EXPECT_EQ(ref[0], std::numeric_limits<float>::infinity());
    EXPECT_EQ(ref[21], -std::numeric_limits<float>::infinity());
    check_all_paths(x, 18, big, std::string("overflow ") + type_name(type));
  }
}

TEST(GemmTest, Denormals) {
  std::mt19937 rng(10);
  // Denormal activations against normal weights, and (F32) denormal weights.
  LinearWeight w = make_weight(WeightType::kF32, 23, 41, false, rng);
  std::vector<float> x = random_x(17, 41, rng);
  for (float& v : x) v *= 1e-39f;  // mostly subnormal (< 1.18e-38)
  check_all_paths(x, 17, w, "denormal x");
  for (float& v : w.f32) v *= 1e-39f;
  check_all_paths(random_x(17, 41, rng), 17, w, "denormal w");
  LinearWeight wb = make_weight(WeightType::kBF16, 23, 41, true, rng);
  check_all_paths(x, 17, wb, "denormal x bf16");
}

// The automatic choice is an available path and follows the ISA cap: no
// AVX-512 path when best_isa() is below it, no SIMD path (and no OpenBLAS)
// when QLOOM_MAX_ISA caps to scalar.
TEST(GemmTest, AutoPathHonoursIsaCap) {
  for (int64_t rows : {1, 2, 4, 16, 512})
    for (WeightType type : {WeightType::kF32, WeightType::kBF16}) {
      const GemmPath p = gemm_auto_path(rows, 768, 768, type);
      EXPECT_TRUE(gemm_path_available(p)) << gemm_path_name(p);
      EXPECT_NE(p, GemmPath::kAuto);
      if (!isa_supported(Isa::kAvx512)) {
        EXPECT_TRUE(p != GemmPath::kAvx512Gemm && p != GemmPath::kAvx512Gemv) << gemm_path_name(p);
      }
      if (!isa_supported(Isa::kAvx2)) {
        EXPECT_EQ(p, GemmPath::kScalar);
      }
    }
  if (!isa_supported(Isa::kAvx512)) {
    ThreadPool pool(1);
    LinearWeight w;
    float x = 0, y = 0;
    EXPECT_THROW(linear_path(GemmPath::kAvx512Gemm, &x, 1, w, &y, pool), Error);
  }
}

// The canonical order (gemm_dispatch.h): the GEMV kernels of both ISAs agree
// bitwise, so do the packed GEMM kernels, and kScalar equals the side of the
// split its row count falls on; for 1, 2 and 3 threads. Inputs include signed
// zeros (a padded lane's FMA turns -0 into +0: every ISA must do it alike),
// denormal products and sums that cancel.
TEST(GemmTest, BitwiseAcrossIsasAndThreads) {
  std::mt19937 rng(2024);
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (int64_t rows : {1, 3, 4, 5, 17, 127, 128, 131})
    for (int64_t in : {0, 1, 7, 8, 15, 16, 17, 40, 100, 300, 385, 800})
      for (WeightType type : {WeightType::kF32, WeightType::kBF16})
        for (int variant = 0; variant < 2; ++variant) {
          const int64_t out = variant ? 37 : 5;
          LinearWeight w = make_weight(type, out, in, variant == 1, rng, variant ? 1e-20f : 1.0f);
          std::vector<float> x = random_x(rows, in, rng);
          for (size_t i = 0; i < x.size(); i += 3) x[i] = (i % 2) ? -0.0f : x[i] * 1e-19f;
          if (!w.bias.empty()) w.bias[0] = -0.0f;
          const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) + " " +
                                   type_name(type) + " variant " + std::to_string(variant);
          std::vector<float> gemv, gemm;
          for (unsigned threads : {1u, 2u, 3u}) {
            ThreadPool pool(threads);
            auto run = [&](GemmPath p) {
              std::vector<float> y(static_cast<size_t>(rows * out), 777.0f);
              linear_path(p, x.data(), rows, w, y.data(), pool);
              return y;
            };
            for (GemmPath p : {GemmPath::kAvx2Gemv, GemmPath::kAvx512Gemv, GemmPath::kAvx2Gemm, GemmPath::kAvx512Gemm}) {
              if (!gemm_path_available(p)) continue;
              const bool is_gemv = p == GemmPath::kAvx2Gemv || p == GemmPath::kAvx512Gemv;
              std::vector<float>& want = is_gemv ? gemv : gemm;
              const std::vector<float> y = run(p);
              if (want.empty()) want = y;
              ASSERT_TRUE(bits_equal(y, want)) << what << " path " << gemm_path_name(p) << " threads " << threads;
            }
            const std::vector<float> sc = run(GemmPath::kScalar);
            const std::vector<float>& side = rows < 128 ? gemv : gemm;
            if (!side.empty()) ASSERT_TRUE(bits_equal(sc, side)) << what << " scalar, threads " << threads;
            ASSERT_TRUE(bits_equal(run(GemmPath::kAuto), side.empty() ? sc : side)) << what << " auto";
          }
        }
}

// prepack(): the packed GEMM reads W's panels from the pack instead of
// packing them per call — the same bits for every row count, shape edge
// (in across the 384-deep blocks, out across the panel width), weight type,
// bias and thread count; a pack whose weight was replaced (a copy: other
// data) is ignored, and a capped ISA packs for its own kernels (or, scalar,
// not at all).
TEST(GemmTest, PrepackedWeightsGiveTheSameBits) {
  std::mt19937 rng(77);
  for (int64_t rows : {1, 127, 128, 131, 300})
    for (int64_t in : {1, 7, 100, 128, 129, 300, 384, 385, 800})
      for (int64_t out : {5, 31, 32, 33, 70})
        for (WeightType type : {WeightType::kF32, WeightType::kBF16}) {
          LinearWeight w = make_weight(type, out, in, out % 2 == 1, rng);
          const std::vector<float> x = random_x(rows, in, rng);
          LinearWeight packed = w;
          prepack(packed);
          EXPECT_EQ(packed.packed != nullptr, isa_supported(Isa::kAvx2));
          for (unsigned threads : {1u, 2u, 3u}) {
            ThreadPool pool(threads);
            std::vector<float> a(static_cast<size_t>(rows * out)), b(a.size(), 1.0f);
            linear(x.data(), rows, w, a.data(), pool);
            linear(x.data(), rows, packed, b.data(), pool);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
                << "rows " << rows << " in " << in << " out " << out << " " << type_name(type) << " threads "
                << threads;
          }
        }
  ThreadPool pool(2);
  LinearWeight w = make_weight(WeightType::kF32, 40, 150, true, rng);
  prepack(w);
  LinearWeight other = make_weight(WeightType::kF32, 40, 150, true, rng);
  other.packed = w.packed;  // stale: packed from w's data
  const std::vector<float> x = random_x(200, 150, rng);
  std::vector<float> want(200 * 40), got(want.size());
  LinearWeight plain = other;
  plain.packed.reset();
  linear(x.data(), 200, plain, want.data(), pool);
  linear(x.data(), 200, other, got.data(), pool);
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
  LinearWeight empty;
  prepack(empty);
  EXPECT_EQ(empty.packed, nullptr);
}

// Re-runs this binary's cap-sensitive tests under QLOOM_MAX_ISA=avx2 and
// =scalar, so the fallback dispatch is exercised on an AVX-512 machine.
TEST(GemmTest, CappedIsaSubprocesses) {
  test::expect_passes_under_isa_caps(
      "GemmTest.AutoPathHonoursIsaCap:GemmTest.NanPropagatesToWholeRow:GemmTest.BitwiseAcrossIsasAndThreads:"
      "GemmTest.PrepackedWeightsGiveTheSameBits");
}

}  // namespace
}  // namespace qloom::engine
