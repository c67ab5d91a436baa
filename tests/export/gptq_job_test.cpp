// `qloom quantize --quant_algo gptq` on the demo model: the layer-by-layer
// pipeline's tensors are written layer by layer, quantization_config carries
// Quark's GPTQ algo_config, the weights differ from RTN and reduce the
// layers' output error, and static activation / KV scales come from the same
// pass.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/job/quantize_job.h"
#include "qloom/io/safetensors_reader.h"
#include "qloom/io/weight_index.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::exporter {
namespace {

namespace fs = std::filesystem;

job::QuantizeOptions gptq_options(const fs::path& out, const std::string& scheme) {
  job::QuantizeOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.output_dir = out;
  o.quant_scheme = scheme;
  o.exclude_unsupported = true;  // int4: the MLP's 172 columns / rows do not fit the layout
  o.quant_algo = "gptq";
  o.num_calib_data = 8;
  o.seq_len = 64;
  o.threads = 2;
  return o;
}

nlohmann::json read_config(const fs::path& dir) {
  std::ifstream f(dir / "config.json");
  return nlohmann::json::parse(f);
}

TEST(GptqJob, WritesLayerByLayerWithQuarksAlgoConfig) {
  test::TempDir tmp;
  const job::QuantizeSummary s = job::quantize_model(gptq_options(tmp.path() / "g", "int4_wo_64"));
  EXPECT_TRUE(s.calibrated);
  EXPECT_EQ(s.calib_samples, 8u);
  EXPECT_GT(s.algo_linears, 0u);
  EXPECT_EQ(s.algo_fallbacks, 0u);
  EXPECT_EQ(s.layer_seconds.size(), 5u);

  const nlohmann::json qc = read_config(tmp.path() / "g")["quantization_config"];
  ASSERT_TRUE(qc["algo_config"].is_array());
  ASSERT_EQ(qc["algo_config"].size(), 1u);
  const nlohmann::json& a = qc["algo_config"][0];
  EXPECT_EQ(a["name"], "gptq");
  EXPECT_EQ(a["block_size"], 128);
  EXPECT_EQ(a["damp_percent"], 0.01);
  EXPECT_EQ(a["desc_act"], true);
  EXPECT_EQ(a["static_groups"], true);
  EXPECT_EQ(a["model_decoder_layers"], "model.layers");
  // Quark writes its llama template's list (GPTQ_MAP, algo_configs.py) as
  // is, in its order, also when layers are excluded (amd-quark 0.13 on the
  // demo model with the MLP excluded lists gate/up/down all the same).
  EXPECT_EQ(a["inside_layer_modules"],
            nlohmann::json::array({"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.o_proj",
                                   "mlp.up_proj", "mlp.gate_proj", "mlp.down_proj"}));
  EXPECT_EQ(a.size(), 7u);

  // Tensor order in the file: by layer.
  const io::SafetensorsFile f = io::SafetensorsFile::open(tmp.path() / "g" / "model.safetensors");
  std::vector<std::pair<uint64_t, std::string>> by_offset;
  for (const io::TensorInfo& t : f.tensors()) by_offset.emplace_back(t.data_begin, t.name);
  std::sort(by_offset.begin(), by_offset.end());
  int last_layer = -1;
  for (const auto& [off, name] : by_offset) {
    const size_t at = name.find("layers.");
    if (at == std::string::npos) continue;
    const int layer = std::stoi(name.substr(at + 7));
    EXPECT_GE(layer, last_layer) << name;
    last_layer = layer;
  }

  // Same scheme by RTN: same tensors, different codes.
  auto rtn = gptq_options(tmp.path() / "r", "int4_wo_64");
  rtn.quant_algo.clear();
  (void)job::quantize_model(rtn);
  const auto g = io::WeightIndex::open(tmp.path() / "g"), r = io::WeightIndex::open(tmp.path() / "r");
  EXPECT_EQ(g.tensor_names().size(), r.tensor_names().size());
  const std::string q = "model.layers.2.self_attn.q_proj.weight";
  const auto gv = g.view(q).data, rv = r.view(q).data;
  ASSERT_EQ(gv.size(), rv.size());
  EXPECT_FALSE(std::equal(gv.begin(), gv.end(), rv.begin())) << "GPTQ left the codes of " << q << " as RTN's";
  EXPECT_TRUE(read_config(tmp.path() / "r")["quantization_config"]["algo_config"].is_null());
}

TEST(GptqJob, StaticActivationAndKvScalesFromTheSamePass) {
  test::TempDir tmp;
  auto o = gptq_options(tmp.path() / "g", "fp8");
  o.kv_cache_dtype = "fp8";
  o.exclude_unsupported = false;
  const job::QuantizeSummary s = job::quantize_model(o);
  EXPECT_GT(s.static_scales, 0u);
  EXPECT_GT(s.algo_linears, 0u);
  const auto w = io::WeightIndex::open(tmp.path() / "g");
  for (const char* name : {"model.layers.0.self_attn.q_proj.input_scale", "model.layers.4.mlp.down_proj.input_scale",
                           "model.layers.3.self_attn.k_proj.output_scale"})
    EXPECT_NE(w.find(name), nullptr) << name;
}

TEST(GptqJob, RefusesUnknownAndUnimplementedAlgorithms) {
  test::TempDir tmp;
  auto o = gptq_options(tmp.path() / "g", "int4_wo_64");
  o.quant_algo = "gptq,autoround";
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).kind(), ErrorKind::kUnsupported);
  o.quant_algo = "gtpq";
  EXPECT_EQ(test::catch_error([&] { job::quantize_model(o); }).kind(), ErrorKind::kUsage);
  EXPECT_FALSE(fs::exists(tmp.path() / "g"));
}

}  // namespace
}  // namespace qloom::exporter
