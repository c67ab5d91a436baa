// hf_format layouts of the MX fp6 and progressive (int4_fp8) weights, as
// amd-quark 0.13 exports them (checked against its export of the demo model
// for mxfp6_e2m3 / int4_fp8: fp6 weight U8 [out, in/4*3] + e8m0 U8 [out,
// in/32]; int4_fp8 weight I32 [out, in/8], weight_scale F32 [],
// weight_scale_2 F32 [out], weight_zero_point_2 I32 [out/8]), their round
// trips, and the progressive weight as a JSON list in quantization_config.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <map>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_progressive.h"
#include "qloom/export/quark_tensors.h"
#include "export/fake_checkpoint.h"
#include "qloom/quant/progressive.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/weight_gen.h"
#include "support/expect_error.h"

namespace qloom::exporter {
namespace {

using quant::QDtype;
using quant::QuantSpec;

const std::string kMod = "model.layers.0.self_attn.q_proj";

using Store = test_support::FakeCheckpoint;

std::string describe(const std::vector<io::TensorSpec>& specs) {
  std::string s;
  for (const auto& t : specs) {
    s += t.name.substr(kMod.size() + 1) + " " + std::string(dtype_name(t.dtype)) + " [";
    for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
    s += "]; ";
  }
  return s;
}

TEST(QuarkFp6Layout, ShapesPackingAndRoundTrip) {
  for (const char* scheme : {"mxfp6_e2m3", "mxfp6_e3m2"}) {
    const QuantSpec w = *quant::get_scheme(scheme).linear.weight;
    EXPECT_EQ(describe(quark_weight_specs(kMod, {64, 64}, w, DType::kBF16)),
              "weight u8 [64,48]; weight_scale u8 [64,2]; ")
        << scheme;
    const auto x = quant::testgen::make_weights(16 * 96, quant::testgen::Dist::kStudentT3, 5);
    const quant::QuantizedTensor q = quant::quantize_weight(x.data(), 16, 96, w, DType::kBF16, "w", DType::kBF16);
    const auto ts = pack_quantized_weight(kMod, q, DType::kBF16);
    ASSERT_EQ(ts.size(), 2u);
    // Row 0's first four codes are bytes 0..2 of the packed row (Pack_fp6).
    const uint32_t word = std::to_integer<uint32_t>(ts[0].data[0]) | std::to_integer<uint32_t>(ts[0].data[1]) << 8 |
                          std::to_integer<uint32_t>(ts[0].data[2]) << 16;
    for (int k = 0; k < 4; ++k) EXPECT_EQ((word >> (6 * k)) & 0x3F, q.codes[k]) << scheme << " code " << k;
    // Row 1 starts at byte 96 / 4 * 3 = 72.
    EXPECT_EQ(std::to_integer<uint32_t>(ts[0].data[72]) & 0x3F, q.codes[96]);
    EXPECT_EQ(std::to_integer<uint8_t>(ts[1].data[0]), float_to_e8m0(q.scales[0]));
    Store st;
    st.add(ts);
    EXPECT_EQ(logical_weight_shape(kMod, w, st.lookup()), (std::pair<uint64_t, uint64_t>{16, 96}));
    const quant::QuantizedTensor back = unpack_quantized_weight(kMod, w, st.lookup());
    EXPECT_EQ(back.codes, q.codes);
    EXPECT_EQ(back.scales, q.scales);
  }
}

TEST(QuarkProgressiveLayout, NamesDtypesShapes) {
  const quant::LayerQuantSpec& l = quant::get_scheme("int4_fp8").linear;
  EXPECT_EQ(describe(progressive_weight_specs(kMod, {64, 64}, *l.weight, *l.weight_stage2, DType::kBF16)),
            "weight i32 [64,8]; weight_scale f32 []; weight_scale_2 f32 [64]; weight_zero_point_2 i32 [8]; ");
  // Stage 2's constraints: int4 per channel needs out and in divisible by 8.
  EXPECT_EQ(test::catch_error([&] {
              progressive_weight_specs(kMod, {60, 64}, *l.weight, *l.weight_stage2, DType::kBF16);
            }).kind(),
            ErrorKind::kUnsupported);
  EXPECT_EQ(test::catch_error([&] {
              progressive_weight_specs(kMod, {64, 64}, *l.weight_stage2, *l.weight, DType::kBF16);
            }).kind(),
            ErrorKind::kUnsupported);
}

TEST(QuarkProgressiveLayout, PackAndUnpackRoundTrip) {
  const quant::LayerQuantSpec& l = quant::get_scheme("int4_fp8").linear;
  auto x = quant::testgen::make_weights(32 * 48, quant::testgen::Dist::kGaussian, 9);
  quant::testgen::to_bf16_grid(x);
  const quant::ProgressiveTensor t =
      quant::quantize_progressive(x.data(), 32, 48, *l.weight, *l.weight_stage2, "w", DType::kBF16);
  const auto ts = pack_progressive_weight(kMod, t, DType::kBF16);
  ASSERT_EQ(ts.size(), 4u);
  EXPECT_EQ(ts[1].name, kMod + ".weight_scale");
  uint32_t s1 = 0;
  std::memcpy(&s1, ts[1].data.data(), 4);
  EXPECT_EQ(std::bit_cast<float>(s1), t.first.scales[0]);
  EXPECT_EQ(ts[3].name, kMod + ".weight_zero_point_2");
  for (std::byte b : ts[3].data) EXPECT_EQ(b, std::byte{0});
  Store st;
  st.add(ts);
  EXPECT_EQ(progressive_logical_shape(kMod, *l.weight_stage2, st.lookup()), (std::pair<uint64_t, uint64_t>{32, 48}));
  const quant::ProgressiveTensor back = unpack_progressive_weight(kMod, *l.weight, *l.weight_stage2, st.lookup());
  EXPECT_EQ(back.second.codes, t.second.codes);
  EXPECT_EQ(back.second.scales, t.second.scales);
  EXPECT_EQ(back.first.scales, t.first.scales);
  EXPECT_EQ(quant::dequantize_progressive(back), quant::dequantize_progressive(t));
  // A missing first-stage scale is named.
  st.infos.erase(kMod + ".weight_scale");
  const Error e = test::catch_error([&] { unpack_progressive_weight(kMod, *l.weight, *l.weight_stage2, st.lookup()); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.item(), kMod + ".weight_scale");
}

TEST(QuarkProgressiveConfig, WeightIsAListOfTwoSpecsAndReadsBack) {
  const quant::LayerQuantSpec& l = quant::get_scheme("int4_fp8").linear;
  const nlohmann::ordered_json j = layer_spec_to_json(l);
  ASSERT_TRUE(j["weight"].is_array());
  ASSERT_EQ(j["weight"].size(), 2u);
  EXPECT_EQ(j["weight"][0]["dtype"], "fp8_e4m3");
  EXPECT_EQ(j["weight"][0]["scale_type"], "float32");
  EXPECT_EQ(j["weight"][1]["dtype"], "int4");
  EXPECT_EQ(j["weight"][1]["qscheme"], "per_channel");
  EXPECT_EQ(j["weight"][1]["ch_axis"], 0);
  EXPECT_EQ(j["input_tensors"]["is_dynamic"], true);
  const quant::LayerQuantSpec back = layer_spec_from_json(nlohmann::json::parse(j.dump()), "g");
  EXPECT_EQ(back.weight, l.weight);
  EXPECT_EQ(back.weight_stage2, l.weight_stage2);
  // An unsupported pair (int4 then fp8) is refused by name.
  nlohmann::json bad = nlohmann::json::parse(j.dump());
  std::swap(bad["weight"][0], bad["weight"][1]);
  EXPECT_EQ(test::catch_error([&] { layer_spec_from_json(bad, "g"); }).kind(), ErrorKind::kUnsupported);
}

}  // namespace
}  // namespace qloom::exporter
