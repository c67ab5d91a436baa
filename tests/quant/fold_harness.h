// Test harness for the AWQ / SmoothQuant folds on the engine's golden
// fixtures (tests/data/engine/<arch>/): runs a fixture through
// engine::Model::load with a WeightOverlay serving modified tensors, collects
// per-linear input statistics through ForwardHooks, and folds per-channel
// scales into every scaling group of every layer (quant/layer_groups.h).
//
// Weights are loaded as F32 (LoadOptions::Weights::kF32; the bf16 fixtures
// widen exactly) and folded tensors are served as F32, so "folded vs
// original" differs only by fp32 rounding of the folded weights.
//
// `mha` builds a multi-head variant of a GQA fixture: config.json with
// num_key_value_heads = num_attention_heads (in a temp dir) and k/v rows
// (phi3: the k and v parts of qkv_proj) repeated per query head, which is the
// same function as the GQA original (checked by the tests); it makes the
// v_proj -> o_proj groups applicable.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_fixture.h"
#include "qloom/engine/model.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/layer_groups.h"
#include "qloom/quant/smoothing.h"
#include "qloom/quant/weight_overlay.h"
#include "support/temp_dir.h"

namespace qloom::quant::testfold {

// Per-module input statistics over every row the module saw.
struct InputStats {
  std::vector<float> absmax;
  std::vector<double> abs_sum;
  int64_t rows = 0;
  std::vector<float> mean_abs() const {
    std::vector<float> m(abs_sum.size());
    for (size_t j = 0; j < m.size(); ++j) m[j] = rows ? static_cast<float>(abs_sum[j] / rows) : 0.0f;
    return m;
  }
};

class FoldHarness {
 public:
  FoldHarness(const std::string& arch, bool mha)
      : tmp_("fold"), fixture_(test::engine_data_dir() / arch), dir_(io::ModelDir::open(fixture_)) {
    plain_ = engine::plain_weight_source(dir_);
    ref_ = test::read_reference(fixture_);
    config_ = model::ModelConfig::parse(dir_.config());
    base_ = std::make_unique<WeightOverlay>(*plain_);
    model_dir_ = fixture_;
    if (mha && config_.num_kv_heads != config_.num_heads) make_mha();
  }

  const model::ModelConfig& config() const { return config_; }
  const std::vector<int32_t>& tokens() const { return ref_.tokens_long; }
  // The unmodified model (GQA or its MHA expansion), as served.
  const engine::WeightSource& base() const { return *base_; }
  const std::filesystem::path& model_dir() const { return model_dir_; }

  std::vector<float> logits(const engine::WeightSource& src, const engine::ForwardHooks* hooks = nullptr) const {
    engine::LoadOptions opt;
    opt.threads = 2;
    opt.weights = engine::LoadOptions::Weights::kF32;
    auto model = engine::Model::load(model_dir_, opt, &src);
    auto cache = model->new_cache(static_cast<int64_t>(ref_.tokens_long.size()));
    return model->forward(ref_.tokens_long, *cache, false, hooks);
  }

  // Input statistics of every linear, from one forward pass of `src`.
  std::map<std::string, InputStats> input_stats(const engine::WeightSource& src) const {
    std::map<std::string, InputStats> st;
    engine::ForwardHooks hooks;
    hooks.linear_input = [&st](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
      InputStats& s = st[site.module];
      if (s.absmax.empty()) {
        s.absmax.assign(static_cast<size_t>(cols), 0.0f);
        s.abs_sum.assign(static_cast<size_t>(cols), 0.0);
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float a = std::fabs(x[r * cols + c]);
          s.absmax[static_cast<size_t>(c)] = std::max(s.absmax[static_cast<size_t>(c)], a);
          s.abs_sum[static_cast<size_t>(c)] += a;
        }
      s.rows += rows;
    };
    (void)logits(src, &hooks);
    return st;
  }

  // Folds scales(group) into `ov` (reading the current tensors from it) for
  // every applicable group of every layer for which scales() returns a
  // non-empty vector. Returns the number of groups folded.
  int fold_all(WeightOverlay& ov, const std::function<std::vector<float>(const ScalingGroup&)>& scales) const {
    int folded = 0;
    for (int layer = 0; layer < static_cast<int>(config_.num_layers); ++layer) {
      for (const ScalingGroup& g : layer_scaling_groups(config_, layer)) {
        if (!g.applicable) continue;
        const std::vector<float> s = scales(g);
        if (s.empty()) continue;
        fold_group(ov, g, s);
        ++folded;
      }
    }
    return folded;
  }

  static void fold_group(WeightOverlay& ov, const ScalingGroup& g, const std::vector<float>& s) {
    std::vector<float> norm;
    engine::LinearWeight prev;
    std::vector<std::string> names = g.linears;
    names.insert(names.end(), g.fold_only.begin(), g.fold_only.end());
    std::vector<engine::LinearWeight> readers;
    for (const std::string& n : names) readers.push_back(load_linear_f32(ov, n));
    FoldTargets t;
    if (g.prev_kind == PrevKind::kNorm) {
      norm = host_tensor_f32(ov.load(g.prev_op), g.prev_op);
      t.norm = &norm;
      t.norm_form = g.gemma_norm ? NormForm::kGemmaOffset : NormForm::kPlain;
    } else {
      prev = load_linear_f32(ov, g.prev_op);
      t.prev = &prev;
      t.prev_row_offset = g.prev_row_offset;
    }
    for (engine::LinearWeight& r : readers) t.readers.push_back(&r);
    fold_scales(t, s);
    if (g.prev_kind == PrevKind::kNorm) ov.set_f32(g.prev_op, {static_cast<int64_t>(norm.size())}, norm);
    else ov.set_linear(g.prev_op, prev);
    for (size_t i = 0; i < names.size(); ++i) ov.set_linear(names[i], readers[i]);
  }

 private:
  void make_mha() {
    const int64_t H = config_.num_heads, KV = config_.num_kv_heads, hd = config_.head_dim;
    const int64_t rep = H / KV;
    nlohmann::json cfg = dir_.config();
    cfg["num_key_value_heads"] = H;
    tmp_.write("config.json", cfg.dump(2));
    model_dir_ = tmp_.path();
    // Rows [off, off + KV*hd) of w -> H*hd rows, KV head k repeated rep times.
    auto expand = [&](const engine::LinearWeight& w, int64_t off) {
      std::vector<float> rows;
      std::vector<float> bias;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kvh = h / rep;
        for (int64_t d = 0; d < hd; ++d) {
          const int64_t r = off + kvh * hd + d;
          rows.insert(rows.end(), w.f32.begin() + r * w.in, w.f32.begin() + (r + 1) * w.in);
          if (!w.bias.empty()) bias.push_back(w.bias[static_cast<size_t>(r)]);
        }
      }
      return std::make_pair(rows, bias);
    };
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      std::string p = "model.layers.";
      p += std::to_string(i);
      p += ".self_attn.";
      if (plain_->contains(p + "qkv_proj.weight")) {
        engine::LinearWeight w = load_linear_f32(*plain_, p + "qkv_proj");
        const int64_t qn = H * hd, kn = KV * hd;
        engine::LinearWeight out = w;
        out.out = qn * 3;
        out.f32.assign(w.f32.begin(), w.f32.begin() + qn * w.in);
        auto [k, kb] = expand(w, qn);
        auto [v, vb] = expand(w, qn + kn);
        out.f32.insert(out.f32.end(), k.begin(), k.end());
        out.f32.insert(out.f32.end(), v.begin(), v.end());
        if (!w.bias.empty()) {
          out.bias.assign(w.bias.begin(), w.bias.begin() + qn);
          out.bias.insert(out.bias.end(), kb.begin(), kb.end());
          out.bias.insert(out.bias.end(), vb.begin(), vb.end());
        }
        base_->set_linear(p + "qkv_proj", out);
      } else {
        for (const char* m : {"k_proj", "v_proj"}) {
          engine::LinearWeight w = load_linear_f32(*plain_, p + m);
          auto [rows, bias] = expand(w, 0);
          w.out = H * hd;
          w.f32 = rows;
          w.bias = bias;
          base_->set_linear(p + m, w);
        }
      }
    }
    config_ = model::ModelConfig::parse(cfg);
  }

  test::TempDir tmp_;
  std::filesystem::path fixture_, model_dir_;
  io::ModelDir dir_;
  std::unique_ptr<engine::WeightSource> plain_;
  test::Reference ref_;
  model::ModelConfig config_;
  std::unique_ptr<WeightOverlay> base_;
};

// max |a - b| relative to max(1, max |a|): the engine tests' logit metric.
inline double logit_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  test::LogitDiff d = test::compare_logits(b.data(), a.data(), a.size());
  return d.rel();
}

}  // namespace qloom::quant::testfold
