// Tests of the Quark -> compressed-tensors converter on the demo model: each
// scheme is quantized by job::quantize_model into a temp dir, converted,
// and read back: tensor names / dtypes / shapes, the int32 packing against a
// plain reference unpack written here, dequantized weights equal to qloom's
// own dequantization of the Quark checkpoint (exactly, in f32), config keys,
// refusals (nothing written) and byte-identical repeated output.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export/compressed_tensors_test_util.h"
#include "qloom/core/error.h"
#include "qloom/export/compressed_tensors_export.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"
#include "qloom/quant/quantize_fast.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;
using ct_test::ct_dequantize;
using ct_test::quantize_demo;
using ct_test::quark_dequantized;
using ct_test::read_ints;
using test::catch_error;
using test::read_file;
using test::TempDir;

nlohmann::json config_of(const fs::path& d) { return nlohmann::json::parse(read_file(d / "config.json")); }

struct Converted {
  TempDir tmp{"ct"};
  fs::path quark, ct;
  CtExportSummary summary;
};

std::unique_ptr<Converted> convert(const std::string& scheme, const std::vector<std::string>& extra = {}) {
  auto c = std::make_unique<Converted>();
  c->quark = c->tmp / "quark";
  c->ct = c->tmp / "ct";
  quantize_demo(scheme, c->quark, extra);
  c->summary = export_compressed_tensors(c->quark, c->ct);
  return c;
}

const char* kKProj = "model.layers.0.self_attn.k_proj";

TEST(CompressedTensors, Int4GroupPackedExactlyAndConfig) {
  auto c = convert("int4_wo_32");
  const auto w = io::WeightIndex::open(c->ct);
  const std::string m = kKProj;
  ASSERT_NE(w.find(m + ".weight_packed"), nullptr);
  EXPECT_EQ(w.find(m + ".weight"), nullptr);
  EXPECT_EQ(w.find(m + ".weight_zero_point"), nullptr);  // symmetric: none (as compressed-tensors)
  EXPECT_EQ(w.find(m + ".weight_packed")->dtype, DType::kI32);
  EXPECT_EQ(w.find(m + ".weight_packed")->shape, (std::vector<uint64_t>{32, 8}));
  EXPECT_EQ(w.find(m + ".weight_scale")->dtype, DType::kBF16);
  EXPECT_EQ(w.find(m + ".weight_scale")->shape, (std::vector<uint64_t>{32, 2}));
  EXPECT_EQ(w.find(m + ".weight_shape")->dtype, DType::kI64);
  EXPECT_EQ(read_ints(w, m + ".weight_shape"), (std::vector<int64_t>{32, 64}));

  // Plain reference unpack: nibble k of word j holds element 8j + k, code + 8.
  const auto q = io::ModelDir::open(c->quark);
  const quant::QuantizedTensor qt =
      unpack_quantized_weight(m, *resolve_layer_quant_spec(q.config()["quantization_config"], m)->weight,
                              index_lookup(q.weights()));
  const std::vector<int64_t> packed = read_ints(w, m + ".weight_packed");
  size_t mismatches = 0;
  for (uint64_t r = 0; r < 32; ++r)
    for (uint64_t col = 0; col < 64; ++col) {
      const uint32_t word = static_cast<uint32_t>(packed[r * 8 + col / 8]);
      const int code = static_cast<int>((word >> (4 * (col % 8))) & 0xF) - 8;
      mismatches += code != static_cast<int8_t>(qt.codes[r * 64 + col]);
    }
  EXPECT_EQ(mismatches, 0u);

  const nlohmann::json qc = config_of(c->ct)["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "compressed-tensors");
  EXPECT_EQ(qc["format"], "pack-quantized");
  EXPECT_EQ(qc["quantization_status"], "compressed");
  EXPECT_EQ(qc["version"], "0.19.0");
  EXPECT_TRUE(qc["kv_cache_scheme"].is_null());
  const nlohmann::json& g = qc["config_groups"]["group_0"];
  EXPECT_EQ(g["targets"], nlohmann::json::array({"Linear"}));
  EXPECT_EQ(g["format"], "pack-quantized");
  EXPECT_EQ(g["weights"]["num_bits"], 4);
  EXPECT_EQ(g["weights"]["type"], "int");
  EXPECT_EQ(g["weights"]["strategy"], "group");
  EXPECT_EQ(g["weights"]["group_size"], 32);
  EXPECT_EQ(g["weights"]["symmetric"], true);
  EXPECT_TRUE(g["weights"]["zp_dtype"].is_null());
  EXPECT_TRUE(g["input_activations"].is_null());
  // Excluded (down_proj, and gate/up_proj whose 172 outputs int4 cannot
  // hold) and the tied lm_head are ignored by name.
  const std::set<std::string> ignore(qc["ignore"].begin(), qc["ignore"].end());
  EXPECT_TRUE(ignore.count("lm_head"));
  EXPECT_TRUE(ignore.count("model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(ignore.count("model.layers.4.mlp.gate_proj"));
  EXPECT_FALSE(ignore.count(m));
  EXPECT_EQ(c->summary.linears_quantized, 20u);  // q, k, v, o of 5 layers
  // Quark's config minus quantization_config is kept.
  nlohmann::json a = config_of(c->quark), b = config_of(c->ct);
  a.erase("quantization_config");
  b.erase("quantization_config");
  EXPECT_EQ(a, b);
  EXPECT_EQ(read_file(c->ct / "tokenizer.json"), read_file(c->quark / "tokenizer.json"));
}

TEST(CompressedTensors, Uint4ZeroPointsPackedAlongOutputs) {
  for (const char* scheme : {"uint4_wo_32", "uint4_wo_per_channel"}) {
    auto c = convert(scheme);
    const auto w = io::WeightIndex::open(c->ct);
    const std::string m = kKProj;
    const bool group = std::string(scheme) == "uint4_wo_32";
    const uint64_t groups = group ? 2 : 1;
    ASSERT_NE(w.find(m + ".weight_zero_point"), nullptr) << scheme;
    EXPECT_EQ(w.find(m + ".weight_zero_point")->dtype, DType::kI32);
    EXPECT_EQ(w.find(m + ".weight_zero_point")->shape, (std::vector<uint64_t>{4, groups}));
    EXPECT_EQ(w.find(m + ".weight_scale")->shape, (std::vector<uint64_t>{32, groups}));
    const auto q = io::ModelDir::open(c->quark);
    const quant::QuantizedTensor qt =
        unpack_quantized_weight(m, *resolve_layer_quant_spec(q.config()["quantization_config"], m)->weight,
                                index_lookup(q.weights()));
    // Reference: word [o / 8, g], nibble o % 8 = (zp - 8) + 8 = Quark's zp.
    const std::vector<int64_t> zp = read_ints(w, m + ".weight_zero_point");
    size_t bad = 0;
    for (uint64_t o = 0; o < 32; ++o)
      for (uint64_t g = 0; g < groups; ++g) {
        const uint32_t word = static_cast<uint32_t>(zp[(o / 8) * groups + g]);
        bad += static_cast<int32_t>((word >> (4 * (o % 8))) & 0xF) != qt.zero_points[o * groups + g];
      }
    EXPECT_EQ(bad, 0u) << scheme;
    const nlohmann::json wa = config_of(c->ct)["quantization_config"]["config_groups"]["group_0"]["weights"];
    EXPECT_EQ(wa["symmetric"], false);
    EXPECT_EQ(wa["zp_dtype"], "torch.int8");
    EXPECT_EQ(wa["strategy"], group ? "group" : "channel");
  }
}

// Every quantized linear of a conversion dequantizes (reference code here)
// to exactly qloom's dequantization of the Quark checkpoint.
void expect_dequant_equal(const Converted& c) {
  const std::map<std::string, std::vector<float>> ours = quark_dequantized(c.quark);
  ASSERT_FALSE(ours.empty());
  const auto w = io::WeightIndex::open(c.ct);
  const nlohmann::json qc = config_of(c.ct)["quantization_config"];
  for (const auto& [module, deq] : ours) {
    const std::vector<float> got = ct_dequantize(w, qc, module);
    ASSERT_EQ(got.size(), deq.size()) << module;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(deq[i]);
    EXPECT_EQ(bad, 0u) << module;
  }
}

TEST(CompressedTensors, DequantizedEqualsQloomForEveryWeightScheme) {
  for (const char* scheme : {"int4_wo_32", "int4_wo_64", "uint4_wo_64", "int4_wo_per_channel", "uint4_wo_per_channel",
                             "ptpc_fp8"}) {
    SCOPED_TRACE(scheme);
    expect_dequant_equal(*convert(scheme));
  }
}

TEST(CompressedTensors, PtpcFp8IsFloatQuantizedWithDynamicTokens) {
  auto c = convert("ptpc_fp8");
  const auto w = io::WeightIndex::open(c->ct);
  const std::string m = "model.layers.0.mlp.down_proj";  // excluded in demo options
  EXPECT_EQ(w.find(std::string(kKProj) + ".weight")->dtype, DType::kF8_E4M3);
  EXPECT_EQ(w.find(std::string(kKProj) + ".weight_scale")->shape, (std::vector<uint64_t>{32, 1}));
  EXPECT_EQ(w.find(std::string(kKProj) + ".input_scale"), nullptr);
  EXPECT_EQ(w.find(m + ".weight")->dtype, DType::kBF16);
  const nlohmann::json g = config_of(c->ct)["quantization_config"]["config_groups"]["group_0"];
  EXPECT_EQ(g["format"], "float-quantized");
  EXPECT_EQ(g["weights"]["strategy"], "channel");
  EXPECT_EQ(g["input_activations"]["strategy"], "token");
  EXPECT_EQ(g["input_activations"]["dynamic"], true);
  EXPECT_EQ(g["input_activations"]["type"], "float");
}

TEST(CompressedTensors, StaticFp8WithKvCacheScales) {
  auto c = convert("fp8", {"--kv_cache_dtype", "fp8"});
  expect_dequant_equal(*c);
  const auto w = io::WeightIndex::open(c->ct);
  const auto q = io::WeightIndex::open(c->quark);
  const std::string attn = "model.layers.2.self_attn";
  for (const char* kv : {"k", "v"}) {
    const std::string name = attn + "." + kv + "_scale";
    ASSERT_NE(w.find(name), nullptr) << name;
    EXPECT_EQ(w.find(name)->shape, (std::vector<uint64_t>{1}));
    const io::TensorView src = q.view(attn + "." + kv + "_proj.output_scale");
    EXPECT_EQ(w.find(name)->dtype, src.dtype());
    const auto dst = w.view(name).data;
    ASSERT_EQ(dst.size(), src.data.size());
    EXPECT_EQ(std::memcmp(dst.data(), src.data.data(), dst.size()), 0) << name;
    EXPECT_EQ(w.find(attn + "." + kv + "_proj.output_scale"), nullptr);
  }
  const io::TensorView is = q.view(std::string(kKProj) + ".input_scale");
  EXPECT_EQ(w.find(std::string(kKProj) + ".input_scale")->shape, (std::vector<uint64_t>{1}));
  EXPECT_EQ(std::memcmp(w.view(std::string(kKProj) + ".input_scale").data.data(), is.data.data(), is.data.size()), 0);
  const nlohmann::json qc = config_of(c->ct)["quantization_config"];
  EXPECT_EQ(qc["format"], "float-quantized");
  EXPECT_EQ(qc["kv_cache_scheme"]["type"], "float");
  EXPECT_EQ(qc["kv_cache_scheme"]["num_bits"], 8);
  EXPECT_EQ(qc["kv_cache_scheme"]["strategy"], "tensor");
  EXPECT_EQ(qc["kv_cache_scheme"]["dynamic"], false);
  EXPECT_EQ(qc["config_groups"]["group_0"]["input_activations"]["strategy"], "tensor");
  EXPECT_EQ(qc["config_groups"]["group_0"]["input_activations"]["dynamic"], false);
  EXPECT_EQ(c->summary.kv_layers, 5u);
}

TEST(CompressedTensors, Int8IsIntQuantizedWithoutZeroPoints) {
  auto c = convert("int8");
  expect_dequant_equal(*c);
  const auto w = io::WeightIndex::open(c->ct);
  EXPECT_EQ(w.find(std::string(kKProj) + ".weight")->dtype, DType::kI8);
  EXPECT_EQ(w.find(std::string(kKProj) + ".weight_zero_point"), nullptr);
  EXPECT_EQ(w.find(std::string(kKProj) + ".input_zero_point"), nullptr);
  EXPECT_EQ(w.find(std::string(kKProj) + ".weight_scale")->shape, (std::vector<uint64_t>{1}));
  const nlohmann::json g = config_of(c->ct)["quantization_config"]["config_groups"]["group_0"];
  EXPECT_EQ(g["format"], "int-quantized");
  EXPECT_EQ(g["weights"]["type"], "int");
  EXPECT_EQ(g["weights"]["strategy"], "tensor");
  EXPECT_EQ(g["input_activations"]["type"], "int");
  EXPECT_EQ(g["input_activations"]["dynamic"], false);
}

TEST(CompressedTensors, PerLayerSchemesBecomeConfigGroups) {
  auto c = convert("int4_wo_32", {"--layer_quant_scheme", "*o_proj", "ptpc_fp8"});
  expect_dequant_equal(*c);
  const nlohmann::json qc = config_of(c->ct)["quantization_config"];
  EXPECT_EQ(qc["format"], "mixed-precision");
  ASSERT_EQ(qc["config_groups"].size(), 2u);
  std::map<std::string, std::set<std::string>> targets;
  for (const auto& [name, g] : qc["config_groups"].items())
    for (const auto& t : g["targets"]) targets[g["format"]].insert(t);
  EXPECT_EQ(targets["float-quantized"].size(), 5u);
  EXPECT_TRUE(targets["float-quantized"].count("model.layers.3.self_attn.o_proj"));
  EXPECT_EQ(targets["pack-quantized"].size(), 15u);
  EXPECT_TRUE(targets["pack-quantized"].count("model.layers.3.self_attn.q_proj"));
  EXPECT_EQ(c->summary.config_groups, 2u);
}

TEST(CompressedTensors, RefusesMxfp4BeforeWritingAnything) {
  TempDir tmp("ct");
  quantize_demo("mxfp4", tmp / "quark");
  const Error e = catch_error([&] { export_compressed_tensors(tmp / "quark", tmp / "ct"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.item().find("model.layers.0."), std::string::npos) << e.item();
  EXPECT_NE(e.message().find("e8m0"), std::string::npos) << e.message();
  EXPECT_FALSE(fs::exists(tmp / "ct"));
  for (const auto& f : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(f.path().filename().string().find(".ct"), std::string::npos) << f.path();
}

TEST(CompressedTensors, RefusesBadInputAndOutputDirs) {
  TempDir tmp("ct");
  EXPECT_EQ(catch_error([&] { export_compressed_tensors(tmp / "missing", tmp / "o"); }).kind(), ErrorKind::kNotFound);
  // An unquantized model is not a Quark checkpoint.
  const Error plain = catch_error([&] { export_compressed_tensors(QLOOM_DEMO_MODEL_DIR, tmp / "o"); });
  EXPECT_EQ(plain.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(plain.item(), "quantization_config.quant_method");
  EXPECT_FALSE(fs::exists(tmp / "o"));

  quantize_demo("int4_wo_32", tmp / "quark");
  CtExportOptions overwrite;
  overwrite.overwrite = true;
  for (const fs::path& bad : {tmp / "quark", tmp / "quark" / "sub", fs::path(tmp.path())}) {
    const Error e = catch_error([&] { export_compressed_tensors(tmp / "quark", bad, overwrite); });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
  }
  EXPECT_FALSE(fs::exists(tmp / "quark" / "sub"));
  tmp.mkdir("exists");
  const Error e = catch_error([&] { export_compressed_tensors(tmp / "quark", tmp / "exists"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_TRUE(fs::is_empty(tmp / "exists"));
  const CtExportSummary s = export_compressed_tensors(tmp / "quark", tmp / "exists", overwrite);
  EXPECT_TRUE(fs::exists(tmp / "exists" / "model.safetensors"));
  EXPECT_EQ(s.format, "pack-quantized");
}

TEST(CompressedTensors, ByteIdenticalTwiceShardedAndProgress) {
  TempDir tmp("ct");
  quantize_demo("uint4_wo_32", tmp / "quark");
  size_t calls = 0, total = 0;
  CtExportOptions o;
  o.max_shard_bytes = 100'000;
  o.progress = [&](size_t i, size_t n, const std::string& name) {
    EXPECT_EQ(i, ++calls);
    EXPECT_FALSE(name.empty());
    total = n;
  };
  const CtExportSummary a = export_compressed_tensors(tmp / "quark", tmp / "a", o);
  o.progress = {};
  const CtExportSummary b = export_compressed_tensors(tmp / "quark", tmp / "b", o);
  EXPECT_EQ(calls, total);
  EXPECT_EQ(a.tensors_out, total);
  ASSERT_EQ(a.files, b.files);
  EXPECT_TRUE(std::find(a.files.begin(), a.files.end(), "model.safetensors.index.json") != a.files.end());
  for (const std::string& f : a.files) EXPECT_EQ(read_file(tmp / "a" / f), read_file(tmp / "b" / f)) << f;
}

}  // namespace
}  // namespace qloom::exporter
