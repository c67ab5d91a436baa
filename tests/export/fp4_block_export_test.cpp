// The hf_format layout of the fp4 block schemes (export/fp4_block_tensors.h):
// names, dtypes, shapes and bytes equal to what AMD Quark 0.13 exported for
// the demo model (tests/data/fp4_block/quark_demo.safetensors), the read-back
// round trip, the refusals, and a whole quantize job on the demo model that
// validates (steps 1-5) and evaluates through the simulate runtime.
#include "qloom/export/fp4_block_tensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/export/checkpoint_runtime.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/json_read.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/fp4_block.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/scheme_registry.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/validator.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

const quant::LayerQuantSpec& spec_of(const char* scheme) { return quant::get_scheme(scheme).linear; }

TEST(Fp4BlockTensors, LayoutOfEachScheme) {
  const std::vector<uint64_t> shape = {64, 96};
  auto specs = quark_weight_specs("m", shape, *spec_of("nvfp4").weight, DType::kBF16, PackOrder::kReorder,
                                  spec_of("nvfp4").weight_stage2);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name, "m.weight");
  EXPECT_EQ(specs[0].dtype, DType::kU8);
  EXPECT_EQ(specs[0].shape, (std::vector<uint64_t>{64, 48}));
  EXPECT_EQ(specs[1].name, "m.weight_scale");
  EXPECT_EQ(specs[1].dtype, DType::kF8_E4M3);
  EXPECT_EQ(specs[1].shape, (std::vector<uint64_t>{64, 6}));
  EXPECT_EQ(specs[2].name, "m.weight_scale_2");
  EXPECT_EQ(specs[2].dtype, DType::kF32);
  EXPECT_TRUE(specs[2].shape.empty());
  specs = quark_weight_specs("m", shape, *spec_of("amdfp4_global32").weight, DType::kBF16, PackOrder::kReorder,
                             spec_of("amdfp4_global32").weight_stage2);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[1].dtype, DType::kU8);
  EXPECT_EQ(specs[1].shape, (std::vector<uint64_t>{64, 3}));
  specs = quark_weight_specs("m", shape, *spec_of("amdfp4").weight, DType::kF16);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[1].dtype, DType::kU8);
  EXPECT_EQ(specs[1].shape, (std::vector<uint64_t>{64, 6}));
  EXPECT_EQ(scale2_tensor_name("m", ActivationRole::kInput), "m.input_scale_2");
  // A group that does not divide in_features; a two-stage spec without its stage.
  EXPECT_EQ(test::catch_error([&] { quark_weight_specs("m", {64, 40}, *spec_of("nvfp4").weight, DType::kBF16,
                                                       PackOrder::kReorder, spec_of("nvfp4").weight_stage2); })
                .kind(),
            ErrorKind::kUsage);
  EXPECT_EQ(test::catch_error([&] { quark_weight_specs("m", shape, *spec_of("nvfp4").weight, DType::kBF16); }).kind(),
            ErrorKind::kUnsupported);
}

struct Module {
  std::vector<float> w;
  uint64_t out = 0, in = 0;
};

Module demo_weight(const io::SafetensorsFile& f, const std::string& name) {
  const io::TensorView t = f.view(name);
  Module m{std::vector<float>(t.numel()), t.shape()[0], t.shape()[1]};
  to_f32(t.dtype(), t.data.data(), m.w.data(), m.w.size());
  return m;
}

// Quark's bytes for layer 0's k_proj (its own global scale: for nvfp4 the
// q/k/v group's, taken from Quark's weight_scale_2).
TEST(Fp4BlockTensors, PackedBytesEqualQuarks) {
  const auto src = io::SafetensorsFile::open(fs::path(QLOOM_DEMO_MODEL_DIR) / "model.safetensors");
  const auto gold = io::SafetensorsFile::open(fs::path(QLOOM_TEST_DATA_DIR) / "fp4_block/quark_demo.safetensors");
  const std::string m = "model.layers.0.self_attn.k_proj";
  for (const char* scheme : {"nvfp4", "amdfp4", "amdfp4_g32"}) {
    SCOPED_TRACE(scheme);
    const auto& l = spec_of(scheme);
    const Module w = demo_weight(src, m + ".weight");
    float g = 1.0f;
    if (l.weight_stage2) std::memcpy(&g, gold.view(std::string(scheme) + "/" + m + ".weight_scale_2").data.data(), 4);
    const quant::QuantizedTensor qt =
        quant::quantize_fp4_block(w.w.data(), w.out, w.in, *l.weight, l.weight_stage2, g, m, DType::kBF16);
    const std::vector<ExportedTensor> ts = pack_quantized_weight(m, qt, DType::kBF16);
    ASSERT_EQ(ts.size(), l.weight_stage2 ? 3u : 2u);
    for (const ExportedTensor& t : ts) {
      const io::TensorInfo* gi = gold.find(std::string(scheme) + "/" + t.name);
      ASSERT_NE(gi, nullptr) << t.name;
      EXPECT_EQ(gi->dtype, t.dtype) << t.name;
      EXPECT_EQ(gi->shape, t.shape) << t.name;
      const auto gv = gold.view(*gi).data;
      ASSERT_EQ(gv.size(), t.data.size()) << t.name;
      EXPECT_EQ(std::memcmp(gv.data(), t.data.data(), gv.size()), 0) << t.name;
    }
    // Read back: the same QuantizedTensor.
    std::map<std::string, io::TensorView> by_name;
    std::vector<io::TensorInfo> infos(ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      infos[i].name = ts[i].name;
      infos[i].dtype = ts[i].dtype;
      infos[i].shape = ts[i].shape;
      by_name[ts[i].name] = io::TensorView{&infos[i], ts[i].data};
    }
    const TensorLookup lookup = [&](const std::string& n) -> std::optional<io::TensorView> {
      auto it = by_name.find(n);
      if (it == by_name.end()) return std::nullopt;
      return it->second;
    };
    const quant::QuantizedTensor back = unpack_quantized_weight(m, *l.weight, lookup, PackOrder::kReorder, l.weight_stage2);
    EXPECT_EQ(back.codes, qt.codes);
    EXPECT_EQ(back.scales, qt.scales);
    EXPECT_EQ(back.scale_dtype, qt.scale_dtype);
    EXPECT_EQ(back.global_scale, qt.global_scale);
    EXPECT_EQ(quant::dequantize(back), quant::dequantize(qt));
    // Without weight_scale_2 a two-stage weight cannot be read.
    if (l.weight_stage2) {
      by_name.erase(m + ".weight_scale_2");
      EXPECT_EQ(test::catch_error([&] { unpack_quantized_weight(m, *l.weight, lookup, PackOrder::kReorder, l.weight_stage2); })
                    .kind(),
                ErrorKind::kNotFound);
    }
  }
}

TEST(Fp4BlockTensors, PackRefusesWhatItCannotWrite) {
  const auto& l = spec_of("nvfp4");
  std::vector<float> w(32 * 16, 0.25f);
  quant::QuantizedTensor qt = quant::quantize_fp4_block(w.data(), 32, 16, *l.weight, l.weight_stage2, 0.001f, "m");
  quant::QuantizedTensor bad = qt;
  bad.scales[3] = 0.3f;  // not an e4m3 value
  EXPECT_EQ(test::catch_error([&] { pack_fp4_block_weight("m", bad); }).kind(), ErrorKind::kUsage);
  bad = qt;
  bad.global_scale = 0.0f;
  EXPECT_EQ(test::catch_error([&] { pack_fp4_block_weight("m", bad); }).kind(), ErrorKind::kUsage);
  bad = qt;
  bad.scale_dtype = DType::kF32;
  EXPECT_EQ(test::catch_error([&] { pack_fp4_block_weight("m", bad); }).kind(), ErrorKind::kUsage);
  bad = qt;
  bad.codes[0] = 16;
  EXPECT_EQ(test::catch_error([&] { pack_fp4_block_weight("m", bad); }).kind(), ErrorKind::kUsage);
}

// The whole job on the demo model (down_proj excluded: in_features 172),
// as Quark lays it out: layer 0's tensor names and the config's list specs;
// then validate's steps 1-5 and the simulate runtime.
TEST(Fp4BlockTensors, DemoModelQuantizesValidatesAndRuns) {
  for (const char* scheme : {"nvfp4", "amdfp4"}) {
    SCOPED_TRACE(scheme);
    test::TempDir tmp;
    job::QuantizeOptions o;
    o.model_dir = QLOOM_DEMO_MODEL_DIR;
    o.output_dir = tmp.path() / "q";
    o.quant_scheme = scheme;
    o.exclude_layers = {"*down_proj"};
    o.num_calib_data = 2;
    o.seq_len = 32;
    o.threads = 2;
    job::quantize_model(o);
    const auto idx = io::WeightIndex::open(o.output_dir);
    const std::string q = "model.layers.0.self_attn.q_proj";
    EXPECT_NE(idx.find(q + ".weight_scale"), nullptr);
    const bool two = std::string(scheme) == "nvfp4";
    EXPECT_EQ(idx.find(q + ".weight_scale_2") != nullptr, two);
    EXPECT_EQ(idx.find(q + ".input_scale_2") != nullptr, two);
    EXPECT_EQ(idx.find(q + ".input_scale"), nullptr);
    if (two) {  // shared q/k/v global scales
      const auto a = idx.view(q + ".weight_scale_2").data, b = idx.view("model.layers.0.self_attn.v_proj.weight_scale_2").data;
      EXPECT_EQ(std::memcmp(a.data(), b.data(), 4), 0);
      const auto c = idx.view("model.layers.0.self_attn.o_proj.weight_scale_2").data;
      EXPECT_NE(std::memcmp(a.data(), c.data(), 4), 0);
    }
    const nlohmann::json cfg = io::read_json_file(o.output_dir / "config.json");
    const auto& w = cfg["quantization_config"]["global_quant_config"]["weight"];
    EXPECT_EQ(w.is_array(), two);

    validate::ValidateOptions vo;
    vo.numeric_step = validate::check_dequantized_weights;
    const validate::ValidationReport r = validate::validate_checkpoint(QLOOM_DEMO_MODEL_DIR, o.output_dir, vo);
    for (int n = 1; n <= 5; ++n) {
      const validate::StepResult* s = r.step(n);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->status, validate::StepResult::kOk) << "step " << n << ": " << s->summary;
    }
    EXPECT_EQ(r.step(5)->data["reproduced_rtn"], r.step(5)->data["checked"]);
    const LoadedModel lm = load_for_eval(o.output_dir);
    EXPECT_NE(lm.runtime.description.find("simulated input quantization"), std::string::npos)
        << lm.runtime.description;
  }
}

}  // namespace
}  // namespace qloom::exporter
