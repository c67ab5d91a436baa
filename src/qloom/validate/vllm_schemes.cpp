// Rule "scheme pairs": the (weight, input_tensors) pair every quantized linear
// resolves to must select a scheme class in vLLM 0.33.0's
// QuarkConfig._get_scheme_cls_from_config (the _is_* predicates, tried in
// its order). The minimum release is the first published vLLM wheel whose
// quark/ loader accepts the pair and builds the scheme (the releases before
// it were read too; vLLM's git history was not available here):
//   QuarkW8A8Fp8 / QuarkW8A8Int8 (static), fp8 KV cache   0.7.0 (0.6.6: no Quark)
//   fp4 weight + dynamic fp4 input (QuarkW4A4MXFP4)       0.9.0 (0.8.5: none)
//   QuarkW4A8_MXFP4_FP8                                   0.18.0 (0.17.0: none)
//   fp4 weight-only (QuarkOCP_MX, no input spec)          0.19.0 (0.12-0.14 reject it,
//                                                         0.17-0.18 crash on it)
//   QuarkW4A16Int4 (int4 / uint4 per-group weight-only)   0.31.0 (0.30.0: none)
// Others (NVFP4, fp8 per-block, dynamic int8, MX fp6/fp8) are present in
// 0.33.0; their first release is not determined.
#include <map>

#include "qloom/validate/step_util.h"
#include "qloom/validate/vllm_rules.h"

namespace qloom::validate::vllm {

using json = nlohmann::json;

namespace {

bool is_str(const json& obj, const char* key, const char* value) {
  const json& v = get(obj, key);
  return v.is_string() && v.get<std::string>() == value;
}
bool is_num(const json& obj, const char* key, double value) {
  const json& v = get(obj, key);
  return v.is_number() && !v.is_boolean() && v.get<double>() == value;
}
bool is_true(const json& obj, const char* key) {
  const json& v = get(obj, key);
  return v.is_boolean() && v.get<bool>();
}
bool dynamic(const json& obj) { return truthy(get(obj, "is_dynamic")); }

// ocp_mx_weight_dtype_and_rows: the MX dtype of an OCP MX weight, or "".
std::string ocp_mx_weight_dtype(const json& w) {
  if (!w.is_object() || !get(w, "dtype").is_string()) return "";
  std::string mx = get(w, "dtype").get<std::string>();
  if (auto p = mx.find("fp"); p != std::string::npos) mx.replace(p, 2, "mxfp");
  static const char* kWeight[] = {"mxfp4", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp8_e4m3"};
  bool known = false;
  for (const char* k : kWeight) known = known || mx == k;
  if (!known) return "";
  if (is_str(w, "qscheme", "per_group"))
    return is_num(w, "group_size", 32) && is_str(w, "scale_format", "e8m0") ? mx : "";
  if (is_str(w, "qscheme", "per_block")) {
    const json& b = get(w, "block_size");
    const bool ok = mx == "mxfp8_e4m3" && b.is_array() && b.size() == 2 && b[1].is_number() && b[1] == 32 &&
                    is_str(w, "scale_type", "float8_e8m0fnu") && is_true(w, "symmetric") && !dynamic(w);
    return ok ? mx : "";
  }
  return "";
}

SchemeMatch fp8_w8a8(const json& w, const json& in) {
  if (!w.is_object() || !in.is_object()) return {};
  if (!is_str(w, "dtype", "fp8_e4m3") || !is_str(in, "dtype", "fp8_e4m3") || dynamic(w)) return {};
  if (is_str(w, "qscheme", "per_block")) {
    const json& b = get(w, "block_size");
    const bool ok = b == json::array({128, 128}) && is_true(w, "symmetric") && dynamic(in) &&
                    is_str(in, "qscheme", "per_group") && is_num(in, "group_size", 128) && is_true(in, "symmetric");
    return ok ? SchemeMatch{"QuarkW8A8Fp8PerBlock", "", "", 89} : SchemeMatch{};
  }
  if (!is_str(w, "qscheme", "per_tensor") && !is_str(w, "qscheme", "per_channel")) return {};
  if (!dynamic(in) && !is_str(in, "qscheme", "per_tensor")) return {};
  return {"QuarkW8A8Fp8", "", "0.7.0", 89};
}

SchemeMatch w8a8_int8(const json& w, const json& in) {
  if (!w.is_object() || !in.is_object()) return {};
  if (!is_str(w, "dtype", "int8") || !is_str(in, "dtype", "int8")) return {};
  if (!is_str(w, "qscheme", "per_tensor") && !is_str(w, "qscheme", "per_channel")) return {};
  const bool static_in = is_str(in, "qscheme", "per_tensor") && !dynamic(in);
  const bool dynamic_in = is_str(in, "qscheme", "per_channel") && is_true(in, "is_dynamic");
  if (!is_true(w, "symmetric") || !((static_in && !dynamic(w)) || dynamic_in)) return {};
  return {"QuarkW8A8Int8", "", static_in ? "0.7.0" : "", 75};
}

SchemeMatch w4a16_int4(const json& w, const json& in, const json& qc) {
  if (w.is_null() || !in.is_null()) return {};
  if (!is_str(w, "dtype", "int4") && !is_str(w, "dtype", "uint4")) return {};
  const json& pm = get(get(qc, "export"), "pack_method");
  if (!(pm == "order" || pm == "reorder")) return {};
  SchemeMatch m{"QuarkW4A16Int4", "", "0.31.0", 70};
  // parse_w4a16_int4_weight_config (quark/utils.py) raises ValueError.
  const json& gs = get(w, "group_size");
  if (!w.contains("group_size"))
    m.error = "ValueError: Quark W4A16 INT4/UINT4 configs must specify weight.group_size";
  else if (!gs.is_number_integer() || gs.get<int64_t>() <= 0)
    m.error = "ValueError: Quark W4A16 weight.group_size must be a positive int, got " + gs.dump();
  else if (!w.contains("symmetric"))
    m.error = "ValueError: Quark W4A16 INT4/UINT4 configs must specify weight.symmetric";
  else if (!get(w, "symmetric").is_boolean())
    m.error = "ValueError: Quark W4A16 weight.symmetric must be a bool, got " + get(w, "symmetric").dump();
  return m;
}

SchemeMatch w4a8_mxfp4_fp8(const json& w, const json& in) {
  if (w.is_null() || in.is_null()) return {};
  const bool wq = is_str(w, "dtype", "fp4") && is_str(w, "qscheme", "per_group") && is_num(w, "group_size", 32) &&
                  is_str(w, "scale_format", "e8m0") && !dynamic(w);
  const bool iq = is_str(in, "dtype", "fp8_e4m3") && is_str(in, "qscheme", "per_tensor") && !dynamic(in) &&
                  is_true(in, "symmetric");
  return wq && iq ? SchemeMatch{"QuarkW4A8_MXFP4_FP8", "", "0.18.0", 70} : SchemeMatch{};
}

SchemeMatch ocp_mx(const json& w, const json& in) {
  const std::string wd = ocp_mx_weight_dtype(w);
  if (wd.empty()) return {};
  SchemeMatch m{"QuarkOCP_MX", "", "", 70};
  if (in.is_null()) {
    // Weight-only: 0.17.0 / 0.18.0 accept the pair but QuarkOCP_MX then reads
    // input_quant_spec["dtype"] of None; 0.19.0 is the first that loads it.
    m.min_version = wd == "mxfp4" ? "0.19.0" : "";
    return m;
  }
  if (!dynamic(in)) return {};  // static input scales: not OCP MX
  if (!get(in, "dtype").is_string()) return {};
  std::string id = get(in, "dtype").get<std::string>();
  if (id == "fp8_e4m3") return m;
  if (auto p = id.find("fp"); p != std::string::npos) id.replace(p, 2, "mxfp");
  if (id != "mxfp4" && id != "mxfp6_e3m2" && id != "mxfp6_e2m3" && id != "mxfp8_e4m3")
    m.error = "ValueError: Unsupported input_dtype=" + id + " in Quark's vLLM integration";
  // W4A4 MXFP4 (fp4 weight, dynamic fp4 input) was QuarkW4A4MXFP4 from 0.9.0.
  if (wd == "mxfp4" && id == "mxfp4") m.min_version = "0.9.0";
  return m;
}

}  // namespace

SchemeMatch match_scheme(const json& config, const json& qc) {
  json w = get(config, "weight"), in = get(config, "input_tensors");
  if ((w.is_array() && w.size() > 1) || (in.is_array() && in.size() > 1)) {
    const bool nv = w.is_array() && w.size() == 2 && in.is_array() && in.size() == 2 &&
                    is_str(w[0], "dtype", "fp4") && is_str(w[0], "qscheme", "per_group") &&
                    is_num(w[0], "group_size", 16) && !dynamic(w[0]) && is_str(in[0], "dtype", "fp4") &&
                    is_str(in[0], "qscheme", "per_group") && is_num(in[0], "group_size", 16) && dynamic(in[0]) &&
                    is_str(w[1], "dtype", "fp8_e4m3") && is_str(w[1], "qscheme", "per_tensor") && !dynamic(w[1]) &&
                    is_str(in[1], "dtype", "fp8_e4m3") && is_str(in[1], "qscheme", "per_tensor") && !dynamic(in[1]);
    if (nv) return {"QuarkNVFP4", "", "", 75};
    return {"", "NotImplementedError: Multi-entry weight or activation quantization configs are only supported for NVFP4", "", 0};
  }
  if (w.is_array()) w = w.size() == 1 ? json(w[0]) : json();
  if (in.is_array()) in = in.size() == 1 ? json(in[0]) : json();
  if (w.is_object() && is_str(w, "qscheme", "per_block") && !truthy(get(w, "block_size")))
    return {"", "ValueError: Quark W8A8 FP8 per-block weight quantization requires `block_size`", "", 0};
  for (const SchemeMatch& m : {fp8_w8a8(w, in), w8a8_int8(w, in), w4a16_int4(w, in, qc), w4a8_mxfp4_fp8(w, in)})
    if (!m.scheme.empty()) return m;
  if (SchemeMatch m = ocp_mx(w, in); !m.scheme.empty()) return m;
  return {"", "NotImplementedError: No quark compatible scheme was found. Weight config: " + detail::json_brief(w) +
                  ", Input config: " + detail::json_brief(in), "", 0};
}

RuleResult rule_scheme_pairs(const CheckpointView& v) {
  RuleResult r{"scheme_pairs", "(weight, input) scheme pairs", "", {}};
  const json qc = after_from_config(v.qc);
  // One line per distinct config entry, with the modules that resolve to it.
  std::map<std::string, std::vector<std::string>> users;
  std::map<std::string, json> configs;
  std::vector<std::string> order;
  for (const std::string& m : v.quantized) {
    if (excluded_by(qc, m)) continue;  // rule lookup_order reports it
    const Resolved res = vllm_lookup(qc, m);
    if (!users.count(res.source)) order.push_back(res.source);
    users[res.source].push_back(m);
    configs[res.source] = res.config;
  }
  std::vector<std::string> parts;
  for (const std::string& src : order) {
    const SchemeMatch sm = match_scheme(configs[src], qc);
    const std::string who = users[src].front() + (users[src].size() > 1 ? " and " + std::to_string(users[src].size() - 1) + " more" : "");
    if (sm.scheme.empty() || !sm.error.empty()) {
      r.findings.push_back({src + " (" + who + ")",
                            "vLLM " + std::string(kVllmVersion) + " raises " + sm.error,
                            sm.scheme.empty() ? "use a (weight, input_tensors) pair vLLM implements (fp8 / int8 W8A8, "
                                                "int4 / uint4 per-group weight-only, OCP MX) or exclude these layers"
                                              : "write weight.group_size as a positive integer (per-group int4 / uint4; "
                                                "vLLM has no per-channel W4A16 path) and weight.symmetric as a bool"});
      continue;
    }
    std::string line = src + " → " + sm.scheme + " (" + std::to_string(users[src].size()) + " layers";
    line += sm.min_version.empty() ? "; present in vLLM " + std::string(kVllmVersion) + ", first release not determined"
                                   : "; vLLM ≥ " + sm.min_version;
    line += "; GPU compute capability ≥ " + std::to_string(sm.min_capability / 10) + "." + std::to_string(sm.min_capability % 10) + ")";
    parts.push_back(line);
  }
  for (const std::string& m : v.quantized_embeddings)
    r.findings.push_back({m, "stored quantized (" + m + ".weight_scale), but vLLM builds embeddings and lm_head as "
                             "(Parallel)Embedding / ParallelLMHead, to which no Quark scheme applies: the weight does not load",
                          "exclude " + m + " (add it to quantization_config.exclude and re-export)"});
  r.checked = parts.empty() ? "no quantized linear layer" : detail::join(parts, "; ");
  return r;
}

}  // namespace qloom::validate::vllm
