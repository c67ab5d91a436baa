// Known answers of the reference quantizer, worked out by hand from the rules
// in quantize_ref.h, one small matrix per scheme family; plus amax == 0, ties
// to even, scale rounding to the stored dtype, the model-dtype double
// rounding of fp8, and the errors. The cases that pin a Quark subtlety (fp8
// bf16 double rounding, reciprocal multiply, zero point added after
// rounding (checked on exported checkpoints), bf16 scale arithmetic, the MX codes and scales) were also run
// through amd-quark 0.13's own observers and scaled_real_quantize, which
// gave the same codes, scales and zero points.
#include "qloom/quant/quantize_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/scheme_registry.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

using test::catch_error;
constexpr float kEps = 0x1.0p-23f;

QuantSpec weight_spec(const char* scheme) { return *get_scheme(scheme).linear.weight; }

std::vector<int> signed_codes(const QuantizedTensor& t) {
  std::vector<int> v;
  for (uint8_t c : t.codes) v.push_back(static_cast<int8_t>(c));
  return v;
}
std::vector<int> unsigned_codes(const QuantizedTensor& t) { return {t.codes.begin(), t.codes.end()}; }

TEST(QuantizeRef, Int4PerGroupTiesToEvenAndZeroGroup) {
  // Group 0: -7.5, -7.0, ..., 7.5 and a 0: amax 7.5 -> scale 7.5 / 7.5 = 1, so
  // every half-integer is a tie, rounded to even; 7.5 -> 8 clamps to 7.
  // Group 1: all zero -> scale = eps (2^-23), codes 0.
  std::vector<float> w(64, 0.0f);
  for (int j = 0; j <= 30; ++j) w[j] = -7.5f + 0.5f * static_cast<float>(j);
  const QuantizedTensor t = quantize_weight_ref(w.data(), 1, 64, weight_spec("int4_wo_32"), DType::kF32, "w");
  const std::vector<int> want0 = {-8, -7, -6, -6, -6, -5, -4, -4, -4, -3, -2, -2, -2, -1, 0, 0,
                                  0,  1,  2,  2,  2,  3,  4,  4,  4,  5,  6,  6,  6,  7,  7, 0};
  std::vector<int> want = want0;
  want.resize(64, 0);
  EXPECT_EQ(signed_codes(t), want);
  EXPECT_EQ(t.scales, (std::vector<float>{1.0f, kEps}));
  EXPECT_TRUE(t.zero_points.empty());
  EXPECT_EQ(t.shape, (std::vector<uint64_t>{1, 64}));
  EXPECT_EQ(t.scale_dtype, DType::kF32);
  const auto dq = dequantize_ref(t);
  for (int j = 0; j < 64; ++j) EXPECT_EQ(dq[j], static_cast<float>(want[j])) << j;
}

TEST(QuantizeRef, Int8PerTensor) {
  // amax 127.5 -> scale 127.5 / 127.5 = 1; 127.5 -> 128 clamps to 127.
  const std::vector<float> w = {127.5f, -127.5f, 0.5f, 1.5f, -2.5f, 3.0f};
  const QuantizedTensor t = quantize_weight_ref(w.data(), 2, 3, weight_spec("int8"), DType::kF32, "w");
  EXPECT_EQ(signed_codes(t), (std::vector<int>{127, -128, 0, 2, -2, 3}));
  EXPECT_EQ(t.scales, std::vector<float>{1.0f});
  EXPECT_TRUE(t.zero_points.empty());
}

TEST(QuantizeRef, Uint4AsymmetricScalesAndZeroPoints) {
  std::vector<float> w(96, 0.0f);
  // Group 0: min -1.25, max 2.5 -> scale 3.75 / 15 = 0.25, zp = -round(-5) = 5;
  // code = round(4x) + 5: 0.125 -> 0.5 -> 0 -> 5, -0.125 -> -0.5 -> -0 -> 5, 0.375 -> 1.5 -> 2 -> 7.
  const float g0[] = {-1.25f, 2.5f, 0.125f, -0.125f, 0.375f};
  for (int j = 0; j < 5; ++j) w[j] = g0[j];
  // Group 1: all positive (min 0.5, max 3.75): min clamps to 0 -> scale 0.25, zp 0.
  for (int j = 32; j < 64; ++j) w[j] = 0.5f;
  w[33] = 3.75f;
  // Group 2: all negative (min -3.75): max clamps to 0 -> scale 0.25, zp 15.
  for (int j = 64; j < 96; ++j) w[j] = -1.0f;
  w[64] = -3.75f;
  w[65] = -0.125f;
  const QuantizedTensor t = quantize_weight_ref(w.data(), 1, 96, weight_spec("uint4_wo_32"), DType::kF32, "w");
  EXPECT_EQ(t.scales, (std::vector<float>{0.25f, 0.25f, 0.25f}));
  EXPECT_EQ(t.zero_points, (std::vector<int32_t>{5, 0, 15}));
  const auto c = unsigned_codes(t);
  EXPECT_EQ(std::vector<int>(c.begin(), c.begin() + 6), (std::vector<int>{0, 15, 5, 5, 7, 5}));
  EXPECT_EQ(c[31], 5);
  EXPECT_EQ(c[32], 2);
  EXPECT_EQ(c[33], 15);
  EXPECT_EQ(c[63], 2);
  EXPECT_EQ(c[64], 0);
  EXPECT_EQ(c[65], 15);  // round(-0.5) = -0, + 15
  EXPECT_EQ(c[95], 11);  // -4 + 15
  const auto dq = dequantize_ref(t);
  EXPECT_EQ(dq[0], -1.25f);
  EXPECT_EQ(dq[2], 0.0f);    // (5 - 5) * 0.25
  EXPECT_EQ(dq[4], 0.5f);    // (7 - 5) * 0.25
  EXPECT_EQ(dq[65], 0.0f);   // (15 - 15) * 0.25
}

TEST(QuantizeRef, Uint4RoundsBeforeAddingTheZeroPoint) {
  // The case found on the demo model (layer 0 k_proj, uint4_wo_per_channel):
  // x / s = 1.5 exactly with an odd zero point 9. Quark's exported checkpoints
  // (amd-quark 0.12.post1 and 0.13) hold round(1.5) + 9 = 11; rounding after
  // adding would give round(10.5) = 10.
  // min -2.25, max 1.5 -> scale 3.75 / 15 = 0.25, zp = -round(-9) = 9.
  std::vector<float> w(32, 0.0f);
  w[0] = -2.25f;
  w[1] = 1.5f;
  w[2] = 0.375f;   // 1.5 -> 2 -> 11
  w[3] = 0.125f;   // 0.5 -> 0 -> 9
  w[4] = -0.375f;  // -1.5 -> -2 -> 7
  const QuantizedTensor t = quantize_weight_ref(w.data(), 1, 32, weight_spec("uint4_wo_32"), DType::kF32, "w");
  EXPECT_EQ(t.scales[0], 0.25f);
  EXPECT_EQ(t.zero_points[0], 9);
  EXPECT_EQ(t.codes[0], 0);
  EXPECT_EQ(t.codes[1], 15);
  EXPECT_EQ(t.codes[2], 11);
  EXPECT_EQ(t.codes[3], 9);
  EXPECT_EQ(t.codes[4], 7);
  EXPECT_EQ(t.codes[5], 9);
}

TEST(QuantizeRef, IntMultipliesByTheReciprocal) {
  // scale = amax / 7.5 (f32). x / scale rounds to 4, but x * (1 / scale),
  // with the reciprocal rounded to f32 first, rounds to 5. Quark multiplies
  // by the reciprocal (real_quantize_int_*: inv_scale = 1.0 / scale): 5.
  const float amax = 0x1.95ae96p-2f, x = 0x1.e6d182p-3f;
  std::vector<float> w = {amax, x, 0, 0, 0, 0, 0, 0};
  const QuantizedTensor t =
      quantize_weight_ref(w.data(), 1, 8, weight_spec("int4_wo_per_channel"), DType::kF32, "w");
  const float s = amax / 7.5f;
  EXPECT_EQ(t.scales[0], s);
  EXPECT_EQ(std::nearbyint(x / s), 4.0f);  // what a division would give
  EXPECT_EQ(static_cast<int8_t>(t.codes[1]), 5);
  EXPECT_EQ(static_cast<int8_t>(t.codes[0]), 7);
}

TEST(QuantizeRef, ScaleRoundedToItsStorageDtypeBeforeTheCodes) {
  // f32 weights, scales stored as bf16: 1 / 7.5 = 0x1.111112p-3 rounds to
  // 0x1.12p-3 (0.1337890625), and the codes come from that stored scale:
  // 0.468 / 0.1337890625 = 3.498 -> 3 (with the f32 scale: 3.51 -> 4).
  std::vector<float> w = {1.0f, 0.468f, 0, 0, 0, 0, 0, 0};
  const QuantSpec spec = weight_spec("int4_wo_per_channel");
  const QuantizedTensor tb = quantize_weight_ref(w.data(), 1, 8, spec, DType::kBF16, "w");
  EXPECT_EQ(tb.scales[0], 0x1.12p-3f);
  EXPECT_EQ(tb.scale_dtype, DType::kBF16);
  EXPECT_EQ(static_cast<int8_t>(tb.codes[1]), 3);
  EXPECT_EQ(static_cast<int8_t>(tb.codes[0]), 7);
  const QuantizedTensor tf = quantize_weight_ref(w.data(), 1, 8, spec, DType::kF32, "w");
  EXPECT_EQ(tf.scales[0], 1.0f / 7.5f);
  EXPECT_EQ(static_cast<int8_t>(tf.codes[1]), 4);
  // Stored bytes dequantize to exactly what the reference defines.
  EXPECT_EQ(dequantize_ref(tb)[1], 3.0f * 0x1.12p-3f);
}

TEST(QuantizeRef, Bf16ModelRoundsTheScaleInBf16) {
  // Quark's observer divides a bf16 amax by 7.5 in bf16: scale = bf16(amax / 7.5).
  std::vector<float> w = {1.0f, 0, 0, 0, 0, 0, 0, 0};
  const QuantizedTensor t = quantize_weight_ref(w.data(), 1, 8, weight_spec("int4_wo_per_channel"),
                                                DType::kBF16, "w", DType::kBF16);
  EXPECT_EQ(t.scales[0], 0x1.12p-3f);
}

TEST(QuantizeRef, Fp8PerTensorBf16DoubleRounding) {
  // bf16 model: scale = bf16(1 / 448) = 0x1.24p-9. Quark divides in bf16, so
  // x / scale is rounded to bf16 before the e4m3 cast:
  //   0.9609375 / s = 431.34 -> bf16 432 -> tie between 416 and 448 -> 448 (0x7E)
  //   (a single rounding of 431.34 gives 416, 0x7D);
  //   -0.75 -> -336.66 -> bf16 -336 -> tie -> -320 (0xFA), direct -352 (0xFB);
  //   -0.48046875 -> -215.67 -> bf16 -216 -> tie -> -224 (0xF6), direct 0xF5.
  const std::vector<float> w = {1.0f, 0.9609375f, -0.75f, -0.48046875f};
  const QuantizedTensor t =
      quantize_weight_ref(w.data(), 1, 4, weight_spec("fp8"), DType::kBF16, "w", DType::kBF16);
  EXPECT_EQ(t.scales, std::vector<float>{0x1.24p-9f});
  EXPECT_EQ(unsigned_codes(t), (std::vector<int>{0x7E, 0x7E, 0xFA, 0xF6}));
  // An f32 model rounds once.
  const float s = 0x1.24p-9f;
  EXPECT_EQ(float_to_fp8_e4m3(0.9609375f / s), 0x7D);
}

TEST(QuantizeRef, Fp8ZeroScaleAndSignedZero) {
  const std::vector<float> w = {-0.0f, 0.0f, 0.0f, 0.0f};
  const QuantizedTensor t = quantize_weight_ref(w.data(), 2, 2, weight_spec("fp8"), DType::kF32, "w");
  EXPECT_EQ(t.scales, std::vector<float>{kEps});  // amax 0 -> scale eps
  EXPECT_EQ(unsigned_codes(t), (std::vector<int>{0x80, 0x00, 0x00, 0x00}));
}

TEST(QuantizeRef, PtpcFp8PerChannel) {
  // Row 0: amax 448 -> scale 1: 448 -> 0x7E, -1 -> 0xB8, 0 -> 0, 2.5 -> 0x42.
  // Row 1: amax 0.5 -> scale 0.5 / 448: 0.5 -> 448, 0.25 -> 224 (0x76), -0.5 -> 0xFE.
  const std::vector<float> w = {448.0f, -1.0f, 0.0f, 2.5f, 0.5f, 0.25f, -0.5f, 0.0f};
  const QuantizedTensor t = quantize_weight_ref(w.data(), 2, 4, weight_spec("ptpc_fp8"), DType::kF32, "w");
  EXPECT_EQ(t.scales, (std::vector<float>{1.0f, 0.5f / 448.0f}));
  EXPECT_EQ(unsigned_codes(t), (std::vector<int>{0x7E, 0xB8, 0x00, 0x42, 0x7E, 0x76, 0xFE, 0x00}));
}

TEST(QuantizeRef, Mxfp4ScalesAndCodes) {
  std::vector<float> w(160, 0.0f);
  // Block 0: amax 6 = 1.5 * 2^2 (mantissa < 0.75: stays 2^2) -> e = 2 - 2 = 0,
  // scale 1. Ties: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0,
  // 3.5 -> 4.0, 5 -> 4.0; -0.1 rounds to zero and is +0 (code 0, not 8).
  const float b0[] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.1f, -0.3f, -6.0f, 0.5f, -0.0f};
  for (int j = 0; j < 13; ++j) w[j] = b0[j];
  // Block 1: amax 7 = 1.75 * 2^2 rounds up to 2^3 -> e = 1, scale 2.
  w[32] = 7.0f;
  w[33] = -7.0f;
  w[34] = 1.0f;
  w[35] = 5.0f;
  // Block 2: all zero -> scale 2^-126 (e8m0 byte 1). Block 3: a float
  // denormal amax -> also 2^-126 (qloom clamps at -126; see quantize_ref.h).
  w[96] = 0x1.8p-130f;
  // Block 4: amax 3 = 1.5 * 2^1 -> e = -1, scale 0.5.
  w[128] = 3.0f;
  w[129] = 0.25f;
  const QuantizedTensor t =
      quantize_weight_ref(w.data(), 1, 160, weight_spec("mxfp4_weight_only"), DType::kF32, "w");
  EXPECT_EQ(t.scale_dtype, DType::kE8M0);
  EXPECT_EQ(t.scales, (std::vector<float>{1.0f, 2.0f, 0x1.0p-126f, 0x1.0p-126f, 0.5f}));
  const auto c = unsigned_codes(t);
  EXPECT_EQ(std::vector<int>(c.begin(), c.begin() + 13),
            (std::vector<int>{7, 0, 2, 2, 4, 4, 6, 6, 0, 0x9, 0xF, 1, 0}));
  EXPECT_EQ(std::vector<int>(c.begin() + 32, c.begin() + 36), (std::vector<int>{6, 0xE, 1, 4}));
  EXPECT_EQ(c[96], 0);
  EXPECT_EQ(c[128], 7);
  EXPECT_EQ(c[129], 1);
  for (int j = 36; j < 96; ++j) EXPECT_EQ(c[j], 0) << j;
  const auto dq = dequantize_ref(t);
  EXPECT_EQ(dq[32], 8.0f);
  EXPECT_EQ(dq[33], -8.0f);
  EXPECT_EQ(dq[9], -0.5f);
}

TEST(QuantizeRef, MxExponentRule) {
  using detail::mx_params;
  EXPECT_EQ(mx_params(1.0f).scale, 0.25f);         // 2^0 -> e = -2
  EXPECT_EQ(mx_params(1.74f).scale, 0.25f);        // mantissa < 0.75 stays
  EXPECT_EQ(mx_params(1.75f).scale, 0.5f);         // >= 0.75 rounds up
  EXPECT_EQ(mx_params(0.0f).scale, 0x1.0p-126f);   // zero
  EXPECT_EQ(mx_params(-0.0f).scale, 0x1.0p-126f);
  EXPECT_EQ(mx_params(0x1.0p-124f).scale, 0x1.0p-126f);  // 2^-126 clamp (Quark codes: 2^-127)
  EXPECT_EQ(mx_params(0x1.0p-123f).scale, 0x1.0p-125f);
  EXPECT_EQ(mx_params(0x1.8p127f).scale, 0x1.0p125f);
  EXPECT_EQ(mx_params(0x1.cp127f).scale, 0x1.0p127f);  // rounds to inf -> 127
  EXPECT_EQ(mx_params(std::numeric_limits<float>::max()).scale, 0x1.0p127f);
  EXPECT_EQ(mx_params(std::numeric_limits<float>::denorm_min()).scale, 0x1.0p-126f);
}

TEST(QuantizeRef, QuarkScaleDtypes) {
  EXPECT_EQ(quark_scale_dtype(weight_spec("fp8"), DType::kBF16), DType::kBF16);
  EXPECT_EQ(quark_scale_dtype(weight_spec("ptpc_fp8"), DType::kF16), DType::kF16);
  EXPECT_EQ(quark_scale_dtype(weight_spec("int4_wo_128"), DType::kBF16), DType::kBF16);
  EXPECT_EQ(quark_scale_dtype(weight_spec("uint4_wo_per_channel"), DType::kF32), DType::kF32);
  EXPECT_EQ(quark_scale_dtype(weight_spec("int8"), DType::kBF16), DType::kF32);  // 0-dim promotion
  EXPECT_EQ(quark_scale_dtype(*get_scheme("int8").linear.input, DType::kBF16), DType::kF32);
  EXPECT_EQ(quark_scale_dtype(weight_spec("mxfp4"), DType::kBF16), DType::kE8M0);
  EXPECT_EQ(quark_scale_dtype(kv_cache_spec("fp8"), DType::kBF16), DType::kBF16);
}

TEST(QuantizeRef, StaticScales) {
  const QuantSpec fp8 = *get_scheme("fp8").linear.input;
  const QuantSpec i8 = *get_scheme("int8").linear.input;
  EXPECT_EQ(static_scale_from_amax(448.0f, fp8, DType::kF32), 1.0f);
  EXPECT_EQ(static_scale_from_amax(0.0f, fp8, DType::kF32), kEps);
  EXPECT_EQ(static_scale_from_amax(1.0f, fp8, DType::kBF16, DType::kBF16), 0x1.24p-9f);
  EXPECT_EQ(static_scale_from_amax(1.0f, fp8, DType::kF32), 1.0f / 448.0f);
  EXPECT_EQ(static_scale_from_amax(127.5f, i8, DType::kF32), 1.0f);
  EXPECT_EQ(static_scale_from_amax(0.0f, i8, DType::kF32), kEps);
  EXPECT_EQ(static_scale_from_amax(1.0f, i8, DType::kF32, DType::kBF16),
            bf16_to_float(float_to_bf16(1.0f / 127.5f)));
  EXPECT_EQ(static_scale_from_amax(7.0f, kv_cache_spec("fp8"), DType::kF32), 7.0f / 448.0f);
  EXPECT_EQ(catch_error([&] { static_scale_from_amax(1.0f, weight_spec("int4_wo_128"), DType::kF32); }).kind(),
            ErrorKind::kUnsupported);
  EXPECT_EQ(catch_error([&] { static_scale_from_amax(1.0f, *get_scheme("ptpc_fp8").linear.input, DType::kF32); })
                .kind(),
            ErrorKind::kUnsupported);  // dynamic
  EXPECT_EQ(catch_error([&] { static_scale_from_amax(NAN, fp8, DType::kF32); }).kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(catch_error([&] { static_scale_from_amax(-1.0f, fp8, DType::kF32); }).kind(),
            ErrorKind::kInvalidInput);
  // kv_cache_group: one scale for k and v, at least min_kv_scale (rounded to the scale dtype).
  EXPECT_EQ(kv_group_scale(0.5f, 0.25f, 0.0f, DType::kBF16), 0.5f);
  EXPECT_EQ(kv_group_scale(0.01f, 0.02f, 0.1f, DType::kBF16), bf16_to_float(float_to_bf16(0.1f)));
}

TEST(QuantizeRef, NonFiniteWeightsAreRejected) {
  std::vector<float> w(2 * 64, 0.5f);
  w[64 + 3] = std::numeric_limits<float>::quiet_NaN();
  w[64 + 9] = std::numeric_limits<float>::infinity();
  for (const char* scheme : {"fp8", "int4_wo_32", "uint4_wo_64", "int8", "mxfp4"}) {
    Error e = catch_error([&] { quantize_weight_ref(w.data(), 2, 64, weight_spec(scheme), DType::kF32, "model.w"); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << scheme;
    EXPECT_EQ(e.item(), "model.w");
    EXPECT_NE(e.message().find("[1, 3] is NaN"), std::string::npos) << e.message();
    EXPECT_NE(e.remedy().find("--exclude_layers"), std::string::npos);
  }
  w[64 + 3] = 1.0f;
  Error e = catch_error([&] { quantize_weight_ref(w.data(), 2, 64, weight_spec("fp8"), DType::kF32, "model.w"); });
  EXPECT_NE(e.message().find("[1, 9] is +inf"), std::string::npos) << e.message();
  w[5] = -std::numeric_limits<float>::infinity();
  e = catch_error([&] { quantize_weight_ref(w.data(), 2, 64, weight_spec("fp8"), DType::kF32, "model.w"); });
  EXPECT_NE(e.message().find("[0, 5] is -inf"), std::string::npos) << e.message();
}

TEST(QuantizeRef, GroupSizeMustDivideInFeatures) {
  std::vector<float> w(2 * 100, 0.5f);
  Error e = catch_error([&] { quantize_weight_ref(w.data(), 2, 100, weight_spec("int4_wo_32"), DType::kF32, "x.weight"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), "x.weight");
  EXPECT_NE(e.message().find("in_features 100 is not a multiple of the group size 32"), std::string::npos);
  EXPECT_NE(e.remedy().find("--exclude_layers"), std::string::npos);
  EXPECT_NE(e.remedy().find("per-channel"), std::string::npos);
  e = catch_error([&] { quantize_weight_ref(w.data(), 2, 100, weight_spec("mxfp4"), DType::kF32, "x.weight"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  // Per-channel and per-tensor schemes take any width.
  EXPECT_NO_THROW(quantize_weight_ref(w.data(), 2, 100, weight_spec("int4_wo_per_channel"), DType::kF32, "x"));
  EXPECT_NO_THROW(quantize_weight_ref(w.data(), 2, 100, weight_spec("fp8"), DType::kF32, "x"));
}

TEST(QuantizeRef, BadArguments) {
  std::vector<float> w(64, 0.5f);
  EXPECT_EQ(catch_error([&] { quantize_weight_ref(w.data(), 0, 64, weight_spec("fp8"), DType::kF32, "x"); }).kind(),
            ErrorKind::kInvalidInput);
  EXPECT_EQ(
      catch_error([&] { quantize_weight_ref(w.data(), 1, 64, weight_spec("fp8"), DType::kI8, "x"); }).kind(),
      ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] {
              quantize_weight_ref(w.data(), 1, 64, weight_spec("fp8"), DType::kF32, "x", DType::kF8_E4M3);
            }).kind(),
            ErrorKind::kUsage);
  QuantSpec e5m2 = weight_spec("fp8");
  e5m2.dtype = QDtype::kFp8E5M2;
  EXPECT_EQ(catch_error([&] { quantize_weight_ref(w.data(), 1, 64, e5m2, DType::kF32, "x"); }).kind(),
            ErrorKind::kUnsupported);
  QuantSpec floor_mx = weight_spec("mxfp4");
  floor_mx.scale_calculation_mode = "floor";
  EXPECT_EQ(catch_error([&] { quantize_weight_ref(w.data(), 1, 64, floor_mx, DType::kF32, "x"); }).kind(),
            ErrorKind::kUnsupported);
  // f32 weights whose scale overflows f16 storage.
  std::vector<float> big(8, 1e6f);
  Error e = catch_error([&] { quantize_weight_ref(big.data(), 1, 8, weight_spec("int4_wo_per_channel"), DType::kF16, "x"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.message().find("overflows f16"), std::string::npos);
}

}  // namespace
}  // namespace qloom::quant
