#include "qloom/export/attention_quant.h"

#include <algorithm>

#include <memory>
#include <unordered_map>

#include "qloom/core/error.h"
#include "qloom/export/quark_config.h"
#include "qloom/export/quark_tensors.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::exporter {

quant::QuantSpec attention_output_spec(std::string_view dtype) {
  // _SUPPORTED_ATTENTION_SCHEMES = ["fp8"]; the spec is the KV cache's
  // (same FP8E4M3PerTensorSpec arguments).
  if (dtype == "fp8") return quant::kv_cache_spec("fp8");
  throw Error(ErrorKind::kUsage, "", "--attention_dtype", "unknown attention dtype '" + std::string(dtype) + "'",
              "Quark's attention schemes: fp8");
}

std::vector<std::string> q_layer_patterns(std::string_view model_type) {
  // DEFAULT_TEMPLATES q_layer_name (amd-quark 0.13) of the families the
  // engine runs; all "*q_proj" but phi3's fused "*qkv_proj".
  static const char* kQProj[] = {"llama",       "mistral",   "qwen2",     "qwen3",    "gemma2",
                                 "gemma3_text", "mixtral",   "qwen2_moe", "qwen3_moe"};
  if (std::find(std::begin(kQProj), std::end(kQProj), model_type) != std::end(kQProj)) return {"*q_proj"};
  if (model_type == "phi3")
    throw Error(ErrorKind::kUnsupported, "", "--attention_dtype",
                "phi3's q projection is fused into qkv_proj (Quark's q_layer_name \"*qkv_proj\" would quantize the "
                "keys and values with the queries' scale)",
                "omit --attention_dtype for this model");
  throw Error(ErrorKind::kUnsupported, "", "--attention_dtype",
              "no Quark q_layer_name is known to qloom for model_type '" + std::string(model_type) + "'",
              "omit --attention_dtype for this model");
}

size_t install_attention_sim(const io::ModelDir& dir, const nlohmann::json& qc, engine::ForwardHooks& hooks,
                             const std::string& file) {
  const std::optional<quant::QuantSpec> spec = softmax_quant_spec(qc, file);
  if (!spec) return 0;
  if (spec->is_dynamic || spec->qscheme != quant::QScheme::kPerTensor)
    throw Error(ErrorKind::kUnsupported, file, "quantization_config.softmax_quant_spec",
                "only static per-tensor softmax quantization is simulated (Quark's attention_scheme fp8)", "");
  const TensorLookup lookup = index_lookup(dir.weights());
  auto scales = std::make_shared<std::unordered_map<std::string, quant::StaticQParams>>();
  static const std::string kSuffix = ".prob_output_scale";
  for (const auto& name : dir.weights().tensor_names()) {
    if (name.size() <= kSuffix.size() || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      continue;
    const std::string module = name.substr(0, name.size() - kSuffix.size());
    const auto q = unpack_activation_qparams(module, ActivationRole::kProbs, lookup);
    if (q) scales->emplace(module, quant::StaticQParams{q->scale, q->zero_point});
  }
  if (scales->empty())
    throw Error(ErrorKind::kInvalidInput, file, "quantization_config.softmax_quant_spec",
                "the config quantizes the attention softmax but the checkpoint has no *.prob_output_scale tensor",
                "re-export the checkpoint with its calibrated attention scales");
  const quant::QuantSpec s = *spec;
  hooks.attention_probs = [scales, s](const engine::AttentionSite& site, float* p, int64_t rows, int64_t cols) {
    const auto it = scales->find(site.module);
    if (it != scales->end()) quant::fake_quantize_activation(p, rows, cols, s, it->second);
  };
  return scales->size();
}

std::string prob_output_scale_name(int64_t layer) {
  return "model.layers." + std::to_string(layer) + ".self_attn.prob_output_scale";
}

}  // namespace qloom::exporter
