// Test harness for the AWQ / SmoothQuant pipeline stages: runs the
// layer-by-layer calibration pipeline (quant/pipeline.h) with the stages
// under test followed by a CaptureStage, which records every layer's float
// tensors as the stages left them (before quantization), so a test can load
// the folded float model and compare its logits with the original's.
//
// Exact folds need F32 weights in the pipeline's LayerRunner: F32Source
// widens every tensor of a source to F32 (the engine then holds F32
// linears), and the pipeline runs with model_dtype F32 (no rounding of the
// changed tensors).
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"
#include "qloom/engine/layer_runner.h"
#include "qloom/engine/model.h"
#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/calib_data.h"
#include "qloom/quant/layer_tensors.h"
#include "qloom/quant/pipeline.h"
#include "qloom/quant/weight_overlay.h"

namespace qloom::quant::teststage {

class F32Source final : public engine::WeightSource {
 public:
  explicit F32Source(const engine::WeightSource& base) : base_(base) {}
  bool contains(const std::string& name) const override { return base_.contains(name); }
  engine::HostTensor load(const std::string& name) const override {
    engine::HostTensor t = base_.load(name);
    if (t.dtype == DType::kF32) return t;
    const std::vector<float> v = host_tensor_f32(t, name);
    engine::HostTensor out;
    out.dtype = DType::kF32;
    out.shape = t.shape;
    out.bytes.resize(v.size() * sizeof(float));
    if (!v.empty()) std::memcpy(out.bytes.data(), v.data(), out.bytes.size());
    return out;
  }

 private:
  const engine::WeightSource& base_;
};

inline const char* const kNormNames[] = {"input_layernorm.weight",           "post_attention_layernorm.weight",
                                         "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight",
                                         "self_attn.q_norm.weight",          "self_attn.k_norm.weight"};

// Records each layer's linears and norms (checkpoint form) into `out`.
class CaptureStage final : public AlgorithmStage {
 public:
  explicit CaptureStage(WeightOverlay& out) : out_(out) {}
  std::string name() const override { return "capture"; }
  nlohmann::ordered_json algo_config() const override { return nullptr; }
  void process_layer(LayerSession& s) override {
    engine::LayerRunner& r = s.runner();
    for (const engine::LayerLinear& l : r.linears()) out_.set_linear(l.name, *l.weight);
    const std::string p = "model.layers." + std::to_string(s.layer()) + ".";
    for (const char* n : kNormNames) {
      try {
        const FloatTensor v = layer_tensor_value(find_layer_tensor(r, p + n));
        out_.set_f32(p + n, v.shape, v.values);
      } catch (const Error&) {  // this architecture has no such norm
      }
    }
  }

 private:
  WeightOverlay& out_;
};

// The keys of an algo_config dict, in order (Quark's dataclass order).
inline std::vector<std::string> keys_of(const nlohmann::ordered_json& j) {
  std::vector<std::string> k;
  for (const auto& [key, v] : j.items()) k.push_back(key);
  return k;
}

// An engine fixture (tests/data/engine/<dir>) a folding stage runs on, with
// its attention expanded to MHA or kept GQA, and the least number of scaling
// groups the stage must fold over all layers.
struct FixtureCase {
  const char* dir;
  bool mha;
  int min_groups;
};

// The test-name suffix of a FixtureCase: "<dir>_mha" / "<dir>_gqa".
template <class Info>
std::string fixture_case_name(const Info& info) {
  return std::string(info.param.dir) + (info.param.mha ? "_mha" : "_gqa");
}

struct StageRun {
  std::unique_ptr<WeightOverlay> folded;  // the float model after the stages
  PipelineSummary summary;
  std::vector<nlohmann::ordered_json> algo_configs;  // of the stages under test
  std::map<std::string, FloatTensor> float_tensors;  // what the exporter would write, all layers
};

// Every decoder-layer linear the engine loads -> `spec`.
inline std::map<std::string, QuantSpec> every_linear(const std::filesystem::path& model_dir,
                                                     const engine::WeightSource& src, const QuantSpec& spec) {
  engine::LoadOptions lo;
  lo.threads = 1;
  auto r = engine::LayerRunner::open(model_dir, lo, &src);
  std::map<std::string, QuantSpec> out;
  for (int64_t i = 0; i < r->config().num_layers; ++i) {
    r->load_layer(i);
    for (const engine::LayerLinear& l : r->linears()) out[l.name] = spec;
    r->unload();
  }
  return out;
}

// `src` must serve F32 (F32Source) for exact folds; `folded` serves the
// captured tensors over `src`.
inline StageRun run_stages(const std::filesystem::path& model_dir, const engine::WeightSource& src,
                           const CalibrationData& data, std::vector<std::unique_ptr<AlgorithmStage>> stages,
                           const std::map<std::string, QuantSpec>& specs,
                           const std::map<std::string, QuantSpec>& input_specs = {}) {
  StageRun out;
  out.folded = std::make_unique<WeightOverlay>(src);
  const size_t tested = stages.size();
  stages.push_back(std::make_unique<CaptureStage>(*out.folded));
  PipelineRequest pr;
  pr.model_dir = model_dir;
  pr.weights = &src;
  pr.weight_specs = specs;
  pr.input_specs = input_specs;
  pr.model_dtype = DType::kF32;
  pr.threads = 2;
  CalibrationPipeline pipe(std::move(pr), data, std::move(stages));
  for (int64_t i = 0; i < pipe.num_layers(); ++i) {
    LayerResult lr = pipe.run_layer(i);
    for (auto& [name, t] : lr.float_tensors) out.float_tensors[name] = std::move(t);
  }
  (void)pipe.finish();
  out.summary = pipe.summary();
  for (size_t i = 0; i < tested; ++i) out.algo_configs.push_back(pipe.stages()[i]->algo_config());
  return out;
}

inline std::vector<float> model_logits(const std::filesystem::path& model_dir, const engine::WeightSource& src,
                                       const std::vector<int32_t>& tokens) {
  engine::LoadOptions opt;
  opt.threads = 2;
  opt.weights = engine::LoadOptions::Weights::kF32;
  auto model = engine::Model::load(model_dir, opt, &src);
  auto cache = model->new_cache(static_cast<int64_t>(tokens.size()));
  return model->forward(tokens, *cache, false);
}

// Deterministic token ids in [3, vocab): `n` samples of `len` tokens.
inline CalibrationData synthetic_samples(int64_t vocab, size_t n, size_t len, uint32_t seed = 7) {
  CalibrationData d;
  uint32_t x = seed;
  for (size_t s = 0; s < n; ++s) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < len; ++i) {
      x = x * 1664525u + 1013904223u;
      t.push_back(static_cast<int32_t>(3 + (x >> 8) % static_cast<uint32_t>(vocab - 3)));
    }
    d.samples.push_back(std::move(t));
  }
  return d;
}

// Every value of tensor `name` as the folded overlay gives it is finite.
inline bool all_finite(const WeightOverlay& w, const std::string& name) {
  for (float v : host_tensor_f32(w.load(name), name))
    if (!std::isfinite(v)) return false;
  return true;
}

// A pipeline warning contains `text`.
inline bool warned(const PipelineSummary& s, const std::string& text) {
  for (const auto& w : s.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace qloom::quant::teststage
