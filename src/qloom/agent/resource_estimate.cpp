// estimate_resources: memory / disk / time models of resource_estimate.h.
#include "qloom/agent/resource_estimate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "qloom/agent/environment.h"
#include "qloom/agent/model_analysis.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent {
namespace {

using json = nlohmann::json;
using oj = nlohmann::ordered_json;
using quant::QDtype;
using quant::QScheme;

constexpr double kIoBytesPerSecond = 1024.0 * 1024.0 * 1024.0;  // weights read + written
constexpr int kAwqGrid = 20;
constexpr int kAutoSmoothGrid = 10 + 1;  // grid points + the reference pass
constexpr int kGptqStages = 4;

uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

uint64_t dtype_bytes_of(const json& analysis) {
  const json& dt = analysis.at("model").at("torch_dtype");
  if (dt.is_string() && (dt == "float32" || dt == "fp32")) return 4;
  if (dt.is_string() && dt == "float64") return 8;
  return 2;
}

// Last dotted component ("q_proj") and the rest ("model.layers.0.self_attn").
std::pair<std::string, std::string> split_leaf(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return {"", name};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

// GPTQ's sequential stage of a linear (gptq_stage.h: q/k/v, o, gate/up, down).
int gptq_stage(const std::string& leaf) {
  if (leaf == "q_proj" || leaf == "k_proj" || leaf == "v_proj" || leaf == "qkv_proj" || leaf == "q_a_proj" ||
      leaf == "kv_a_proj_with_mqa")
    return 0;
  if (leaf == "q_b_proj" || leaf == "kv_b_proj") return 1;
  if (leaf == "o_proj") return 2;
  if (leaf == "gate_proj" || leaf == "up_proj" || leaf == "gate_up_proj" || leaf == "w1" || leaf == "w3" ||
      leaf == "gate" || leaf == "shared_expert_gate")
    return 3;
  if (leaf == "down_proj" || leaf == "w2") return 4;
  return 5;
}

double flops_per_thread(const json& env) {
  try {
    const json& simd = env.at("cpu").at("simd");
    if (simd.value("avx512f", false)) return 50e9;
    if (simd.value("avx2", false) && simd.value("fma", false)) return 25e9;
  } catch (const json::exception&) {
  }
  return 4e9;
}

unsigned threads_of(const json& env) {
  try {
    const json& cpu = env.at("cpu");
    unsigned t = cpu.value("usable_threads", 0u);
    if (t == 0) t = cpu.value("hardware_threads", 0u);
    return t == 0 ? 1 : t;
  } catch (const json::exception&) {
    return 1;
  }
}

std::vector<std::string> split_algos(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    size_t c = s.find(',', pos);
    if (c == std::string::npos) c = s.size();
    if (c > pos) out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

}  // namespace

bool needs_calibration(const std::string& quant_scheme, const std::string& kv_cache_dtype,
                       const std::string& quant_algo) {
  if (!quant_algo.empty() || !kv_cache_dtype.empty()) return true;
  const quant::SchemeDef* s = quant::find_scheme(quant_scheme);
  return s && s->linear.input && !s->linear.input->is_dynamic;
}

uint64_t quantized_linear_bytes(const quant::LayerQuantSpec& spec, uint64_t out, uint64_t in, uint64_t M,
                                bool kv_output) {
  uint64_t b = 0;
  if (!spec.weight) {
    b = out * in * M;
  } else {
    // A progressive weight (int4_fp8) stores its last stage (+ one f32 scale);
    // a scale-quant one (nvfp4, amdfp4_global*) its fp4 codes and 8-bit group
    // scales (+ one f32 global scale).
    const bool progressive = spec.weight_stage2 && !spec.weight_stage2->is_scale_quant;
    const quant::QuantSpec& w = progressive ? *spec.weight_stage2 : *spec.weight;
    const uint64_t g = w.group_size > 0 ? uint64_t(w.group_size) : in;
    switch (w.dtype) {
      case QDtype::kInt4:
      case QDtype::kUInt4:
        if (w.qscheme == QScheme::kPerGroup) {
          b = in * ceil_div(out, 8) * 4 + ceil_div(in, g) * out * M + ceil_div(in, g) * ceil_div(out, 8) * 4;
        } else if (w.qscheme == QScheme::kPerChannel) {
          b = out * ceil_div(in, 8) * 4 + out * M + ceil_div(out, 8) * 4;
        } else {
          b = out * ceil_div(in, 8) * 4 + 4 + 4;
        }
        break;
      case QDtype::kInt8:
      case QDtype::kUInt8:
        b = out * in;
        if (w.qscheme == QScheme::kPerTensor) b += 4 + 1;
        else if (w.qscheme == QScheme::kPerChannel) b += out * (M + 1);
        else b += ceil_div(in, g) * out * (M + 1);
        break;
      case QDtype::kFp8E4M3:
      case QDtype::kFp8E5M2:
        b = out * in + (w.qscheme == QScheme::kPerChannel ? out * M : M);
        break;
      case QDtype::kFp4:
        b = out * ceil_div(in, 2) + out * ceil_div(in, g);
        break;
      default:  // fp6 and later formats: packed codes + one e8m0 byte per group
        b = ceil_div(out * in * uint64_t(quant::quant_dtype_bits(w.dtype)), 8) + out * ceil_div(in, g);
        break;
    }
    if (spec.weight_stage2) b += 4;
  }
  if (spec.input_stage2) b += 4;  // input_scale_2 (f32 global scale)
  if (spec.input && !spec.input->is_dynamic) {
    const bool integer = spec.input->dtype == QDtype::kInt8 || spec.input->dtype == QDtype::kUInt8;
    b += integer ? 4 + 1 : M;
  }
  if (kv_output) b += M;  // fp8 output_scale on k_proj / v_proj
  return b;
}

nlohmann::ordered_json estimate_resources(const nlohmann::json& analysis, const ResourceRequest& req) {
  const quant::SchemeDef& global = quant::get_scheme(req.quant_scheme);
  std::vector<std::pair<std::string, const quant::SchemeDef*>> overrides;
  for (const auto& [pattern, scheme] : req.layer_quant_scheme) {
    const quant::SchemeDef* s = quant::find_scheme(scheme);
    if (!s)
      throw Error(ErrorKind::kUsage, "", "--layer_quant_scheme",
                  "unknown scheme '" + scheme + "' for pattern '" + pattern + "'", "use a --quant_scheme name");
    overrides.emplace_back(pattern, s);
  }
  if (!req.kv_cache_dtype.empty()) (void)quant::kv_cache_spec(req.kv_cache_dtype);  // validates the name

  const bool calibrated = needs_calibration(req.quant_scheme, req.kv_cache_dtype, req.quant_algo);
  const uint64_t tokens = req.num_calib_data * req.seq_len;
  const json empty_env = json::object();
  const json& env = analysis.contains("environment") ? analysis.at("environment") : empty_env;
  const std::vector<std::string> algos = split_algos(req.quant_algo);
  const bool gptq = std::find(algos.begin(), algos.end(), "gptq") != algos.end();

  oj out;
  std::vector<std::string> assumptions;
  const json& model = analysis.at("model");
  const bool partial = analysis.value("analysis_status", "") == "partial" ||
                       analysis.at("quantization_targets").at("linear_layer_count").is_null();
  if (partial) {
    out["peak_memory"] = {{"bytes", nullptr},   {"human", nullptr}, {"usable_bytes", nullptr},
                          {"fits", nullptr},    {"formula", "unknown: partial model analysis"},
                          {"components", oj::object()}};
    out["disk"] = {{"bytes", nullptr},          {"human", nullptr},         {"source_weights_bytes", nullptr},
                   {"source_weights", nullptr}, {"quantized_linears", nullptr}, {"quantized_weights", nullptr},
                   {"bits_per_weight", nullptr}, {"formula", "unknown: partial model analysis"}};
    out["time"] = {{"seconds", nullptr}, {"human", nullptr}, {"flops", nullptr}, {"flops_per_second", nullptr},
                   {"io_bytes", nullptr}, {"formula", "unknown: partial model analysis"}};
    out["calibrated"] = calibrated;
    out["calibration_tokens"] = tokens;
    out["assumptions"] = {"the model analysis is partial: no linear layers are known, so nothing is estimated"};
    return out;
  }

  const uint64_t M = dtype_bytes_of(analysis);
  const uint64_t H = model.at("hidden_size").get<uint64_t>();
  const uint64_t vocab = model.at("vocab_size").get<uint64_t>();
  const uint64_t heads = model.at("num_attention_heads").get<uint64_t>();
  const uint64_t head_dim = model.at("head_dim").get<uint64_t>();
  const uint64_t layers = model.at("num_hidden_layers").get<uint64_t>();
  double expert_fraction = 1.0;
  if (model.at("is_moe").get<bool>()) {
    const json& moe = model.at("moe");
    if (moe.at("experts_per_token").is_number() && moe.at("num_experts").get<double>() > 0)
      expert_fraction = moe.at("experts_per_token").get<double>() / moe.at("num_experts").get<double>();
  }
  std::vector<std::string> kv_patterns = {"*k_proj", "*v_proj"};
  if (const quant::ModelTemplate* t = quant::find_model_template(model.at("model_type").get<std::string>()))
    kv_patterns = t->kv_layers;

  const std::vector<LinearModule> modules = expand_linear_modules(analysis);
  std::map<int64_t, uint64_t> layer_weights;  // fp32 bytes per decoder layer
  // GPTQ Hessians: (layer, stage) -> distinct (parent, in) inputs.
  std::map<std::pair<int64_t, int>, std::map<std::pair<std::string, uint64_t>, uint64_t>> hessians;
  uint64_t largest_linear = 0, linear_params = 0, quantized_bytes = 0, quantized_weights = 0, quantized_count = 0,
           excluded_bytes = 0;
  uint64_t weight_bytes = 0;  // quantized linears' weight tensors only (codes, scales, zero points)
  double active_linear = 0, gptq_flops = 0;
  for (const LinearModule& lm : modules) {
    const uint64_t n = lm.out_features * lm.in_features;
    linear_params += n;
    if (lm.layer >= 0) {
      layer_weights[lm.layer] += n * 4;
      active_linear += double(n) * (lm.name.find(".experts.") != std::string::npos ? expert_fraction : 1.0);
    }
    bool excluded = false;
    for (const auto& p : req.exclude_layers)
      if (quant::module_matches(p, lm.name)) {
        excluded = true;
        break;
      }
    if (excluded) {
      excluded_bytes += n * M;
      continue;
    }
    const quant::SchemeDef* s = &global;
    for (const auto& [pattern, def] : overrides)
      if (quant::module_matches(pattern, lm.name)) {
        s = def;
        break;
      }
    bool kv = false;
    if (!req.kv_cache_dtype.empty())
      for (const auto& p : kv_patterns) kv = kv || quant::module_matches(p, lm.name);
    quantized_bytes += quantized_linear_bytes(s->linear, lm.out_features, lm.in_features, M, kv);
    quant::LayerQuantSpec weight_only;
    weight_only.weight = s->linear.weight;
    weight_bytes += quantized_linear_bytes(weight_only, lm.out_features, lm.in_features, M, false);
    quantized_weights += n;
    ++quantized_count;
    largest_linear = std::max(largest_linear, n * 4);
    if (gptq && lm.layer >= 0) {
      const auto [parent, leaf] = split_leaf(lm.name);
      hessians[{lm.layer, gptq_stage(leaf)}][{parent, lm.in_features}] = lm.in_features * lm.in_features * 8;
      gptq_flops += std::pow(double(lm.in_features), 3) + 2.0 * double(lm.out_features) * std::pow(double(lm.in_features), 2);
    }
  }

  // ---- peak memory ----
  uint64_t layer_max = 0;
  for (const auto& [l, b] : layer_weights) layer_max = std::max(layer_max, b);
  uint64_t hessian_max = 0;
  for (const auto& [key, inputs] : hessians) {
    uint64_t s = 0;
    for (const auto& [k, b] : inputs) s += b;
    hessian_max = std::max(hessian_max, s);
  }
  const uint64_t activations = calibrated ? tokens * H * 4 * 2 : 0;
  const uint64_t embeddings = calibrated ? vocab * H * 4 : 0;
  const uint64_t peak = calibrated ? layer_max + activations + hessian_max + embeddings : 2 * largest_linear;
  const std::optional<uint64_t> usable = usable_memory_bytes(env);
  oj pm;
  pm["bytes"] = peak;
  pm["human"] = format_bytes(peak);
  pm["usable_bytes"] = usable ? oj(*usable) : oj(nullptr);
  pm["fits"] = usable ? oj(peak <= *usable) : oj(nullptr);
  pm["formula"] = calibrated
                      ? "largest decoder layer's linear weights x 4 B (fp32) + num_calib_data x seq_len x "
                        "hidden_size x 4 B x 2 (layer inputs and outputs) + GPTQ Hessians (in_features^2 x 8 B per "
                        "distinct input of the largest stage; 0 without gptq) + vocab_size x hidden_size x 4 B "
                        "(embedding table)"
                      : "RTN, tensor by tensor: 2 x the largest quantized linear weight x 4 B (fp32 source + result)";
  pm["components"] = {{"layer_weights_fp32", calibrated ? layer_max : 0},
                      {"calibration_activations", activations},
                      {"gptq_hessians", hessian_max},
                      {"embeddings_fp32", embeddings},
                      {"largest_linear_fp32", largest_linear}};
  out["peak_memory"] = pm;

  // ---- disk ----
  const uint64_t total_params = model.at("estimated_parameters").get<uint64_t>();
  const uint64_t other_params = total_params > linear_params ? total_params - linear_params : 0;
  const uint64_t disk = quantized_bytes + excluded_bytes + other_params * M;
  const uint64_t source_bytes = model.at("estimated_weights_bytes").get<uint64_t>();
  oj dk;
  dk["bytes"] = disk;
  dk["human"] = format_bytes(disk);
  dk["source_weights_bytes"] = source_bytes;
  dk["source_weights"] = format_bytes(source_bytes);
  dk["quantized_linears"] = quantized_count;
  dk["quantized_weights"] = quantized_weights;
  dk["bits_per_weight"] =
      quantized_weights ? oj(std::round(8000.0 * double(weight_bytes) / double(quantized_weights)) / 1000.0)
                        : oj(nullptr);
  dk["formula"] =
      "sum over quantized linears of codes + scales + zero points + static input / KV scales (qloom's Quark "
      "exporter layout) + excluded linears and all other parameters (embeddings, norms, biases) x " +
      std::to_string(M) + " B (" + (model.at("torch_dtype").is_string() ? model.at("torch_dtype").get<std::string>()
                                                                        : std::string("assumed 16-bit")) +
      "); tokenizer and config files not counted";
  out["disk"] = dk;

  // ---- time ----
  const unsigned threads = threads_of(env);
  const double rate = flops_per_thread(env) * threads;
  double passes = 0;
  if (calibrated) {
    passes = 1;
    for (const auto& a : algos)
      passes += a == "gptq" ? kGptqStages : a == "awq" ? kAwqGrid : a == "autosmoothquant" ? kAutoSmoothGrid : 1;
  }
  const double pass_flops =
      2.0 * active_linear * double(tokens) + 2.0 * double(tokens) * double(req.seq_len) * double(heads * head_dim * layers);
  const double flops = passes * pass_flops + gptq_flops;
  const double io = double(source_bytes + disk);
  const double seconds = flops / rate + io / kIoBytesPerSecond;
  oj tm;
  tm["seconds"] = std::round(seconds * 10.0) / 10.0;
  tm["human"] = format_duration(seconds);
  tm["flops"] = std::round(flops);
  tm["flops_per_second"] = rate;
  tm["io_bytes"] = uint64_t(io);
  tm["formula"] =
      "passes x (2 x active decoder linear weights x tokens + 2 x tokens x seq_len x heads x head_dim x layers) "
      "[+ GPTQ: sum of in^3 + 2 x out x in^2] / (" +
      std::to_string(threads) + " threads x " + format_count(uint64_t(flops_per_thread(env) / 1e9)) +
      " GFLOP/s) + (source + output bytes) / 1 GiB/s; passes = " + std::to_string(int(passes)) +
      (calibrated ? "" : " (RTN: no calibration)");
  out["time"] = tm;
  out["calibrated"] = calibrated;
  out["calibration_tokens"] = calibrated ? tokens : 0;

  assumptions.push_back("calibration tokens = num_calib_data x seq_len (an upper bound: shorter documents give fewer)");
  assumptions.push_back("sustained compute per usable thread: 50 GFLOP/s with avx512f, 25 with avx2+fma, 4 otherwise "
                        "(about half the measured best of engine/gemm.cpp)");
  assumptions.push_back("weights are read and written at 1 GiB/s");
  if (expert_fraction < 1.0)
    assumptions.push_back("MoE: each token runs experts_per_token of num_experts experts");
  if (layer_weights.empty()) assumptions.push_back("no decoder-layer linears: layer memory is 0");
  out["assumptions"] = assumptions;
  return out;
}

}  // namespace qloom::agent
