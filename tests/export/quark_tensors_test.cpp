// Tests of Quark's on-disk tensor layouts: names, dtypes and shapes per
// scheme, packing known answers, round trips, and bit-exact agreement with
// tensors AMD Quark 0.12.post1 exported for the demo model
// (tests/data/quark/quark_tensors.safetensors, decoded by Quark itself into
// tests/data/quark/reference.safetensors; see the README there).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "export/quark_test_specs.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_tensors.h"
#include "export/fake_checkpoint.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/io/json_read.h"
#include "qloom/io/safetensors_reader.h"
#include "support/expect_error.h"

namespace {

namespace fs = std::filesystem;
using namespace qloom;
using namespace qloom::exporter;
using quant::QDtype;
using quant::QScheme;
using quant::QuantizedTensor;
using quant::QuantSpec;
using qloom::test::catch_error;

const fs::path kGolden = fs::path(QLOOM_TEST_DATA_DIR) / "quark";
const std::string kMod = "model.layers.0.self_attn.k_proj";

using FakeCheckpoint = test_support::FakeCheckpoint;

uint32_t word(const std::vector<std::byte>& d, size_t i) {
  uint32_t v;
  std::memcpy(&v, d.data() + 4 * i, 4);
  return v;
}

float bf16r(float x) { return round_to_dtype(x, DType::kBF16); }

// ---- specs ---------------------------------------------------------------------------

std::string describe(const std::vector<io::TensorSpec>& specs) {
  std::string s;
  for (const auto& t : specs) {
    s += t.name.substr(t.name.rfind('.') + 1) + " " + std::string(dtype_name(t.dtype)) + " [";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(t.shape[i]);
    }
    s += "]; ";
  }
  return s;
}

TEST(QuarkTensorSpecs, EveryLayout) {
  const DType M = DType::kBF16;
  const std::vector<uint64_t> gate = {176, 64};
  EXPECT_EQ(describe(quark_weight_specs(kMod, {32, 64}, test::fp8_per_tensor(), M)),
            "weight fp8_e4m3 [32,64]; weight_scale bf16 []; ");
  EXPECT_EQ(describe(quark_weight_specs(kMod, {32, 64}, test::fp8_per_channel(0, false), M)),
            "weight fp8_e4m3 [32,64]; weight_scale bf16 [32]; ");
  EXPECT_EQ(describe(quark_weight_specs(kMod, {32, 64}, test::int8_per_tensor(), M)),
            "weight i8 [32,64]; weight_scale f32 []; weight_zero_point i8 []; ");
  EXPECT_EQ(describe(quark_weight_specs(kMod, gate, test::int4_per_group(32), M)),
            "weight i32 [64,22]; weight_scale bf16 [2,176]; weight_zero_point i32 [2,22]; ");
  EXPECT_EQ(describe(quark_weight_specs(kMod, gate, test::int4_per_group(32, true), DType::kF16)),
            "weight i32 [64,22]; weight_scale f16 [2,176]; weight_zero_point i32 [2,22]; ");
  EXPECT_EQ(describe(quark_weight_specs(kMod, gate, test::int4_per_channel(), M)),
            "weight i32 [176,8]; weight_scale bf16 [176]; weight_zero_point i32 [22]; ");
  EXPECT_EQ(describe(quark_weight_specs(kMod, {32, 64}, test::mxfp4(), M)),
            "weight u8 [32,32]; weight_scale u8 [32,2]; ");
  EXPECT_EQ(quark_weight_specs(kMod, {32, 64}, test::mxfp4(), M)[0].name, kMod + ".weight");

  EXPECT_EQ(describe(quark_activation_specs(kMod, ActivationRole::kInput, test::fp8_per_tensor(), M)),
            "input_scale bf16 []; ");
  // An explicit ScaleType fixes the scale dtype.
  QuantSpec f32s = test::fp8_per_tensor();
  f32s.scale_type = "float32";
  EXPECT_EQ(exporter::quark_scale_dtype(f32s, M), DType::kF32);
  f32s.scale_type = "float16";
  EXPECT_EQ(exporter::quark_scale_dtype(f32s, M), DType::kF16);
  EXPECT_EQ(exporter::quark_scale_dtype(test::int4_per_channel(), DType::kF16), DType::kF16);
  EXPECT_EQ(quark_zero_point_dtype(test::fp8_per_tensor()), std::nullopt);
  EXPECT_EQ(quark_zero_point_dtype(test::int4_per_channel()), DType::kI32);
  EXPECT_EQ(describe(quark_activation_specs(kMod, ActivationRole::kOutput, test::fp8_kv(), M)),
            "output_scale bf16 []; ");
  EXPECT_EQ(describe(quark_activation_specs(kMod, ActivationRole::kInput, test::int8_per_tensor(), M)),
            "input_scale f32 []; input_zero_point i8 []; ");
  EXPECT_TRUE(quark_activation_specs(kMod, ActivationRole::kInput, test::fp8_per_channel(1, true), M).empty());
  EXPECT_TRUE(quark_activation_specs(kMod, ActivationRole::kInput, test::mxfp4(true), M).empty());
}

TEST(QuarkTensorSpecs, RefusesWhatQuarkCannotExport) {
  const DType M = DType::kBF16;
  auto kind = [&](std::vector<uint64_t> shape, QuantSpec s) {
    return catch_error([&] { quark_weight_specs(kMod, shape, s, M); }).kind();
  };
  EXPECT_EQ(kind({64, 172}, test::int4_per_group(32)), ErrorKind::kUsage);        // 32 does not divide 172
  EXPECT_EQ(kind({64, 172}, test::int4_per_channel()), ErrorKind::kUnsupported);  // padded in
  // out_features 172: Quark pads the packed words, but its importer cannot
  // reload that (pack.py infer_packed_shape uses out // 8).
  EXPECT_EQ(kind({172, 64}, test::int4_per_group(32)), ErrorKind::kUnsupported);
  EXPECT_EQ(kind({172, 64}, test::int4_per_channel(true)), ErrorKind::kUnsupported);
  EXPECT_NO_THROW(quark_weight_specs(kMod, {172, 64}, test::fp8_per_tensor(), M));
  EXPECT_NO_THROW(quark_weight_specs(kMod, {172, 64}, test::mxfp4(), M));
  EXPECT_EQ(kind({64}, test::fp8_per_tensor()), ErrorKind::kUsage);
  EXPECT_EQ(kind({64, 64}, test::fp8_per_tensor(true)), ErrorKind::kUsage);  // dynamic weight
  QuantSpec fp6 = test::mxfp4();
  fp6.dtype = QDtype::kFp6E2M3;
  EXPECT_NO_THROW(quark_weight_specs(kMod, {64, 64}, fp6, M));  // MX fp6: Pack_fp6
  fp6.scale_format = quant::ScaleFormat::kFloat;
  EXPECT_EQ(kind({64, 64}, fp6), ErrorKind::kUnsupported);
  QuantSpec fp4f = test::mxfp4();
  fp4f.scale_format = quant::ScaleFormat::kFloat;
  EXPECT_EQ(kind({64, 64}, fp4f), ErrorKind::kUnsupported);
  QuantSpec pc1 = test::int4_per_channel();
  pc1.ch_axis = 1;
  EXPECT_EQ(kind({64, 64}, pc1), ErrorKind::kUnsupported);
  EXPECT_EQ(catch_error([&] { quark_weight_specs(kMod, {8, 8}, test::fp8_per_tensor(), DType::kI8); }).kind(),
            ErrorKind::kUsage);
  EXPECT_EQ(catch_error([&] {
              quark_activation_specs(kMod, ActivationRole::kInput, test::fp8_per_channel(1, false), M);
            }).kind(),
            ErrorKind::kUnsupported);
}

// ---- known answers -------------------------------------------------------------------

TEST(QuarkPacking, Int4PerGroupTransposedReorderedKnownAnswer) {
  // [out=8, in=2], one group per row: column 0 holds 0..7, column 1 -1..-8.
  QuantizedTensor qt;
  qt.spec = test::int4_per_group(2);
  qt.shape = {8, 2};
  qt.scale_dtype = DType::kBF16;
  for (int o = 0; o < 8; ++o) {
    qt.codes.push_back(static_cast<uint8_t>(o));
    qt.codes.push_back(static_cast<uint8_t>(static_cast<int8_t>(-(o + 1))));
    qt.scales.push_back(bf16r(0.5f + o));
  }
  auto ts = pack_quantized_weight(kMod, qt, DType::kBF16);
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].shape, (std::vector<uint64_t>{2, 1}));
  // Row i = input column i; nibble j = output element [0,2,4,6,1,3,5,7][j].
  EXPECT_EQ(word(ts[0].data, 0), 0x75316420u);
  EXPECT_EQ(word(ts[0].data, 1), 0x8ACE9BDFu);  // -1..-8 = F,E,D,C,B,A,9,8
  // Scales transposed to [in/g, out] = [1, 8].
  EXPECT_EQ(ts[1].shape, (std::vector<uint64_t>{1, 8}));
  EXPECT_EQ(static_cast<uint8_t>(ts[1].data[0]), float_to_bf16(0.5f) & 0xFF);
  // Symmetric int4: an all-zero packed zero point [1, 1].
  EXPECT_EQ(ts[2].shape, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(word(ts[2].data, 0), 0u);
  // pack_method "order": plain nibble order.
  auto seq = pack_quantized_weight(kMod, qt, DType::kBF16, PackOrder::kSequential);
  EXPECT_EQ(word(seq[0].data, 0), 0x76543210u);
}

TEST(QuarkPacking, Int4ZeroPointsAndUnloadablePadding) {
  // uint4 per group, out = 10: Quark would write two zero-padded words per
  // row, which its importer cannot read back; qloom refuses.
  QuantizedTensor qt;
  qt.spec = test::int4_per_group(8, /*unsigned=*/true);
  qt.shape = {10, 8};
  qt.scale_dtype = DType::kBF16;
  for (int o = 0; o < 10; ++o)
    for (int i = 0; i < 8; ++i) qt.codes.push_back(static_cast<uint8_t>(o));
  qt.scales.assign(10, 1.0f);
  for (int o = 0; o < 10; ++o) qt.zero_points.push_back(o);
  Error e = catch_error([&] { pack_quantized_weight(kMod, qt, DType::kBF16); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.item(), kMod + ".weight");
  EXPECT_NE(e.message().find("divisible by 8"), std::string::npos);
  // uint4 per group, out = 8: zero points packed like the weight.
  qt.shape = {8, 8};
  qt.codes.resize(64);
  qt.scales.resize(8);
  qt.zero_points.resize(8);
  auto ts = pack_quantized_weight(kMod, qt, DType::kBF16);
  ASSERT_EQ(ts[0].shape, (std::vector<uint64_t>{8, 1}));
  EXPECT_EQ(word(ts[0].data, 0), 0x75316420u);
  EXPECT_EQ(ts[2].shape, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(word(ts[2].data, 0), 0x75316420u);

  // uint4 per channel: zero points [out] packed into [ceil(out/8)] words.
  QuantizedTensor pc;
  pc.spec = test::int4_per_channel(true);
  pc.shape = {8, 8};
  pc.scale_dtype = DType::kBF16;
  for (int o = 0; o < 8; ++o)
    for (int i = 0; i < 8; ++i) pc.codes.push_back(static_cast<uint8_t>(i));
  pc.scales.assign(8, 2.0f);
  for (int o = 0; o < 8; ++o) pc.zero_points.push_back(o);
  auto p = pack_quantized_weight(kMod, pc, DType::kBF16);
  EXPECT_EQ(p[0].shape, (std::vector<uint64_t>{8, 1}));  // not transposed
  EXPECT_EQ(word(p[0].data, 3), 0x75316420u);
  EXPECT_EQ(p[2].shape, (std::vector<uint64_t>{1}));
  EXPECT_EQ(word(p[2].data, 0), 0x75316420u);
}

TEST(QuarkPacking, Mxfp4Fp8Int8KnownAnswers) {
  QuantizedTensor mx;
  mx.spec = test::mxfp4();
  mx.shape = {1, 32};
  for (int i = 0; i < 32; ++i) mx.codes.push_back(static_cast<uint8_t>(i % 16));
  mx.scales = {0.25f};
  mx.scale_dtype = DType::kE8M0;
  auto m = pack_quantized_weight(kMod, mx, DType::kBF16);
  EXPECT_EQ(m[0].shape, (std::vector<uint64_t>{1, 16}));
  EXPECT_EQ(static_cast<uint8_t>(m[0].data[0]), 0x10);  // element 0 low, element 1 high
  EXPECT_EQ(static_cast<uint8_t>(m[0].data[1]), 0x32);
  EXPECT_EQ(m[1].dtype, DType::kU8);
  EXPECT_EQ(static_cast<uint8_t>(m[1].data[0]), 125);  // 2^-2 -> 127 - 2

  QuantizedTensor f8;
  f8.spec = test::fp8_per_tensor();
  f8.shape = {2, 2};
  f8.codes = {0x38, 0xB8, 0x00, 0x7E};  // 1, -1, 0, 448
  f8.scales = {bf16r(0.1f)};
  f8.scale_dtype = DType::kBF16;
  auto f = pack_quantized_weight(kMod, f8, DType::kBF16);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(f[0].data[1]), 0xB8);
  EXPECT_EQ(f[1].shape, std::vector<uint64_t>{});
  uint16_t h;
  std::memcpy(&h, f[1].data.data(), 2);
  EXPECT_EQ(h, float_to_bf16(0.1f));

  QuantizedTensor i8;
  i8.spec = test::int8_per_tensor();
  i8.shape = {1, 2};
  i8.codes = {0x81, 0x7F};  // -127, 127
  i8.scales = {0.1f};       // F32: any float
  i8.scale_dtype = DType::kF32;
  auto t = pack_quantized_weight(kMod, i8, DType::kBF16);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[1].dtype, DType::kF32);
  EXPECT_EQ(word(t[1].data, 0), std::bit_cast<uint32_t>(0.1f));
  EXPECT_EQ(t[2].dtype, DType::kI8);
  EXPECT_EQ(t[2].data.size(), 1u);
  EXPECT_EQ(static_cast<uint8_t>(t[2].data[0]), 0);

  auto act = pack_activation_qparams(kMod, ActivationRole::kInput, test::int8_per_tensor(), 0.25f, 0,
                                     DType::kBF16);
  ASSERT_EQ(act.size(), 2u);
  EXPECT_EQ(act[0].name, kMod + ".input_scale");
  EXPECT_EQ(act[1].name, kMod + ".input_zero_point");
  auto kv = pack_activation_qparams(kMod, ActivationRole::kOutput, test::fp8_kv(), 0.5f, 0, DType::kBF16);
  ASSERT_EQ(kv.size(), 1u);
  EXPECT_EQ(kv[0].name, kMod + ".output_scale");
  EXPECT_EQ(kv[0].dtype, DType::kBF16);
}

TEST(QuarkPacking, ValidatesTheQuantizedTensor) {
  QuantizedTensor qt;
  qt.spec = test::int4_per_group(8);
  qt.shape = {8, 8};
  qt.codes.assign(64, 1);
  qt.scales.assign(8, 1.0f);
  qt.scale_dtype = DType::kBF16;
  auto kind = [&](QuantizedTensor t, DType m = DType::kBF16) {
    return catch_error([&] { pack_quantized_weight(kMod, t, m); });
  };
  auto t = qt;
  t.codes[5] = 9;  // int4 range is [-8, 7]
  Error e = kind(t);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(e.item(), kMod + ".weight");
  t = qt;
  t.codes.pop_back();
  EXPECT_EQ(kind(t).kind(), ErrorKind::kUsage);
  t = qt;
  t.scales.pop_back();
  EXPECT_EQ(kind(t).item(), kMod + ".weight_scale");
  t = qt;
  t.scales[0] = 0.1f;  // not a bf16 value
  EXPECT_EQ(kind(t).item(), kMod + ".weight_scale");
  EXPECT_EQ(kind(t, DType::kF32).item(), kMod + ".weight_scale");  // scale_dtype says bf16
  t.scale_dtype = DType::kF32;
  EXPECT_NO_THROW(pack_quantized_weight(kMod, t, DType::kF32));
  t = qt;
  t.zero_points.assign(8, 1);  // symmetric spec
  EXPECT_EQ(kind(t).item(), kMod + ".weight_zero_point");
  t = qt;
  t.spec = test::int4_per_group(8, true);  // asymmetric without zero points
  EXPECT_EQ(kind(t).item(), kMod + ".weight_zero_point");
  t.zero_points.assign(8, 16);
  t.codes.assign(64, 3);
  EXPECT_EQ(kind(t).item(), kMod + ".weight_zero_point");

  QuantizedTensor mx;
  mx.spec = test::mxfp4();
  mx.shape = {1, 32};
  mx.codes.assign(32, 1);
  mx.scale_dtype = DType::kE8M0;
  mx.scales = {0.3f};  // not a power of two
  EXPECT_EQ(kind(mx).item(), kMod + ".weight_scale");
  mx.scales = {1.0f};
  mx.codes[0] = 16;
  EXPECT_EQ(kind(mx).item(), kMod + ".weight");

  QuantizedTensor f8;
  f8.spec = test::fp8_per_tensor();
  f8.shape = {1, 1};
  f8.codes = {0x7F};  // NaN
  f8.scales = {1.0f};
  f8.scale_dtype = DType::kBF16;
  EXPECT_EQ(kind(f8).item(), kMod + ".weight");

  EXPECT_EQ(catch_error([] {
              pack_activation_qparams(kMod, ActivationRole::kInput, test::fp8_per_tensor(), 0.0f, 0, DType::kBF16);
            }).kind(),
            ErrorKind::kUsage);
  EXPECT_EQ(catch_error([] {
              pack_activation_qparams(kMod, ActivationRole::kInput, test::int8_per_tensor(), 1.0f, 3, DType::kBF16);
            }).kind(),
            ErrorKind::kUsage);  // symmetric: zero point 0
}

// ---- round trips ------------------------------------------------------------------------

QuantizedTensor random_qt(const QuantSpec& s, uint64_t out, uint64_t in, DType m, std::mt19937& rng) {
  QuantizedTensor qt;
  qt.spec = s;
  qt.shape = {out, in};
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint64_t i = 0; i < out * in; ++i) {
    int v = byte(rng);
    switch (s.dtype) {
      case QDtype::kInt4: v = static_cast<uint8_t>(static_cast<int8_t>(v % 16 - 8)); break;
      case QDtype::kUInt4:
      case QDtype::kFp4: v %= 16; break;
      case QDtype::kFp8E4M3:
        if ((v & 0x7F) == 0x7F) v = 0;
        break;
      default: break;
    }
    qt.codes.push_back(static_cast<uint8_t>(v));
  }
  const uint64_t ns = s.qscheme == QScheme::kPerTensor ? 1
                      : s.qscheme == QScheme::kPerChannel ? out
                                                          : out * (in / static_cast<uint64_t>(s.group_size));
  std::uniform_real_distribution<float> sc(1e-4f, 1.0f);
  const DType sd = exporter::quark_scale_dtype(s, m);
  qt.scale_dtype = sd == DType::kU8 ? DType::kE8M0 : sd;
  for (uint64_t i = 0; i < ns; ++i) {
    if (sd == DType::kU8)
      qt.scales.push_back(e8m0_to_float(static_cast<uint8_t>(100 + byte(rng) % 50)));
    else
      qt.scales.push_back(round_to_dtype(sc(rng), sd));
  }
  if (!s.symmetric && quark_zero_point_dtype(s)) {
    const int lo = s.dtype == QDtype::kInt8 ? -128 : (s.dtype == QDtype::kInt4 ? -8 : 0);
    const int hi = s.dtype == QDtype::kUInt8 ? 255 : (s.dtype == QDtype::kInt8 ? 127 : (s.dtype == QDtype::kInt4 ? 7 : 15));
    std::uniform_int_distribution<int> z(lo, hi);
    for (uint64_t i = 0; i < ns; ++i) qt.zero_points.push_back(z(rng));
  }
  return qt;
}

TEST(QuarkPacking, RoundTripEveryLayout) {
  std::vector<QuantSpec> specs = {test::fp8_per_tensor(),      test::fp8_per_channel(0, false),
                                  test::int8_per_tensor(),     test::int4_per_group(16),
                                  test::int4_per_group(16, true), test::int4_per_channel(),
                                  test::int4_per_channel(true), test::mxfp4()};
  QuantSpec i8pc = test::int8_per_tensor();
  i8pc.qscheme = QScheme::kPerChannel;
  i8pc.ch_axis = 0;
  specs.push_back(i8pc);
  QuantSpec u8g = test::int4_per_group(16, true);
  u8g.dtype = QDtype::kUInt8;
  specs.push_back(u8g);
  QuantSpec i4t = test::int4_per_channel();
  i4t.qscheme = QScheme::kPerTensor;
  specs.push_back(i4t);
  QuantSpec u4t = test::int4_per_channel(true);
  u4t.qscheme = QScheme::kPerTensor;
  specs.push_back(u4t);
  QuantSpec e5 = test::fp8_per_tensor();
  e5.dtype = QDtype::kFp8E5M2;
  specs.push_back(e5);

  std::mt19937 rng(7);
  for (const DType m : {DType::kBF16, DType::kF16, DType::kF32})
    for (const auto order : {PackOrder::kReorder, PackOrder::kSequential})
      for (const auto& s : specs)
        for (const auto& shape : std::vector<std::vector<uint64_t>>{{40, 64}, {168, 64}, {8, 32}}) {
          SCOPED_TRACE(std::string(quant::quant_dtype_name(s.dtype)) + " " + std::to_string(int(s.qscheme)) +
                       " " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]));
          const QuantizedTensor qt = random_qt(s, shape[0], shape[1], m, rng);
          const auto ts = pack_quantized_weight(kMod, qt, m, order);
          const auto specs_planned = quark_weight_specs(kMod, qt.shape, s, m, order);
          ASSERT_EQ(ts.size(), specs_planned.size());
          for (size_t i = 0; i < ts.size(); ++i) {
            EXPECT_EQ(ts[i].spec().name, specs_planned[i].name);
            EXPECT_EQ(ts[i].dtype, specs_planned[i].dtype);
            EXPECT_EQ(ts[i].shape, specs_planned[i].shape);
            EXPECT_EQ(ts[i].data.size(), specs_planned[i].nbytes());
          }
          FakeCheckpoint ck;
          ck.add(ts);
          const QuantizedTensor back = unpack_quantized_weight(kMod, s, ck.lookup(), order);
          EXPECT_EQ(back.shape, qt.shape);
          EXPECT_EQ(back.codes, qt.codes);
          EXPECT_EQ(back.scales, qt.scales);
          EXPECT_EQ(back.zero_points, qt.zero_points);
          EXPECT_EQ(back.spec, qt.spec);
          EXPECT_EQ(back.scale_dtype, qt.scale_dtype);
        }
}

TEST(QuarkUnpack, ErrorsNameTheTensor) {
  QuantizedTensor qt;
  qt.spec = test::int4_per_group(8);
  qt.shape = {8, 8};
  qt.codes.assign(64, 1);
  qt.scales.assign(8, 1.0f);
  qt.scale_dtype = DType::kBF16;
  FakeCheckpoint ck;
  ck.add(pack_quantized_weight(kMod, qt, DType::kBF16));
  // Missing tensor.
  EXPECT_EQ(catch_error([&] { unpack_quantized_weight("other", qt.spec, ck.lookup()); }).kind(),
            ErrorKind::kNotFound);
  // Wrong spec for the stored layout.
  Error e = catch_error([&] { unpack_quantized_weight(kMod, test::int8_per_tensor(), ck.lookup()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), kMod + ".weight");
  // Non-zero zero point under a symmetric spec.
  ck.tensors[kMod + ".weight_zero_point"].data[0] = std::byte{1};
  e = catch_error([&] { unpack_quantized_weight(kMod, qt.spec, ck.lookup()); });
  EXPECT_EQ(e.item(), kMod + ".weight_zero_point");
  // A symmetric weight without zero point tensor reads fine.
  ck.infos.erase(kMod + ".weight_zero_point");
  EXPECT_EQ(unpack_quantized_weight(kMod, qt.spec, ck.lookup()).codes, qt.codes);
  // e8m0 NaN.
  QuantizedTensor mx;
  mx.spec = test::mxfp4();
  mx.shape = {1, 32};
  mx.codes.assign(32, 1);
  mx.scales = {1.0f};
  mx.scale_dtype = DType::kE8M0;
  FakeCheckpoint cm;
  cm.add(pack_quantized_weight(kMod, mx, DType::kBF16));
  cm.tensors[kMod + ".weight_scale"].data[0] = std::byte{0xFF};
  EXPECT_EQ(catch_error([&] { unpack_quantized_weight(kMod, mx.spec, cm.lookup()); }).item(),
            kMod + ".weight_scale");
}

TEST(QuarkKv, MergedScaleIsTheMaxClampedBelow) {
  EXPECT_EQ(quant::kv_group_scale(0.25f, 0.5f, 0.0f, DType::kBF16), 0.5f);
  EXPECT_EQ(quant::kv_group_scale(0.25f, 0.125f, 0.0f, DType::kBF16), 0.25f);
  // min_kv_scale is rounded to the scale dtype first, like
  // torch.tensor(min_kv_scale, dtype=kv_scale.dtype).
  EXPECT_EQ(quant::kv_group_scale(0.25f, 0.125f, static_cast<float>(1.1), DType::kBF16), bf16r(1.1f));
}

// ---- bit-exact against Quark's own export ---------------------------------------------------

struct GoldenCase {
  const char* scheme;
  const char* module;
};

TEST(QuarkGolden, PackAndUnpackMatchQuarkBitForBit) {
  auto quark = io::SafetensorsFile::open(kGolden / "quark_tensors.safetensors");
  auto ref = io::SafetensorsFile::open(kGolden / "reference.safetensors");
  const std::vector<GoldenCase> cases = {
      {"fp8", "model.layers.0.self_attn.k_proj"},
      {"fp8", "model.layers.0.self_attn.v_proj"},
      {"ptpc_fp8", "model.layers.0.self_attn.k_proj"},
      {"int8", "model.layers.0.self_attn.k_proj"},
      {"int4_wo_32", "model.layers.0.self_attn.k_proj"},
      {"int4_wo_32", "model.layers.0.mlp.gate_proj"},
      {"uint4_wo_32", "model.layers.0.self_attn.k_proj"},
      {"uint4_wo_32", "model.layers.0.mlp.gate_proj"},
      {"int4_wo_per_channel", "model.layers.0.self_attn.k_proj"},
      {"uint4_wo_per_channel", "model.layers.0.self_attn.k_proj"},
      {"uint4_wo_per_channel", "model.layers.0.mlp.gate_proj"},
      {"mxfp4", "model.layers.0.self_attn.k_proj"},
  };
  for (const auto& c : cases) {
    const std::string scheme = c.scheme, module = c.module;
    SCOPED_TRACE(scheme + " " + module);
    const nlohmann::json cfg = io::read_json_file(kGolden / scheme / "config.json");
    const QuantSpec spec =
        quant_spec_from_json(cfg["quantization_config"]["global_quant_config"]["weight"], "weight");
    auto lookup = [&](const std::string& n) -> std::optional<io::TensorView> {
      const io::TensorInfo* i = quark.find(scheme + "/" + n);
      if (!i) return std::nullopt;
      return quark.view(*i);
    };
    // The reference QuantizedTensor, decoded by Quark.
    QuantizedTensor expect;
    expect.spec = spec;
    const io::TensorView codes = ref.view(scheme + "/" + module + ".codes");
    expect.shape = codes.shape();
    expect.codes.resize(codes.nbytes());
    std::memcpy(expect.codes.data(), codes.data.data(), codes.nbytes());
    const io::TensorView scales = ref.view(scheme + "/" + module + ".scales");
    expect.scales.resize(scales.numel());
    expect.scale_dtype = spec.scale_format == quant::ScaleFormat::kE8M0
                             ? DType::kE8M0
                             : quark.find(scheme + "/" + module + ".weight_scale")->dtype;
    std::memcpy(expect.scales.data(), scales.data.data(), scales.nbytes());
    if (const io::TensorInfo* zi = ref.find(scheme + "/" + module + ".zero_points")) {
      const io::TensorView zp = ref.view(*zi);
      expect.zero_points.resize(zp.numel());
      std::memcpy(expect.zero_points.data(), zp.data.data(), zp.nbytes());
    }

    // Unpacking Quark's tensors gives Quark's own decoding.
    const QuantizedTensor got = unpack_quantized_weight(module, spec, lookup);
    EXPECT_EQ(got.shape, expect.shape);
    EXPECT_EQ(got.codes, expect.codes);
    EXPECT_EQ(got.scales, expect.scales);
    EXPECT_EQ(got.zero_points, expect.zero_points);
    EXPECT_EQ(got.scale_dtype, expect.scale_dtype);
    EXPECT_EQ(got.scale_dtype == DType::kE8M0 ? DType::kU8 : got.scale_dtype,
              exporter::quark_scale_dtype(spec, DType::kBF16));

    // Quark pads int4 words when out_features (172 for gate_proj) is not a
    // multiple of 8 but cannot import that; qloom reads it and refuses to
    // write it.
    if (quark_zero_point_dtype(spec) == DType::kI32 && expect.shape[0] % 8 != 0) {
      EXPECT_EQ(catch_error([&] { pack_quantized_weight(module, expect, DType::kBF16); }).kind(),
                ErrorKind::kUnsupported);
      continue;
    }
    // Packing that QuantizedTensor reproduces Quark's bytes, dtypes, shapes.
    const auto ts = pack_quantized_weight(module, expect, DType::kBF16);
    size_t n_quark = 0;
    for (const io::TensorInfo& t : quark.tensors())
      if (t.name.rfind(scheme + "/" + module + ".weight", 0) == 0) ++n_quark;
    EXPECT_EQ(ts.size(), n_quark);
    for (const auto& t : ts) {
      SCOPED_TRACE(t.name);
      auto v = lookup(t.name);
      ASSERT_TRUE(v.has_value());
      EXPECT_EQ(t.dtype, v->dtype());
      EXPECT_EQ(t.shape, v->shape());
      ASSERT_EQ(t.data.size(), v->nbytes());
      EXPECT_EQ(std::memcmp(t.data.data(), v->data.data(), t.data.size()), 0);
    }
    // The planned specs equal Quark's too.
    const auto planned = quark_weight_specs(module, expect.shape, spec, DType::kBF16);
    ASSERT_EQ(planned.size(), ts.size());

    // Static activation scales (fp8: input and KV output; int8: input + zero point).
    for (const auto role : {ActivationRole::kInput, ActivationRole::kOutput}) {
      const char* key = role == ActivationRole::kInput ? "input_tensors" : "output_tensors";
      auto layer = resolve_layer_quant_spec(cfg["quantization_config"], module);
      ASSERT_TRUE(layer.has_value());
      const std::optional<QuantSpec>& as = role == ActivationRole::kInput ? layer->input : layer->output;
      auto q = unpack_activation_qparams(module, role, lookup);
      if (!as || as->is_dynamic) {
        EXPECT_FALSE(q.has_value()) << key;
        continue;
      }
      ASSERT_TRUE(q.has_value()) << key;
      const auto act = pack_activation_qparams(module, role, *as, q->scale, q->zero_point, DType::kBF16);
      for (const auto& t : act) {
        auto v = lookup(t.name);
        ASSERT_TRUE(v.has_value()) << t.name;
        EXPECT_EQ(t.dtype, v->dtype()) << t.name;
        EXPECT_EQ(t.shape, v->shape()) << t.name;
        ASSERT_EQ(t.data.size(), v->nbytes());
        EXPECT_EQ(std::memcmp(t.data.data(), v->data.data(), t.data.size()), 0) << t.name;
      }
    }
  }
}

TEST(QuarkGolden, KvOutputScalesAreMergedPerLayer) {
  // Quark writes max(k, v) as both k_proj and v_proj output_scale.
  auto quark = io::SafetensorsFile::open(kGolden / "quark_tensors.safetensors");
  auto read = [&](const std::string& n) {
    return unpack_activation_qparams(n, ActivationRole::kOutput, [&](const std::string& t) -> std::optional<io::TensorView> {
      const io::TensorInfo* i = quark.find("fp8/" + t);
      if (!i) return std::nullopt;
      return quark.view(*i);
    });
  };
  auto k = read("model.layers.0.self_attn.k_proj");
  auto v = read("model.layers.0.self_attn.v_proj");
  ASSERT_TRUE(k && v);
  EXPECT_EQ(k->scale, v->scale);
  EXPECT_EQ(quant::kv_group_scale(k->scale, v->scale, 0.0f, DType::kBF16), k->scale);
}

}  // namespace
