#include "qloom/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/core/thread_pool.h"
#include "qloom/quant/layer_groups.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

constexpr const char* kKeys = "n_grid, duo_scaling, clip, max_shrink, clip_n_grid, clip_max_tokens";

[[noreturn]] void bad_awq_option(const std::string& key, const std::string& msg) {
  std::string remedy = "AWQ keys: ";
  remedy += kKeys;
  throw Error(ErrorKind::kUsage, "", key, msg, remedy);
}

[[noreturn]] void awq_usage(const std::string& item, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", item, msg);
}

int int_in(const nlohmann::json& v, const std::string& key, int lo, int hi) {
  if (!v.is_number_integer()) bad_awq_option(key, "must be an integer");
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) {
    std::string msg = "must be in [";
    msg += std::to_string(lo);
    msg += ", ";
    msg += std::to_string(hi);
    msg += "]";
    bad_awq_option(key, msg);
  }
  return static_cast<int>(i);
}

bool awq_boolean(const nlohmann::json& v, const std::string& key) {
  if (!v.is_boolean()) bad_awq_option(key, "must be true or false");
  return v.get<bool>();
}

std::vector<float> f32_copy(const engine::LinearWeight& w) {
  const size_t n = static_cast<size_t>(w.out * w.in);
  if (w.type == engine::WeightType::kF32) {
    if (w.f32.size() != n) awq_usage("weight", "a linear weight's buffer does not match its shape");
    return w.f32;
  }
  if (w.bf16.size() != n) awq_usage("weight", "a linear weight's buffer does not match its shape");
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(w.bf16[i]);
  return out;
}

// Elements per quantization group along a row: group_size for per-group
// specs, the whole row otherwise.
int64_t row_group(const QuantSpec& spec, int64_t in) {
  return spec.qscheme == QScheme::kPerGroup && spec.group_size > 0 ? spec.group_size : in;
}

// llm-compressor's w_mean over the quantized linears (duo scaling).
std::vector<double> weight_means(const std::vector<AwqLinear>& linears, int64_t n) {
  std::vector<double> sum(static_cast<size_t>(n), 0.0);
  int64_t rows = 0;
  for (const AwqLinear& l : linears) {
    if (l.spec == nullptr) continue;
    const std::vector<float> w = f32_copy(*l.weight);
    const int64_t g = row_group(*l.spec, n);
    for (int64_t r = 0; r < l.weight->out; ++r) {
      for (int64_t c0 = 0; c0 + g <= n; c0 += g) {
        const float* p = w.data() + r * n + c0;
        float mx = 0.0f;
        for (int64_t k = 0; k < g; ++k) mx = std::max(mx, std::fabs(p[k]));
        const double d = static_cast<double>(mx) + 1e-6;
        for (int64_t k = 0; k < g; ++k) sum[static_cast<size_t>(c0 + k)] += std::fabs(p[k]) / d;
      }
    }
    rows += l.weight->out;
  }
  for (double& v : sum) v /= static_cast<double>(std::max<int64_t>(rows, 1));
  return sum;
}

std::vector<float> grid_scales(std::span<const float> x_mean, const std::vector<double>& w_mean, double ratio,
                               bool duo) {
  const size_t n = x_mean.size();
  std::vector<double> s(n);
  for (size_t j = 0; j < n; ++j) {
    double v = std::pow(static_cast<double>(x_mean[j]), ratio);
    if (duo) v /= std::pow(w_mean[j], 1.0 - ratio) + 1e-4;
    s[j] = std::max(v, 1e-4);
  }
  const double mx = *std::max_element(s.begin(), s.end());
  const double mn = *std::min_element(s.begin(), s.end());
  const double norm = std::sqrt(mx * mn);
  std::vector<float> out(n);
  for (size_t j = 0; j < n; ++j) {
    const float v = static_cast<float>(s[j] / norm);
    out[j] = std::isfinite(v) ? v : 1.0f;
  }
  return out;
}

}  // namespace

AwqConfig AwqConfig::from_json(const nlohmann::json& j) {
  AwqConfig c;
  if (j.is_null()) return c;
  if (!j.is_object()) bad_awq_option("awq", "the AWQ config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (key == "n_grid") c.n_grid = int_in(v, key, 1, 1000);
    else if (key == "duo_scaling") c.duo_scaling = awq_boolean(v, key);
    else if (key == "clip") c.clip = awq_boolean(v, key);
    else if (key == "clip_n_grid") c.clip_n_grid = int_in(v, key, 1, 1000);
    else if (key == "clip_max_tokens") c.clip_max_tokens = int_in(v, key, 1, std::numeric_limits<int>::max());
    else if (key == "max_shrink") {
      if (!v.is_number()) bad_awq_option(key, "must be a number");
      c.max_shrink = v.get<double>();
      if (!(c.max_shrink >= 0.0 && c.max_shrink < 1.0)) bad_awq_option(key, "must be in [0, 1)");
    } else {
      std::string msg = "unknown AWQ key '";
      msg += key;
      msg += "'";
      bad_awq_option(key, msg);
    }
  }
  return c;
}

nlohmann::json AwqConfig::to_json(const model::ModelConfig& config) const {
  nlohmann::json j = nlohmann::json::object();
  j["name"] = "awq";
  j["scaling_layers"] = quark_scaling_layers(config);
  j["model_decoder_layers"] = "model.layers";
  return j;
}

nlohmann::json AwqConfig::params_json() const {
  return {{"n_grid", n_grid},           {"duo_scaling", duo_scaling}, {"clip", clip},
          {"max_shrink", max_shrink},   {"clip_n_grid", clip_n_grid}, {"clip_max_tokens", clip_max_tokens}};
}

namespace {

// v[i] = detail::round_to(t, v[i]) for every i, through the array
// conversions of core/convert.h (the same rounding, vectorized).
void round_all_to(DType t, std::vector<float>& v) {
  if (t != DType::kBF16 && t != DType::kF16) return;
  std::vector<uint16_t> h(v.size());
  if (t == DType::kBF16) {
    f32_to_bf16(v.data(), h.data(), v.size());
    bf16_to_f32(h.data(), v.data(), v.size());
  } else {
    f32_to_f16(v.data(), h.data(), v.size());
    f16_to_f32(h.data(), v.data(), v.size());
  }
}

}  // namespace

engine::LinearWeight awq_candidate(const engine::LinearWeight& w, const QuantSpec& spec, std::span<const float> s,
                                   const AwqQuantOptions& o, std::string_view name) {
  if (static_cast<int64_t>(s.size()) != w.in) awq_usage(std::string(name), "scale count differs from in_features");
  std::vector<float> ws = f32_copy(w);
  for (int64_t r = 0; r < w.out; ++r)
    for (int64_t c = 0; c < w.in; ++c) ws[static_cast<size_t>(r * w.in + c)] *= s[static_cast<size_t>(c)];
  round_all_to(o.model_dtype, ws);
  const QuantizedTensor q = quantize_weight(ws.data(), static_cast<uint64_t>(w.out), static_cast<uint64_t>(w.in),
                                            spec, o.scale_dtype, name, o.model_dtype, o.threads);
  dequantize(q, ws.data(), o.threads);
  engine::LinearWeight out;
  out.type = engine::WeightType::kF32;
  out.out = w.out;
  out.in = w.in;
  out.bias = w.bias;
  for (int64_t r = 0; r < w.out; ++r)
    for (int64_t c = 0; c < w.in; ++c) ws[static_cast<size_t>(r * w.in + c)] /= s[static_cast<size_t>(c)];
  out.f32 = std::move(ws);
  return out;
}

namespace {

// Validates the search's inputs; returns w_mean (duo scaling) or empty.
std::vector<double> check_search(std::span<const float> x_mean, const std::vector<AwqLinear>& linears,
                                 const AwqConfig& config) {
  const int64_t n = static_cast<int64_t>(x_mean.size());
  if (linears.empty() || n == 0) awq_usage("linears", "AWQ needs a group with linears and statistics");
  bool any_quantized = false;
  for (const AwqLinear& l : linears) {
    if (l.weight == nullptr || l.weight->in != n) awq_usage(l.name, "in_features differs from the statistics' width");
    any_quantized = any_quantized || l.spec != nullptr;
  }
  if (!any_quantized) awq_usage("linears", "no linear of the group is quantized");
  if (config.n_grid < 1) awq_usage("n_grid", "must be >= 1");
  for (int64_t j = 0; j < n; ++j) {
    const float v = x_mean[static_cast<size_t>(j)];
    if (!std::isfinite(v) || v < 0.0f) {
      std::string msg = "mean |x| of channel ";
      msg += std::to_string(j);
      msg += " is negative or not finite";
      throw Error(ErrorKind::kInvalidInput, "", "x_mean", msg);
    }
  }
  return config.duo_scaling ? weight_means(linears, n) : std::vector<double>();
}

AwqCandidates candidates_at(std::span<const float> s, const std::vector<AwqLinear>& linears,
                            const AwqQuantOptions& options) {
  AwqCandidates cand;
  for (const AwqLinear& l : linears)
    if (l.spec != nullptr) cand.emplace(l.name, awq_candidate(*l.weight, *l.spec, s, options, l.name));
  return cand;
}

[[noreturn]] void all_non_finite() {
  throw Error(ErrorKind::kInvalidInput, "", "loss", "every AWQ grid point gave a non-finite loss",
              "check the calibration inputs and the inspected block for NaN / inf");
}

// Grid indices from `first` outward, each once.
std::vector<int> visit_order(int n, int first) {
  first = std::clamp(first, 0, n - 1);
  std::vector<int> order{first};
  for (int d = 1; static_cast<int>(order.size()) < n; ++d) {
    if (first + d < n) order.push_back(first + d);
    if (first - d >= 0) order.push_back(first - d);
  }
  return order;
}

// Sum of squared errors of one point over every part, in `order`, stopping
// once the partial sum exceeds `bound`; returns the total in part index
// order, or NaN when stopped or non-finite. se receives the part errors.
double bounded_total(AwqPartLoss& loss, const std::vector<int64_t>& order, double bound, std::vector<double>& se) {
  se.assign(static_cast<size_t>(loss.parts()), 0.0);
  double partial = 0.0;
  for (const int64_t p : order) {
    const double v = loss.part_se(p);
    se[static_cast<size_t>(p)] = v;
    partial += v;
    if (!(partial <= bound)) return std::numeric_limits<double>::quiet_NaN();  // also NaN
  }
  double total = 0.0;
  for (const double v : se) total += v;
  return total;
}

}  // namespace

AwqScaleResult awq_search_scales(std::span<const float> x_mean, const std::vector<AwqLinear>& linears,
                                 const AwqConfig& config, const AwqQuantOptions& options, const AwqLossFn& loss) {
  const std::vector<double> w_mean = check_search(x_mean, linears, config);
  AwqScaleResult best;
  best.loss = std::numeric_limits<double>::infinity();
  bool found = false;
  for (int i = 0; i < config.n_grid; ++i) {
    const double ratio = static_cast<double>(i) / config.n_grid;
    std::vector<float> s = grid_scales(x_mean, w_mean, ratio, config.duo_scaling);
    const double v = loss(candidates_at(s, linears, options));
    best.losses.push_back(std::isfinite(v) ? v : std::numeric_limits<double>::quiet_NaN());
    if (std::isfinite(v) && v < best.loss) {
      best.loss = v;
      best.ratio = ratio;
      best.scales = std::move(s);
      found = true;
    }
  }
  if (!found) all_non_finite();
  return best;
}

AwqScaleResult awq_search_scales_pruned(std::span<const float> x_mean, const std::vector<AwqLinear>& linears,
                                        const AwqConfig& config, const AwqQuantOptions& options, AwqPartLoss& loss,
                                        int first) {
  const std::vector<double> w_mean = check_search(x_mean, linears, config);
  if (loss.parts() < 1 || !(loss.count() > 0.0)) awq_usage("loss", "the AWQ loss needs parts and a positive count");
  std::vector<int64_t> part_order(static_cast<size_t>(loss.parts()));
  for (size_t p = 0; p < part_order.size(); ++p) part_order[p] = static_cast<int64_t>(p);
  AwqScaleResult best;
  best.losses.assign(static_cast<size_t>(config.n_grid), std::numeric_limits<double>::quiet_NaN());
  best.loss = std::numeric_limits<double>::infinity();
  int best_i = -1;
  double best_total = std::numeric_limits<double>::infinity();
  bool ordered = false;
  std::vector<double> se;
  for (const int i : visit_order(config.n_grid, first)) {
    const double ratio = static_cast<double>(i) / config.n_grid;
    std::vector<float> s = grid_scales(x_mean, w_mean, ratio, config.duo_scaling);
    const AwqCandidates cand = candidates_at(s, linears, options);
    loss.begin(cand);
    const double bound = best_i < 0 ? std::numeric_limits<double>::infinity() : best_total * (1.0 + 1e-12);
    const double total = bounded_total(loss, part_order, bound, se);
    loss.end();
    if (!std::isfinite(total)) continue;
    const double v = total / loss.count();
    best.losses[static_cast<size_t>(i)] = v;
    if (!ordered) {  // the largest errors first: a worse point's sum passes the bound sooner
      std::stable_sort(part_order.begin(), part_order.end(),
                       [&](int64_t a, int64_t b) { return se[static_cast<size_t>(a)] > se[static_cast<size_t>(b)]; });
      ordered = true;
    }
    if (v < best.loss || (v == best.loss && i < best_i)) {
      best.loss = v;
      best.ratio = ratio;
      best.scales = std::move(s);
      best_i = i;
      best_total = total;
    }
  }
  if (best_i < 0) all_non_finite();
  return best;
}

AwqClip awq_search_clip(const engine::LinearWeight& w, const QuantSpec& spec, std::span<const float> x,
                        int64_t tokens, const AwqConfig& config, const AwqQuantOptions& options,
                        std::string_view name) {
  const std::string item(name);
  if (tokens < 1 || static_cast<int64_t>(x.size()) != tokens * w.in)
    awq_usage(item, "the clip search's inputs must be [tokens >= 1, in_features]");
  AwqClip clip;
  if (spec.qscheme == QScheme::kPerTensor) return clip;
  const int64_t O = w.out, I = w.in, G = row_group(spec, I);
  if (G <= 0 || I % G != 0) awq_usage(item, "the group size does not divide in_features");
  const int64_t ng = I / G;
  clip.rows = O;
  clip.groups_per_row = ng;
  clip.group_size = G;

  const std::vector<float> W = f32_copy(w);
  std::vector<float> org_max(static_cast<size_t>(O * ng), 0.0f);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t k = 0; k < I; ++k) {
      float& m = org_max[static_cast<size_t>(o * ng + k / G)];
      m = std::max(m, std::fabs(W[static_cast<size_t>(o * I + k)]));
    }

  // Token subsample (every step-th token from 0); per group g its Gram
  // matrix H_g = Σ_t x_t[g]ᵀ x_t[g] [G, G], so err(o, g) = Δ H_g Δᵀ / T' with
  // Δ = (Q(clamp(W)) - W)[o, g]: G² multiply-adds per (o, g) instead of G·T'.
  const int64_t n_sample = std::min<int64_t>(tokens, config.clip_max_tokens);
  const int64_t step = std::max<int64_t>(1, tokens / n_sample);
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < tokens; t += step) rows.push_back(t);
  const int64_t T = static_cast<int64_t>(rows.size());
  ThreadPool pool(options.threads);
  std::vector<engine::LinearWeight> gram(static_cast<size_t>(ng));
  {
    engine::LinearWeight xt;  // x[:, g]ᵀ [G, T'] as an [out G, in T'] weight: xt · xtᵀ = H_g
    xt.type = engine::WeightType::kF32;
    xt.out = G;
    xt.in = T;
    xt.f32.resize(static_cast<size_t>(G * T));
    for (int64_t g = 0; g < ng; ++g) {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < G; ++k)
          xt.f32[static_cast<size_t>(k * T + t)] = x[static_cast<size_t>(rows[static_cast<size_t>(t)] * I + g * G + k)];
      engine::LinearWeight& h = gram[static_cast<size_t>(g)];
      h.type = engine::WeightType::kF32;
      h.out = h.in = G;
      h.f32.resize(static_cast<size_t>(G * G));
      engine::linear(xt.f32.data(), G, xt, h.f32.data(), pool);
    }
  }

  const int n_shrink = std::max(1, static_cast<int>(config.max_shrink * config.clip_n_grid));
  std::vector<double> best(static_cast<size_t>(O * ng), std::numeric_limits<double>::infinity());
  std::vector<double> unclipped(best.size(), 0.0);
  clip.max_val = org_max;
  std::vector<float> bound(org_max.size()), wc(W.size()), dg(static_cast<size_t>(O * G)),
      dh(static_cast<size_t>(O * G));
  for (int i = 0; i < n_shrink; ++i) {
    const double factor = 1.0 - static_cast<double>(i) / config.clip_n_grid;
    for (size_t b = 0; b < bound.size(); ++b)
      bound[b] = detail::round_to(options.model_dtype, static_cast<float>(org_max[b] * factor));
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < I; ++k) {
        const float m = bound[static_cast<size_t>(o * ng + k / G)];
        wc[static_cast<size_t>(o * I + k)] = std::clamp(W[static_cast<size_t>(o * I + k)], -m, m);
      }
    const QuantizedTensor q = quantize_weight(wc.data(), static_cast<uint64_t>(O), static_cast<uint64_t>(I), spec,
                                              options.scale_dtype, name, options.model_dtype, options.threads);
    dequantize(q, wc.data(), options.threads);
    for (int64_t g = 0; g < ng; ++g) {
      for (int64_t o = 0; o < O; ++o)
        for (int64_t k = 0; k < G; ++k) {
          const size_t src = static_cast<size_t>(o * I + g * G + k);
          dg[static_cast<size_t>(o * G + k)] = wc[src] - W[src];
        }
      engine::linear(dg.data(), O, gram[static_cast<size_t>(g)], dh.data(), pool);  // Δ H_g (H symmetric)
      for (int64_t o = 0; o < O; ++o) {
        double err = 0.0;
        for (int64_t k = 0; k < G; ++k) {
          const size_t j = static_cast<size_t>(o * G + k);
          err += static_cast<double>(dg[j]) * static_cast<double>(dh[j]);
        }
        err /= static_cast<double>(T);
        const size_t idx = static_cast<size_t>(o * ng + g);
        if (i == 0) unclipped[idx] = err;
        if (err < best[idx]) {
          best[idx] = err;
          clip.max_val[idx] = bound[idx];
        }
      }
    }
  }
  for (size_t b = 0; b < best.size(); ++b) {  // same order for both sums
    clip.loss_before += unclipped[b];
    clip.loss_after += best[b];
  }
  return clip;
}

void apply_awq_clip(engine::LinearWeight& w, const AwqClip& clip) {
  if (clip.max_val.empty()) return;
  if (clip.rows != w.out || clip.groups_per_row * clip.group_size != w.in)
    awq_usage("clip", "the clip bounds do not match the weight's shape");
  for (int64_t o = 0; o < w.out; ++o)
    for (int64_t k = 0; k < w.in; ++k) {
      const float m = clip.max_val[static_cast<size_t>(o * clip.groups_per_row + k / clip.group_size)];
      const size_t i = static_cast<size_t>(o * w.in + k);
      if (w.type == engine::WeightType::kF32) w.f32[i] = std::clamp(w.f32[i], -m, m);
      else w.bf16[i] = float_to_bf16(std::clamp(bf16_to_float(w.bf16[i]), -m, m));
    }
}

bool awq_clip_applies(std::string_view module) {
  const size_t dot = module.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? module : module.substr(dot + 1);
  return last != "q_proj" && last != "k_proj" && last != "qkv_proj";
}

}  // namespace qloom::quant
