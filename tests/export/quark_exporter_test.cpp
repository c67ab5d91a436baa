// Tests of QuarkExporter on the bundled demo model with hand-made
// QuantizedTensors: output contents (tensor names/dtypes/shapes equal to what
// AMD Quark exported for the same model and scheme, see tests/data/quark),
// aux files byte-identical, config.json = source + quantization_config,
// refusals, atomicity and sharding.
#include <gtest/gtest.h>

#include <sys/mount.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "export/quark_test_specs.h"
#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_exporter.h"
#include "qloom/io/json_read.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/weight_index.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace qloom;
using namespace qloom::exporter;
using quant::LayerQuantSpec;
using quant::QDtype;
using quant::QScheme;
using quant::QuantizedTensor;
using quant::QuantSpec;
using qloom::test::catch_error;
using qloom::test::read_file;
using qloom::test::TempDir;

const fs::path kDemo = QLOOM_DEMO_MODEL_DIR;
const fs::path kGolden = fs::path(QLOOM_TEST_DATA_DIR) / "quark";

std::vector<std::string> list_dir(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_linear(const std::string& module) {
  for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
    if (module.size() > std::strlen(n) && module.compare(module.size() - std::strlen(n), std::strlen(n), n) == 0)
      return true;
  return false;
}
bool is_kv(const std::string& m) {
  return m.find("k_proj") != std::string::npos || m.find("v_proj") != std::string::npos;
}

// Every linear of the demo model -> spec (optionally with KV output).
std::map<std::string, LayerQuantSpec> linears(const io::WeightIndex& w, const LayerQuantSpec& spec,
                                              const std::optional<QuantSpec>& kv,
                                              const std::vector<std::string>& skip = {}) {
  std::map<std::string, LayerQuantSpec> m;
  for (const auto& name : w.tensor_names()) {
    if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0) continue;
    const std::string mod = name.substr(0, name.size() - 7);
    if (!is_linear(mod)) continue;
    bool skipped = false;
    for (const auto& s : skip)
      if (fnmatch(mod, s)) skipped = true;
    if (skipped) continue;
    LayerQuantSpec l = spec;
    if (kv && is_kv(mod)) l.output = kv;
    m[mod] = l;
  }
  return m;
}

// A simple hand-made quantization of a source bf16 weight (not the reference
// quantizer; only its layout matters here).
QuantizedTensor quantize_by_hand(const io::TensorView& v, const QuantSpec& s) {
  const uint64_t out = v.shape()[0], in = v.shape()[1];
  std::vector<float> w(out * in);
  to_f32(v.dtype(), v.data.data(), w.data(), w.size());
  QuantizedTensor qt;
  qt.spec = s;
  qt.shape = {out, in};
  qt.codes.resize(out * in);
  qt.scale_dtype = DType::kBF16;
  if (s.dtype == QDtype::kFp8E4M3) {
    float amax = 0;
    for (float x : w) amax = std::max(amax, std::fabs(x));
    const float scale = round_to_dtype(amax / 448.0f, DType::kBF16);
    qt.scales = {scale};
    for (size_t i = 0; i < w.size(); ++i) qt.codes[i] = float_to_fp8_e4m3(w[i] / scale);
  } else if (s.dtype == QDtype::kInt4 && s.qscheme == QScheme::kPerGroup) {
    const uint64_t g = static_cast<uint64_t>(s.group_size);
    for (uint64_t o = 0; o < out; ++o)
      for (uint64_t k = 0; k < in / g; ++k) {
        float amax = 0;
        for (uint64_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(w[o * in + k * g + i]));
        const float scale = round_to_dtype(std::max(amax / 7.5f, 1e-6f), DType::kBF16);
        qt.scales.push_back(scale);
        for (uint64_t i = 0; i < g; ++i) {
          const float q = std::nearbyint(w[o * in + k * g + i] / scale);
          qt.codes[o * in + k * g + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -8.0f, 7.0f)));
        }
      }
  } else {
    ADD_FAILURE() << "quantize_by_hand: unsupported spec";
  }
  return qt;
}

struct Exported {
  std::map<std::string, QuantizedTensor> written;  // module -> what was written
  std::vector<std::string> order;                  // output tensor order
};

// Runs the whole export loop.
Exported run_export(QuarkExporter& ex, const io::ModelDir& src, const std::vector<PlannedTensor>& plan,
                    const nlohmann::ordered_json& qc) {
  Exported r;
  ex.plan(plan);
  for (const auto& s : ex.output_specs()) r.order.push_back(s.name);
  for (const PlannedTensor& p : ex.planned()) {
    switch (p.kind) {
      case PlannedKind::kCopy: ex.write_plain(p.name, src.weights().view(p.name)); break;
      case PlannedKind::kQuantizedWeight: {
        QuantizedTensor qt = quantize_by_hand(src.weights().view(p.module + ".weight"), p.spec);
        ex.write_quantized(p.module, qt);
        r.written[p.module] = std::move(qt);
        break;
      }
      case PlannedKind::kActivation: {
        const float s = round_to_dtype(p.role == ActivationRole::kInput ? 0.0125f : 0.046875f,
                                       quark_scale_dtype(p.spec, ex.model_dtype()));
        ex.write_activation(p.module, p.role, s);
        break;
      }
    }
  }
  ex.finish(qc);
  return r;
}

nlohmann::ordered_json fp8_kv_config() {
  QuarkConfigInput in;
  in.global.weight = test::fp8_per_tensor();
  in.global.input = test::fp8_per_tensor();
  in.exclude = {"lm_head"};
  in.quantizable_modules = test::demo_modules();
  in.kv_cache = test::fp8_kv();
  in.kv_cache_layers = {"*k_proj", "*v_proj"};
  in.format = QuarkFormat::k0_12;  // compared with tests/data/quark (amd-quark 0.12.post1)
  return build_quantization_config(in);
}

std::string tensor_listing(const io::WeightIndex& w) {
  std::string s;
  for (const auto& n : w.tensor_names()) {
    const io::TensorInfo* i = w.find(n);
    std::string dt(dtype_info(i->dtype).safetensors_name);
    std::string shape = "[";
    for (size_t k = 0; k < i->shape.size(); ++k) {
      if (k) shape += ", ";
      shape += std::to_string(i->shape[k]);
    }
    s += n + " " + dt + " " + shape + "]\n";
  }
  return s;
}

TEST(QuarkExporter, ExportsTheDemoModelLikeQuarkFp8Kv) {
  TempDir t("qexport");
  auto src = io::ModelDir::open(kDemo);
  LayerQuantSpec l;
  l.weight = test::fp8_per_tensor();
  l.input = test::fp8_per_tensor();
  const auto modules = linears(src.weights(), l, test::fp8_kv());
  const auto plan = plan_quark_export(src.weights(), modules);
  const fs::path out = t / "demo-fp8";
  QuarkExporter ex(src, out);
  EXPECT_EQ(ex.model_dtype(), DType::kBF16);  // from torch_dtype
  const auto qc = fp8_kv_config();
  const Exported r = run_export(ex, src, plan, qc);

  // Files: the source's top-level files with model.safetensors rewritten.
  EXPECT_EQ(list_dir(out), list_dir(kDemo));
  EXPECT_EQ(ex.output_files(), list_dir(kDemo));
  for (const auto& f : src.aux_files()) {
    if (f == "config.json") continue;
    EXPECT_EQ(read_file(out / f), read_file(kDemo / f)) << f;
  }
  // No staging leftovers next to the output.
  EXPECT_EQ(list_dir(t.path()), std::vector<std::string>{"demo-fp8"});

  // config.json = source + quantization_config, serialized like transformers.
  const std::string text = read_file(out / "config.json");
  nlohmann::json cfg = nlohmann::json::parse(text);
  EXPECT_EQ(text, dump_hf_json(cfg));
  EXPECT_EQ(cfg["quantization_config"], nlohmann::json::parse(qc.dump()));
  EXPECT_EQ(cfg["quantization_config"], io::read_json_file(kGolden / "fp8" / "config.json")["quantization_config"]);
  cfg.erase("quantization_config");
  EXPECT_EQ(cfg, src.config());

  // Tensor names, dtypes and shapes: exactly Quark's export of this model.
  auto w = io::WeightIndex::open(out);
  EXPECT_EQ(tensor_listing(w), read_file(kGolden / "fp8" / "tensors.txt"));
  // Written in plan order (source order, scales after their weight).
  std::vector<std::string> file_order;
  for (const auto& i : w.shard(0).tensors()) file_order.push_back(i.name);
  EXPECT_EQ(file_order, r.order);
  EXPECT_EQ(r.order[0], "model.embed_tokens.weight");

  // Plain tensors byte-identical; quantized ones unpack to what was written.
  for (const auto& n : src.weights().tensor_names()) {
    const std::string mod = n.substr(0, n.size() - 7);
    if (modules.count(mod)) continue;
    const auto a = src.weights().view(n), b = w.view(n);
    ASSERT_EQ(a.nbytes(), b.nbytes()) << n;
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.nbytes()), 0) << n;
  }
  auto lookup = [&](const std::string& n) -> std::optional<io::TensorView> {
    if (!w.find(n)) return std::nullopt;
    return w.view(n);
  };
  for (const auto& [mod, qt] : r.written) {
    const QuantizedTensor back = unpack_quantized_weight(mod, qt.spec, lookup);
    EXPECT_EQ(back.codes, qt.codes) << mod;
    EXPECT_EQ(back.scales, qt.scales) << mod;
  }
  auto kv = unpack_activation_qparams("model.layers.2.self_attn.v_proj", ActivationRole::kOutput, lookup);
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->scale, 0.046875f);
}

TEST(QuarkExporter, Int4WithExclusionsMatchesQuarkLayout) {
  TempDir t("qexport");
  auto src = io::ModelDir::open(kDemo);
  LayerQuantSpec l;
  l.weight = test::int4_per_group(32);
  // gate_proj / up_proj have out_features 172: Quark exports them padded but
  // cannot import them, so qloom refuses (and they must be excluded).
  Error e = catch_error([&] {
    QuarkExporter ex(src, t / "bad");
    ex.plan(plan_quark_export(src.weights(), linears(src.weights(), l, std::nullopt, {"*down_proj"})));
  });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(e.item().find("gate_proj"), std::string::npos);
  EXPECT_FALSE(fs::exists(t / "bad"));

  const auto modules = linears(src.weights(), l, std::nullopt, {"*down_proj", "*gate_proj", "*up_proj"});
  QuarkExporter ex(src, t / "int4");
  QuarkConfigInput in;
  in.global = l;
  in.exclude = {"lm_head", "*down_proj", "*gate_proj", "*up_proj"};
  in.quantizable_modules = test::demo_modules();
  const auto qc = build_quantization_config(in);
  run_export(ex, src, plan_quark_export(src.weights(), modules), qc);
  auto w = io::WeightIndex::open(t / "int4");
  // Quark's listing for int4_wo_32, with gate/up as the source's bf16 weights.
  std::istringstream golden(read_file(kGolden / "int4_wo_32" / "tensors.txt"));
  std::set<std::string> expect;
  for (std::string line; std::getline(golden, line);)
    if (line.find("gate_proj") == std::string::npos && line.find("up_proj") == std::string::npos)
      expect.insert(line);
  for (const auto& n : src.weights().tensor_names())
    if (n.find("gate_proj") != std::string::npos || n.find("up_proj") != std::string::npos) {
      const io::TensorInfo* i = src.weights().find(n);
      expect.insert(n + " BF16 [" + std::to_string(i->shape[0]) + ", " + std::to_string(i->shape[1]) + "]");
    }
  std::istringstream ours(tensor_listing(w));
  std::set<std::string> got;
  for (std::string line; std::getline(ours, line);) got.insert(line);
  EXPECT_EQ(got, expect);
  const auto cfg = io::read_json_file(t / "int4" / "config.json");
  EXPECT_EQ(cfg["quantization_config"]["exclude"].size(), 16u);  // 15 mlp projections + lm_head
}

TEST(QuarkExporter, ShardsWithAnIndex) {
  TempDir t("qexport");
  auto src = io::ModelDir::open(kDemo);
  LayerQuantSpec l;
  l.weight = test::fp8_per_tensor();
  l.input = test::fp8_per_tensor();
  ExportOptions o;
  o.max_shard_bytes = 40'000;
  QuarkExporter ex(src, t / "sharded", o);
  run_export(ex, src, plan_quark_export(src.weights(), linears(src.weights(), l, test::fp8_kv())), fp8_kv_config());
  const auto files = list_dir(t / "sharded");
  EXPECT_TRUE(std::count(files.begin(), files.end(), "model.safetensors.index.json"));
  EXPECT_FALSE(std::count(files.begin(), files.end(), "model.safetensors"));
  size_t shards = 0;
  for (const auto& f : files)
    if (f.rfind("model-", 0) == 0) ++shards;
  EXPECT_GT(shards, 1u);
  auto w = io::WeightIndex::open(t / "sharded");
  EXPECT_TRUE(w.is_sharded());
  EXPECT_EQ(w.num_shards(), shards);
  EXPECT_EQ(tensor_listing(w), read_file(kGolden / "fp8" / "tensors.txt"));
  const auto index = io::read_json_file(t / "sharded" / "model.safetensors.index.json");
  EXPECT_EQ(index["weight_map"].size(), w.num_tensors());
  EXPECT_EQ(index["metadata"]["total_size"], w.total_bytes());
}

TEST(QuarkExporter, RefusesOutputInsideOrEqualToTheSource) {
  TempDir t("qexport");
  // A copy of the demo model, so that nothing can touch the real one.
  const fs::path model = t / "model";
  fs::create_directories(model);
  for (const auto& e : fs::directory_iterator(kDemo)) fs::copy_file(e.path(), model / e.path().filename());
  auto src = io::ModelDir::open(model);
  const auto before = list_dir(model);
  for (const fs::path& bad : {model, model / "quantized", model / "a" / "b", t.path(), model / ".." / "model" / "x"}) {
    SCOPED_TRACE(bad.string());
    ExportOptions o;
    o.overwrite = true;
    Error e = catch_error([&] { QuarkExporter ex(src, bad, o); });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(e.message().find(fs::weakly_canonical(model).string()), std::string::npos) << e.message();
  }
  EXPECT_EQ(list_dir(model), before);
  EXPECT_TRUE(fs::exists(t / "model" / "config.json"));
  // A sibling directory whose name starts like the source's is fine.
  EXPECT_NO_THROW(QuarkExporter(src, t / "model-fp8"));
}

TEST(QuarkExporter, RefusesAnExistingOutputUnlessOverwrite) {
  TempDir t("qexport");
  auto src = io::ModelDir::open(kDemo);
  t.write("out/old.txt", "old");
  Error e = catch_error([&] { QuarkExporter ex(src, t / "out"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_EQ(read_file(t / "out" / "old.txt"), "old");
  ExportOptions o;
  o.overwrite = true;
  // --overwrite replaces a checkpoint only (io/output_guard.h), never a directory of other files.
  e = catch_error([&] { QuarkExporter ex(src, t / "out", o); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(e.message().find("--overwrite refuses to replace"), std::string::npos) << e.message();
  EXPECT_EQ(read_file(t / "out" / "old.txt"), "old");
  t.write("out/config.json", "{\"model_type\": \"llama\"}");
  t.write("out/model.safetensors", "an earlier export");
  LayerQuantSpec l;
  l.weight = test::fp8_per_tensor();
  QuarkExporter ex(src, t / "out", o);
  QuarkConfigInput in;
  in.global = l;
  run_export(ex, src, plan_quark_export(src.weights(), linears(src.weights(), l, std::nullopt)),
             build_quantization_config(in));
  EXPECT_FALSE(fs::exists(t / "out" / "old.txt"));
  EXPECT_TRUE(fs::exists(t / "out" / "model.safetensors"));
}

TEST(QuarkExporter, FailureLeavesNothing) {
  TempDir t("qexport");
  auto src = io::ModelDir::open(kDemo);
  LayerQuantSpec l;
  l.weight = test::fp8_per_tensor();
  l.input = test::fp8_per_tensor();
  const auto plan = plan_quark_export(src.weights(), linears(src.weights(), l, std::nullopt));
  {
    QuarkExporter ex(src, t / "out");
    ex.plan(plan);
    ex.write_plain(plan[0].name, src.weights().view(plan[0].name));
    // Out of order: a quantized write where a copy is planned.
    ASSERT_EQ(plan[1].kind, PlannedKind::kCopy);
    Error e = catch_error([&] {
      ex.write_quantized("model.layers.0.self_attn.q_proj",
                         quantize_by_hand(src.weights().view("model.layers.0.self_attn.q_proj.weight"), *l.weight));
    });
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(e.message().find(plan[1].name), std::string::npos);
    // Wrong tensor for a copy.
    EXPECT_EQ(catch_error([&] { ex.write_plain(plan[1].name, src.weights().view(plan[0].name)); }).kind(),
              ErrorKind::kUsage);
    // finish() before everything is written.
    EXPECT_EQ(catch_error([&] { ex.finish(nlohmann::ordered_json::object()); }).kind(), ErrorKind::kUsage);
  }  // destroyed without finish
  EXPECT_TRUE(list_dir(t.path()).empty());

  {
    // A quantized tensor that does not match the plan (another spec).
    QuarkExporter ex(src, t / "out");
    ex.plan(plan);
    size_t i = 0;
    for (; plan[i].kind == PlannedKind::kCopy; ++i) ex.write_plain(plan[i].name, src.weights().view(plan[i].name));
    QuantizedTensor qt = quantize_by_hand(src.weights().view(plan[i].module + ".weight"), test::int4_per_group(32));
    EXPECT_EQ(catch_error([&] { ex.write_quantized(plan[i].module, qt); }).kind(), ErrorKind::kUsage);
  }
  EXPECT_TRUE(list_dir(t.path()).empty());
}

TEST(QuarkExporter, PlanChecks) {
  TempDir t("qexport");
  auto src = io::ModelDir::open(kDemo);
  std::map<std::string, LayerQuantSpec> bad = {{"model.layers.9.self_attn.q_proj", {}}};
  Error e = catch_error([&] { plan_quark_export(src.weights(), bad); });
  EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  EXPECT_EQ(e.item(), "model.layers.9.self_attn.q_proj");

  QuarkExporter ex(src, t / "out");
  EXPECT_EQ(catch_error([&] { ex.plan({PlannedTensor::copy("nope")}); }).kind(), ErrorKind::kNotFound);
  QuarkExporter ex2(src, t / "out2");
  EXPECT_EQ(catch_error([&] {
              ex2.plan({PlannedTensor::copy("model.norm.weight"), PlannedTensor::copy("model.norm.weight")});
            }).kind(),
            ErrorKind::kUsage);
  QuarkExporter ex3(src, t / "out3");
  EXPECT_EQ(catch_error([&] {
              ex3.plan({PlannedTensor::quantized("model.layers.0.mlp.down_proj", test::int4_per_group(32), {64, 172})});
            }).kind(),
            ErrorKind::kUsage);  // group 32 does not divide 172
  EXPECT_EQ(catch_error([&] { ex3.write_plain("model.norm.weight", src.weights().view("model.norm.weight")); }).kind(),
            ErrorKind::kUsage);  // no plan yet

  // write_scale writes a planned scalar scale.
  QuarkExporter ex4(src, t / "out4");
  ex4.plan({PlannedTensor::activation("model.layers.0.self_attn.q_proj", ActivationRole::kInput, test::fp8_per_tensor()),
            PlannedTensor::copy("model.norm.weight")});
  EXPECT_EQ(ex4.next_tensor(), "model.layers.0.self_attn.q_proj.input_scale");
  EXPECT_EQ(catch_error([&] { ex4.write_scale("model.layers.0.self_attn.q_proj.input_scale", 0.1f); }).kind(),
            ErrorKind::kUsage);  // not a bf16 value
  ex4.write_scale("model.layers.0.self_attn.q_proj.input_scale", 0.125f);
  ex4.write_plain("model.norm.weight", src.weights().view("model.norm.weight"));
  EXPECT_EQ(ex4.next_tensor(), "");
  ex4.finish(nlohmann::ordered_json::object());
  auto w = io::WeightIndex::open(t / "out4");
  EXPECT_EQ(w.num_tensors(), 2u);
}

TEST(QuarkExporter, ModelDtypeFromConfig) {
  EXPECT_EQ(config_model_dtype({{"torch_dtype", "bfloat16"}}), DType::kBF16);
  EXPECT_EQ(config_model_dtype({{"dtype", "float16"}}), DType::kF16);
  EXPECT_EQ(config_model_dtype({{"text_config", {{"torch_dtype", "float32"}}}}), DType::kF32);
  EXPECT_FALSE(config_model_dtype({{"torch_dtype", "int8"}}).has_value());
  EXPECT_FALSE(config_model_dtype(nlohmann::json::object()).has_value());
}

// Disk full: a 64 KiB tmpfs (needs CAP_SYS_ADMIN; skipped otherwise). The
// writer's ENOSPC surfaces as kIo and nothing is left on the file system.
TEST(QuarkExporter, DiskFullIsKIoAndLeavesNothing) {
  TempDir t("qexport");
  const fs::path mnt = t.mkdir("small");
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << ")";
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt};
  auto src = io::ModelDir::open(kDemo);
  LayerQuantSpec l;
  l.weight = test::fp8_per_tensor();
  Error e = catch_error([&] {
    QuarkExporter ex(src, mnt / "out");
    QuarkConfigInput in;
    in.global = l;
    run_export(ex, src, plan_quark_export(src.weights(), linears(src.weights(), l, std::nullopt)),
               build_quantization_config(in));
  });
  EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.message();
  EXPECT_TRUE(list_dir(mnt).empty());
}

}  // namespace
