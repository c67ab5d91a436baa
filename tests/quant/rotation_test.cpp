// quant/rotation: the config read strictly with Quark's llama defaults, and
// the rotation as an exact identity of the model's function. The bundled
// model (llama, tied embeddings, hidden 64, head_dim 8) is widened to F32
// first, so the rotated weights carry only fp32 rounding: logits must match
// the source's within 5e-6 x max |logit| (measured 5.7e-7) (R1; R1 + R2; R1 in blocks of 32).
// The model as stored (BF16) rotates with bf16 rounding after each step
// (Quark's sequence): its logits stay within 5% of the logit range, top-1
// the same at >= 90% of positions.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/engine/model.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/safetensors_writer.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/rotation.h"
#include "qloom/quant/rotation_config.h"
#include "support/temp_dir.h"

namespace qloom::quant {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

ErrorKind kind_of(const json& j, const char* model_type = "llama") {
  try {
    (void)RotationConfig::from_json(j, model_type);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kInternal;  // "no error"
}

TEST(RotationConfig, LlamaDefaultsAreQuarks) {
  std::ifstream in(std::string(QLOOM_TEST_DATA_DIR) + "/rotation/quark_hadamard.json");
  ASSERT_TRUE(in);
  const json quark = json::parse(in)["llama_algo_config"];
  const json ours = json::parse(RotationConfig::from_json(nullptr, "llama").to_json().dump());
  EXPECT_EQ(ours, quark) << ours.dump(1);
  // The stage writes the same dict.
  EXPECT_EQ(json::parse(make_algorithm_stage("rotation", nullptr, "llama")->algo_config().dump()), quark);
}

TEST(RotationConfig, StrictKeysAndRefusals) {
  EXPECT_EQ(kind_of({{"r5", true}}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({{"scaling_layers", {{"first_layer", json::array()}}}}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({{"r1", "yes"}}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({{"name", "quarot"}}), ErrorKind::kUsage);
  EXPECT_EQ(kind_of({{"r1", false}, {"online_r1_rotation", false}}), ErrorKind::kUsage);
  for (const char* k : {"r3", "r4", "random_r1", "random_r2", "trainable", "online_r1_rotation"})
    EXPECT_EQ(kind_of({{k, true}}), ErrorKind::kUnsupported) << k;
  EXPECT_EQ(kind_of({{"online_config", {{"shared_parallel", false}}}}), ErrorKind::kUnsupported);
  EXPECT_EQ(kind_of(nullptr, "qwen2"), ErrorKind::kUnsupported);  // Quark has llama defaults only
  // Omitted keys keep the defaults; given ones are taken.
  const RotationConfig c = RotationConfig::from_json({{"r2", true}, {"rotation_size", 32}}, "llama");
  EXPECT_TRUE(c.r1);
  EXPECT_TRUE(c.r2);
  EXPECT_EQ(c.rotation_size.value_or(0), 32);
  EXPECT_EQ(c.scaling_layers.middle_layers.size(), 2u);
  EXPECT_EQ(c.to_json()["online_r1_rotation"], false);
}

// A copy of `src` with every tensor widened to F32.
fs::path f32_copy(const fs::path& src, const fs::path& out) {
  const io::ModelDir d = io::ModelDir::open(src);
  std::vector<io::TensorSpec> specs;
  for (const auto& n : d.weights().tensor_names()) specs.push_back({n, DType::kF32, d.weights().find(n)->shape});
  fs::create_directories(out);
  io::SafetensorsWriter w(out, specs);
  for (const auto& s : specs) {
    const io::TensorView v = d.weights().view(s.name);
    std::vector<float> f(v.numel());
    to_f32(v.dtype(), v.data.data(), f.data(), f.size());
    w.write(s.name, std::as_bytes(std::span<const float>(f)));
  }
  w.finish();
  for (const auto& f : d.aux_files()) fs::copy_file(src / f, out / f);
  return out;
}

std::vector<float> logits(const fs::path& dir) {
  engine::LoadOptions lo;
  lo.threads = 2;
  lo.weights = engine::LoadOptions::Weights::kF32;
  auto m = engine::Model::load(dir, lo);
  std::vector<int32_t> ids;
  for (int i = 0; i < 48; ++i) ids.push_back(1 + (i * 97 + 13) % 500);
  auto cache = m->new_cache(64);
  return m->forward(ids, *cache, false);
}

struct Cmp {
  double max_diff = 0, range = 0, top1 = 0;
};
Cmp compare(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  Cmp c;
  int64_t agree = 0, rows = static_cast<int64_t>(a.size()) / vocab;
  for (size_t i = 0; i < a.size(); ++i) {
    c.max_diff = std::max(c.max_diff, double(std::fabs(a[i] - b[i])));
    c.range = std::max(c.range, double(std::fabs(a[i])));
  }
  for (int64_t r = 0; r < rows; ++r) {
    auto ra = a.begin() + r * vocab, rb = b.begin() + r * vocab;
    agree += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
  c.top1 = double(agree) / double(rows);
  return c;
}

Cmp rotate_and_compare(const fs::path& src, const json& cfg, const test::TempDir& tmp, const std::string& tag) {
  const io::ModelDir d = io::ModelDir::open(src);
  ModelRotation rot(d, RotationConfig::from_json(cfg, "llama"));
  write_rotated_model(rot, tmp / tag, 2);
  const io::ModelDir r = io::ModelDir::open(tmp / tag);
  EXPECT_NE(r.weights().find("lm_head.weight"), nullptr) << "tied embeddings are untied";
  return compare(logits(src), logits(tmp / tag), 512);
}

TEST(ModelRotation, IsAnIdentityInFloat) {
  test::TempDir tmp("rotation-f32");
  const fs::path src = f32_copy(QLOOM_DEMO_MODEL_DIR, tmp / "src");
  for (const auto& [tag, cfg] : std::vector<std::pair<std::string, json>>{
           {"r1", nullptr}, {"r1r2", {{"r2", true}}}, {"r1_block32", {{"rotation_size", 32}}}}) {
    const Cmp c = rotate_and_compare(src, cfg, tmp, tag);
    std::printf("[ rotation ] f32 %-10s max |dlogit| %.3g of max |logit| %.3g\n", tag.c_str(), c.max_diff, c.range);
    EXPECT_LE(c.max_diff, 5e-6 * c.range) << tag << ": max |dlogit| " << c.max_diff << " of " << c.range;
    EXPECT_EQ(c.top1, 1.0) << tag;
  }
}

TEST(ModelRotation, Bf16ModelStaysClose) {
  test::TempDir tmp("rotation-bf16");
  const Cmp c = rotate_and_compare(QLOOM_DEMO_MODEL_DIR, {{"r2", true}}, tmp, "rot");
  EXPECT_LE(c.max_diff, 0.05 * c.range) << c.max_diff << " of " << c.range;
  EXPECT_GE(c.top1, 0.9);
}

TEST(ModelRotation, PlanAndDeterminism) {
  const io::ModelDir d = io::ModelDir::open(QLOOM_DEMO_MODEL_DIR);
  ModelRotation rot(d, RotationConfig::from_json({{"r2", true}}, "llama"));
  // Norms become ones; lm_head is added (tied source); q_proj: fold, rotate in.
  const engine::HostTensor norm = rot.tensor("model.layers.2.input_layernorm.weight", 1);
  std::vector<float> f(64);
  to_f32(norm.dtype, norm.bytes.data(), f.data(), f.size());
  for (float v : f) EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(rot.tensor_names().back(), "lm_head.weight");
  const auto& q = rot.ops().at("model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].kind, RotationOp::kScaleColumns);
  EXPECT_EQ(q[1].kind, RotationOp::kRotateIn);
  const auto& v = rot.ops().at("model.layers.4.self_attn.v_proj.weight");
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[2].kind, RotationOp::kRotateOut);
  EXPECT_EQ(v[2].size, 8);
  EXPECT_EQ(rot.ops().at("model.layers.4.mlp.down_proj.weight").size(), 1u);
  for (const char* t : {"model.embed_tokens.weight", "lm_head.weight", "model.layers.1.mlp.down_proj.weight",
                        "model.layers.3.self_attn.o_proj.weight"})
    EXPECT_EQ(rot.tensor(t, 1).bytes, rot.tensor(t, 3).bytes) << t;
  // A template that matches nothing is an error naming it.
  json bad = RotationConfig::from_json(nullptr, "llama").to_json();
  bad["scaling_layers"]["middle_layers"][1]["next_modules"].push_back("model.layers.layer_id.mlp.nope");
  EXPECT_THROW(ModelRotation(d, RotationConfig::from_json(json::parse(bad.dump()), "llama")), Error);
}

}  // namespace
}  // namespace qloom::quant
