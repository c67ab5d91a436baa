#include "summary_json.h"

namespace qloom::python {

nlohmann::ordered_json quantize_summary_json(const job::QuantizeSummary& s) {
  nlohmann::ordered_json j;
  j["tensors_in"] = s.tensors_in;
  j["tensors_out"] = s.tensors_out;
  j["layers_quantized"] = s.layers_quantized;
  j["layers_excluded"] = s.layers_excluded;
  j["bytes_before"] = s.bytes_before;
  j["bytes_after"] = s.bytes_after;
  j["params_quantized"] = s.params_quantized;
  j["bits_per_weight"] = s.bits_per_weight;
  j["seconds"] = s.seconds;
  j["warnings"] = s.warnings;
  j["exclude"] = s.exclude;
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& f : s.algo_config_files) files.push_back({{"algo", f.algo}, {"path", f.path}, {"sha256", f.sha256}});
  j["algo_config_files"] = files;
  j["calibrated"] = s.calibrated;
  j["calib_source"] = s.calib_source;
  j["calib_samples"] = s.calib_samples;
  j["calib_tokens"] = s.calib_tokens;
  j["calib_seconds"] = s.calib_seconds;
  j["static_scales"] = s.static_scales;
  j["algo_linears"] = s.algo_linears;
  j["algo_fallbacks"] = s.algo_fallbacks;
  j["rtn_linears"] = s.rtn_linears;
  j["unrouted_experts"] = s.unrouted_experts;
  j["scaled_groups"] = s.scaled_groups;
  j["unscaled_groups"] = s.unscaled_groups;
  j["calib_activation_bytes"] = s.calib_activation_bytes;
  j["layer_seconds"] = s.layer_seconds;
  nlohmann::ordered_json exports = nlohmann::ordered_json::array();
  for (const auto& e : s.exports)
    exports.push_back({{"format", e.format}, {"path", e.path.string()}, {"bytes", e.bytes}, {"seconds", e.seconds}});
  j["exports"] = exports;
  return j;
}

}  // namespace qloom::python
