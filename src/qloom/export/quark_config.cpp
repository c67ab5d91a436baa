#include "qloom/export/quark_config.h"

#include <cmath>
#include <set>
#include <utility>

#include "qloom/core/error.h"

namespace qloom::exporter {

using nlohmann::json;
using nlohmann::ordered_json;
using quant::LayerQuantSpec;
using quant::QDtype;
using quant::QScheme;
using quant::QuantSpec;
using quant::ScaleFormat;

namespace {

const char* qscheme_name(QScheme s) {
  switch (s) {
    case QScheme::kPerTensor: return "per_tensor";
    case QScheme::kPerChannel: return "per_channel";
    case QScheme::kPerGroup: return "per_group";
  }
  return "?";
}

bool is_mx_element(QDtype d) {
  return d == QDtype::kFp4 || d == QDtype::kFp6E2M3 || d == QDtype::kFp6E3M2;
}

ordered_json string_or_null(const std::string& s) {
  return s.empty() ? ordered_json(nullptr) : ordered_json(s);
}

ordered_json opt_spec(const std::optional<QuantSpec>& s) {
  return s ? quant_spec_to_json(*s) : ordered_json(nullptr);
}

// ---- strict reading helpers ---------------------------------------------------

std::string join_item(const std::string& where, const std::string& key) {
  if (where.empty()) return key;
  return where + "." + key;
}

[[noreturn]] void bad(ErrorKind kind, const std::string& file, const std::string& item,
                      const std::string& msg, const std::string& remedy) {
  throw Error(kind, file, item, msg, remedy);
}

const char* kRemedyQuark =
    "the quantization_config must be one written by AMD Quark (hf_format export)";

std::string type_name(const json& v) { return v.type_name(); }

bool get_bool(const json& obj, const char* key, const std::string& where, const std::string& file,
              bool dflt_when_null, bool allow_null) {
  const json& v = obj.at(key);
  if (v.is_null() && allow_null) return dflt_when_null;
  if (!v.is_boolean())
    bad(ErrorKind::kInvalidInput, file, join_item(where, key),
        std::string("expected a boolean") + (allow_null ? " or null" : "") + ", got " +
            type_name(v),
        kRemedyQuark);
  return v.get<bool>();
}

std::optional<int64_t> get_int_or_null(const json& obj, const char* key, const std::string& where,
                                       const std::string& file) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    bad(ErrorKind::kInvalidInput, file, join_item(where, key),
        "expected an integer or null, got " + type_name(*it), kRemedyQuark);
  return it->get<int64_t>();
}

std::string get_string_or_null(const json& obj, const char* key, const std::string& where,
                               const std::string& file) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string())
    bad(ErrorKind::kInvalidInput, file, join_item(where, key),
        "expected a string or null, got " + type_name(*it), kRemedyQuark);
  return it->get<std::string>();
}

std::optional<QDtype> qdtype_from_name(const std::string& s) {
  static const std::pair<const char*, QDtype> kNames[] = {
      {"int8", QDtype::kInt8},         {"uint8", QDtype::kUInt8},
      {"int4", QDtype::kInt4},         {"uint4", QDtype::kUInt4},
      {"fp8_e4m3", QDtype::kFp8E4M3},  {"fp8_e5m2", QDtype::kFp8E5M2},
      {"fp4", QDtype::kFp4},           {"fp6_e2m3", QDtype::kFp6E2M3},
      {"fp6_e3m2", QDtype::kFp6E3M2},  {"fp8_e5m3", QDtype::kFp8E5M3},
  };
  for (const auto& [n, d] : kNames)
    if (s == n) return d;
  return std::nullopt;
}

// The layer config of `pattern` in an ordered list of (pattern, config).
struct NamedLayer {
  std::string pattern;
  LayerQuantSpec spec;
};

}  // namespace

// ---- QuantSpec <-> JSON -----------------------------------------------------------

ordered_json quant_spec_to_json(const QuantSpec& s) {
  // Key order and value conventions: QTensorConfig.to_dict() in
  // quark/torch/quantization/config/config.py (amd-quark 0.12.post1).
  ordered_json j = ordered_json::object();
  j["dtype"] = quant::quant_dtype_name(s.dtype);
  j["is_dynamic"] = s.is_dynamic;
  j["qscheme"] = qscheme_name(s.qscheme);
  // BaseQTensorConfig (quark/common/config.py) defaults ch_axis and
  // group_size to None; FP8E4M3PerTensorSpec / Int8PerTensorSpec never set
  // them, per-channel specs set only ch_axis.
  j["ch_axis"] = s.qscheme == QScheme::kPerTensor ? ordered_json(nullptr) : ordered_json(s.ch_axis);
  j["group_size"] =
      s.qscheme == QScheme::kPerGroup ? ordered_json(s.group_size) : ordered_json(nullptr);
  j["block_size"] = nullptr;
  // OCP_MXSpec.OCP_MX_SPEC_KWARGS: "symmetric": None.
  // FP4PerGroupSpec and AmdFP4Spec (fp4 with float32 / e5m3 scales) pass
  // symmetric=None too.
  j["symmetric"] = is_mx_element(s.dtype) ? ordered_json(nullptr) : ordered_json(s.symmetric);
  j["round_method"] = string_or_null(s.round_method);
  j["scale_type"] = string_or_null(s.scale_type);
  j["scale_format"] = string_or_null(quant::scale_format_name(s.scale_format));
  j["scale_calculation_mode"] = string_or_null(s.scale_calculation_mode);
  j["mx_element_dtype"] = nullptr;
  j["observer_cls"] = string_or_null(s.observer_cls);
  j["is_scale_quant"] = s.is_scale_quant;
  j["enable_buffer_reuse"] = false;
  j["max_input_numel"] = kQuarkMaxInputNumel;
  return j;
}

QuantSpec quant_spec_from_json(const json& j, const std::string& where, const std::string& file) {
  if (!j.is_object())
    bad(ErrorKind::kInvalidInput, file, where, "expected a tensor spec object, got " + type_name(j),
        kRemedyQuark);
  // Keys of QTensorConfig.to_dict() across amd-quark 0.9 .. 0.13, plus the
  // legacy spellings QTensorConfig.from_dict accepts ("dynamic", "axis").
  static const std::set<std::string> kKnown = {
      "dtype",          "is_dynamic",     "dynamic",          "qscheme",
      "ch_axis",        "axis",           "group_size",       "block_size",
      "symmetric",      "round_method",   "scale_type",       "zero_point_type",
      "scale_format",   "scale_calculation_mode",             "mx_element_dtype",
      "observer_cls",   "is_scale_quant", "enable_buffer_reuse", "max_input_numel"};
  for (const auto& [k, v] : j.items()) {
    (void)v;
    if (!kKnown.count(k))
      bad(ErrorKind::kInvalidInput, file, join_item(where, k),
          "unknown key in a Quark tensor spec",
          "expected only QTensorConfig keys (dtype, is_dynamic, qscheme, ch_axis, group_size, "
          "block_size, symmetric, round_method, scale_type, scale_format, "
          "scale_calculation_mode, mx_element_dtype, observer_cls, is_scale_quant, "
          "enable_buffer_reuse, max_input_numel); a newer Quark may need a newer qloom");
  }

  QuantSpec s;
  // dtype
  if (!j.contains("dtype"))
    bad(ErrorKind::kInvalidInput, file, join_item(where, "dtype"), "missing key", kRemedyQuark);
  if (!j["dtype"].is_string())
    bad(ErrorKind::kInvalidInput, file, join_item(where, "dtype"),
        "expected a string, got " + type_name(j["dtype"]), kRemedyQuark);
  const std::string dname = j["dtype"].get<std::string>();
  auto d = qdtype_from_name(dname);
  if (!d)
    bad(ErrorKind::kUnsupported, file, join_item(where, "dtype"),
        "dtype \"" + dname + "\" is not supported",
        "qloom handles int8, uint8, int4, uint4, fp8_e4m3, fp8_e5m2, fp4, fp6_e2m3, fp6_e3m2");
  s.dtype = *d;

  // is_dynamic (legacy: dynamic)
  const char* dyn_key = j.contains("is_dynamic") ? "is_dynamic" : (j.contains("dynamic") ? "dynamic" : nullptr);
  if (!dyn_key)
    bad(ErrorKind::kInvalidInput, file, join_item(where, "is_dynamic"), "missing key", kRemedyQuark);
  s.is_dynamic = get_bool(j, dyn_key, where, file, false, /*allow_null=*/false);

  // qscheme
  if (!j.contains("qscheme") || j["qscheme"].is_null())
    bad(ErrorKind::kInvalidInput, file, join_item(where, "qscheme"), "missing or null qscheme",
        kRemedyQuark);
  if (!j["qscheme"].is_string())
    bad(ErrorKind::kInvalidInput, file, join_item(where, "qscheme"),
        "expected a string, got " + type_name(j["qscheme"]), kRemedyQuark);
  const std::string qs = j["qscheme"].get<std::string>();
  if (qs == "per_tensor") {
    s.qscheme = QScheme::kPerTensor;
  } else if (qs == "per_channel") {
    s.qscheme = QScheme::kPerChannel;
  } else if (qs == "per_group") {
    s.qscheme = QScheme::kPerGroup;
  } else {
    bad(ErrorKind::kUnsupported, file, join_item(where, "qscheme"),
        "qscheme \"" + qs + "\" is not supported", "qloom handles per_tensor, per_channel, per_group");
  }

  // ch_axis (legacy: axis)
  const char* axis_key = j.contains("ch_axis") ? "ch_axis" : (j.contains("axis") ? "axis" : "ch_axis");
  auto axis = get_int_or_null(j, axis_key, where, file);
  if (!axis && s.qscheme != QScheme::kPerTensor)
    bad(ErrorKind::kInvalidInput, file, join_item(where, "ch_axis"),
        "ch_axis is required for " + qs, kRemedyQuark);
  s.ch_axis = axis ? static_cast<int>(*axis) : -1;

  auto gs = get_int_or_null(j, "group_size", where, file);
  if (s.qscheme == QScheme::kPerGroup) {
    if (!gs || *gs <= 0)
      bad(ErrorKind::kInvalidInput, file, join_item(where, "group_size"),
          "per_group needs a positive group_size", kRemedyQuark);
    s.group_size = static_cast<int>(*gs);
  } else {
    s.group_size = 0;
  }

  if (j.contains("block_size") && !j["block_size"].is_null())
    bad(ErrorKind::kUnsupported, file, join_item(where, "block_size"),
        "block_size (per_block quantization) is not supported", "");

  if (j.contains("symmetric")) s.symmetric = get_bool(j, "symmetric", where, file, true, true);

  s.round_method = get_string_or_null(j, "round_method", where, file);
  s.scale_type = get_string_or_null(j, "scale_type", where, file);
  const std::string zpt = get_string_or_null(j, "zero_point_type", where, file);
  if (!zpt.empty() && zpt != "int32")
    bad(ErrorKind::kUnsupported, file, join_item(where, "zero_point_type"),
        "zero_point_type \"" + zpt + "\" is not supported", "qloom handles int32 zero points");

  const std::string sf = get_string_or_null(j, "scale_format", where, file);
  if (sf.empty()) {
    s.scale_format = ScaleFormat::kFloat;
  } else if (sf == "e8m0") {
    s.scale_format = ScaleFormat::kE8M0;
  } else if (sf == "float32") {
    s.scale_format = ScaleFormat::kFloat32;
  } else if (sf == "e5m3") {
    s.scale_format = ScaleFormat::kE5M3;
  } else {
    bad(ErrorKind::kUnsupported, file, join_item(where, "scale_format"),
        "scale_format \"" + sf + "\" is not supported", "qloom handles e8m0, float32, e5m3 and null");
  }
  s.scale_calculation_mode = get_string_or_null(j, "scale_calculation_mode", where, file);
  if (!get_string_or_null(j, "mx_element_dtype", where, file).empty())
    bad(ErrorKind::kUnsupported, file, join_item(where, "mx_element_dtype"),
        "mx_element_dtype (dtype \"mx\") is not supported", "");
  s.observer_cls = get_string_or_null(j, "observer_cls", where, file);
  if (j.contains("is_scale_quant")) s.is_scale_quant = get_bool(j, "is_scale_quant", where, file, false, true);
  if (j.contains("enable_buffer_reuse")) (void)get_bool(j, "enable_buffer_reuse", where, file, false, true);
  (void)get_int_or_null(j, "max_input_numel", where, file);
  return s;
}

ordered_json layer_spec_to_json(const LayerQuantSpec& l) {
  // QLayerConfig.to_dict() (quark/torch/quantization/config/config.py); a
  // two-stage spec (TwoStageSpec.to_quantization_spec) is the list
  // [first, second].
  auto staged = [](const std::optional<QuantSpec>& first, const std::optional<QuantSpec>& second) {
    if (!first || !second) return opt_spec(first);
    return ordered_json::array({quant_spec_to_json(*first), quant_spec_to_json(*second)});
  };
  ordered_json j = ordered_json::object();
  j["input_tensors"] = staged(l.input, l.input_stage2);
  j["output_tensors"] = opt_spec(l.output);
  j["weight"] = staged(l.weight, l.weight_stage2);
  j["bias"] = opt_spec(l.bias);
  j["target_device"] = nullptr;
  return j;
}

LayerQuantSpec layer_spec_from_json(const json& j, const std::string& where, const std::string& file) {
  if (!j.is_object())
    bad(ErrorKind::kInvalidInput, file, where, "expected a layer config object, got " + type_name(j),
        kRemedyQuark);
  static const std::set<std::string> kKnown = {"input_tensors", "output_tensors", "weight", "bias",
                                                "target_device"};
  for (const auto& [k, v] : j.items()) {
    (void)v;
    if (!kKnown.count(k))
      bad(ErrorKind::kInvalidInput, file, join_item(where, k), "unknown key in a Quark layer config",
          "expected input_tensors, output_tensors, weight, bias, target_device");
  }
  // A list is a two-stage spec [first, second] (weight and input_tensors
  // only, e.g. nvfp4); `second` receives its second stage.
  auto one = [&](const char* key, std::optional<QuantSpec>* second) -> std::optional<QuantSpec> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (it->is_array()) {
      if (second == nullptr || it->size() != 2)
        bad(ErrorKind::kUnsupported, file, join_item(where, key),
            "a list of specs is supported only as a two-stage weight / input_tensors spec [first, second]", "");
      *second = quant_spec_from_json((*it)[1], join_item(where, key) + "[1]", file);
      return quant_spec_from_json((*it)[0], join_item(where, key) + "[0]", file);
    }
    return quant_spec_from_json(*it, join_item(where, key), file);
  };
  LayerQuantSpec l;
  l.input = one("input_tensors", &l.input_stage2);
  l.output = one("output_tensors", nullptr);
  l.weight = one("weight", &l.weight_stage2);
  l.bias = one("bias", nullptr);
  if (j.contains("target_device") && !j["target_device"].is_null())
    bad(ErrorKind::kUnsupported, file, join_item(where, "target_device"),
        "target_device is not supported", "");
  return l;
}

// ---- patterns -----------------------------------------------------------------------

std::vector<std::string> expand_exclude(const std::vector<std::string>& exclude) {
  // QConfig.__post_init__ (quark/torch/quantization/config/config.py, 0.12):
  //   if not item.endswith(".*"): new_exclude.append(item + ".*")
  //   new_exclude.append(item)
  std::vector<std::string> out;
  for (const auto& p : exclude) {
    const bool ends = p.size() >= 2 && p.compare(p.size() - 2, 2, ".*") == 0;
    if (!ends) out.push_back(p + ".*");
    out.push_back(p);
  }
  return out;
}

namespace {

// Matches one "[...]" class at pattern[pi] against c. Returns the index just
// past the class, or npos when the '[' has no closing ']' (then it is a
// literal '['), like Python's fnmatch.translate.
size_t match_class(std::string_view pat, size_t pi, char c, bool* matched) {
  size_t i = pi + 1;
  bool negate = false;
  if (i < pat.size() && pat[i] == '!') {
    negate = true;
    ++i;
  }
  const size_t first = i;
  // A ']' right after '[' or '[!' is a literal member.
  if (i < pat.size() && pat[i] == ']') ++i;
  while (i < pat.size() && pat[i] != ']') ++i;
  if (i >= pat.size()) return std::string_view::npos;
  bool hit = false;
  for (size_t k = first; k < i; ++k) {
    if (k + 2 < i && pat[k + 1] == '-') {
      if (pat[k] <= c && c <= pat[k + 2]) hit = true;
      k += 2;
    } else if (pat[k] == c) {
      hit = true;
    }
  }
  *matched = negate ? !hit : hit;
  return i + 1;
}

bool fnmatch_at(std::string_view s, size_t si, std::string_view p, size_t pi) {
  while (pi < p.size()) {
    const char pc = p[pi];
    if (pc == '*') {
      while (pi < p.size() && p[pi] == '*') ++pi;
      if (pi == p.size()) return true;
      for (size_t k = si; k <= s.size(); ++k)
        if (fnmatch_at(s, k, p, pi)) return true;
      return false;
    }
    if (si >= s.size()) return false;
    if (pc == '?') {
      ++si;
      ++pi;
      continue;
    }
    if (pc == '[') {
      bool m = false;
      const size_t next = match_class(p, pi, s[si], &m);
      if (next != std::string_view::npos) {
        if (!m) return false;
        ++si;
        pi = next;
        continue;
      }
      // literal '['
    }
    if (s[si] != pc) return false;
    ++si;
    ++pi;
  }
  return si == s.size();
}

}  // namespace

bool fnmatch(std::string_view name, std::string_view pattern) { return fnmatch_at(name, 0, pattern, 0); }

// ---- the quantization_config ------------------------------------------------------------

ordered_json build_quantization_config(const QuarkConfigInput& in) {
  if (in.pack_method != "reorder" && in.pack_method != "order")
    throw Error(ErrorKind::kUsage, "", "pack_method",
                "pack_method must be \"reorder\" or \"order\", got \"" + in.pack_method + "\"",
                "use --pack_method reorder (Quark's default)");
  if (!in.algo_config.is_null() && !in.algo_config.is_array())
    throw Error(ErrorKind::kUsage, "", "algo_config",
                std::string("algo_config must be null or a list, got ") + in.algo_config.type_name(),
                "");
  if (in.kv_cache && in.kv_cache_layers.empty())
    throw Error(ErrorKind::kUsage, "", "kv_cache_layers",
                "KV-cache quantization needs the KV layer patterns (e.g. *k_proj, *v_proj)",
                "pass the model's KV projection patterns");
  if (!std::isfinite(in.min_kv_scale) || in.min_kv_scale < 0)
    throw Error(ErrorKind::kUsage, "", "min_kv_scale", "min_kv_scale must be a finite value >= 0",
                "");

  const std::vector<std::string> exclude = expand_exclude(in.exclude);

  // layer_quant_config as an insertion-ordered list (a Python dict).
  std::vector<NamedLayer> layers;
  for (const auto& [p, l] : in.layer_quant_config) layers.push_back({p, l});
  std::vector<NamedLayer> kv_layers;
  auto set_entry = [](std::vector<NamedLayer>& v, const std::string& p, const LayerQuantSpec& l) {
    for (auto& e : v)
      if (e.pattern == p) {
        e.spec = l;  // dict assignment keeps the key's position
        return;
      }
    v.push_back({p, l});
  };

  if (in.kv_cache) {
    // LLMTemplate._set_kv_cache_config (quark/torch/quantization/config/template.py).
    for (const std::string& name : in.kv_cache_layers) {
      // get_layer_quant_config(config, nn.Linear, name)
      // (quark/torch/export/main_export/quant_config_parser.py).
      std::optional<LayerQuantSpec> lqc;
      bool from_global = false;
      for (const auto& e : layers)
        if (fnmatch(name, e.pattern)) {
          lqc = e.spec;
          break;
        }
      if (!lqc) {
        lqc = in.global;
        from_global = true;
      }
      const NamedLayer* kv_match = nullptr;
      for (const auto& e : kv_layers)
        if (fnmatch(name, e.pattern)) {
          kv_match = &e;
          break;
        }
      for (const auto& ex : exclude)
        if (fnmatch(name, ex)) {
          if (kv_match) {
            LayerQuantSpec only_out;
            only_out.output = kv_match->spec.output;
            lqc = only_out;
            from_global = false;
          } else {
            lqc.reset();
          }
        }
      if (lqc && from_global) {
        // _resolve_projection_base_spec: a user pattern ending with the
        // projection's leaf name, or one naming an attention container.
        std::string leaf = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
        while (!leaf.empty() && leaf.front() == '*') leaf.erase(leaf.begin());
        while (!leaf.empty() && leaf.back() == '*') leaf.pop_back();
        static const char* kAttnTokens[] = {"self_attn", "self_attention", "attn", "attention"};
        for (const auto& e : layers) {
          const std::string& p = e.pattern;
          bool hit = !leaf.empty() && p.size() >= leaf.size() &&
                     p.compare(p.size() - leaf.size(), leaf.size(), leaf) == 0;
          for (const char* t : kAttnTokens)
            if (p.find(t) != std::string::npos) hit = true;
          if (hit) {
            lqc = e.spec;
            break;
          }
        }
      }
      LayerQuantSpec entry;
      if (lqc) {
        entry.weight = lqc->weight;
        entry.input = lqc->input;
        entry.output = in.kv_cache;
        set_entry(layers, name, entry);
      } else {
        entry.output = in.kv_cache;
      }
      set_entry(kv_layers, name, entry);
    }
  }

  // What quantize_model does to the config before export
  // (quantization/model_transformation.py): setup_config_per_layer replaces
  // config.exclude by the names of the excluded quantizable modules; then
  // setup_kv_cache_config clears weight / input_tensors of a KV config whose
  // pattern matches an excluded module (it mutates the shared QLayerConfig).
  std::vector<std::string> exported_exclude = exclude;
  if (in.quantizable_modules) {
    exported_exclude.clear();
    std::set<std::string> seen;
    for (const std::string& m : *in.quantizable_modules) {
      if (seen.count(m)) continue;
      for (const auto& p : exclude)
        if (fnmatch(m, p)) {
          exported_exclude.push_back(m);
          seen.insert(m);
          break;
        }
    }
    for (auto& e : kv_layers) {
      for (const std::string& m : exported_exclude)
        if (fnmatch(m, e.pattern)) {
          e.spec.weight.reset();
          e.spec.input.reset();
          break;
        }
    }
  }

  // QConfig.to_dict() (quark/torch/quantization/config/config.py, 0.12).
  ordered_json qc = ordered_json::object();
  qc["global_quant_config"] = layer_spec_to_json(in.global);
  qc["exclude"] = exported_exclude;
  qc["algo_config"] = in.algo_config.is_null() ? ordered_json(nullptr) : in.algo_config;
  qc["softmax_quant_spec"] = nullptr;
  qc["quant_method"] = "quark";
  qc["layer_type_quant_config"] = ordered_json::object();
  ordered_json lq = ordered_json::object();
  for (const auto& e : layers) lq[e.pattern] = layer_spec_to_json(e.spec);
  qc["layer_quant_config"] = std::move(lq);
  ordered_json kq = ordered_json::object();
  for (const auto& e : kv_layers) kq[e.pattern] = layer_spec_to_json(e.spec);
  qc["kv_cache_quant_config"] = std::move(kq);
  qc["kv_cache_post_rope"] = false;
  qc["quant_mode"] = "eager_mode";
  qc["version"] = in.quark_version.empty() ? std::string(kQuarkFormatVersion) : in.quark_version;

  // dataclasses.asdict(JsonExporterConfig) (quark/torch/export/config/config.py),
  // built in SafetensorsExporter._export_impl (quark/torch/export/api.py):
  // kv_cache_group is the template's KV layers only when kv_cache_quant_config
  // is non-empty.
  ordered_json ex = ordered_json::object();
  ex["weight_merge_groups"] = nullptr;
  ex["kv_cache_group"] = in.kv_cache ? ordered_json(in.kv_cache_layers) : ordered_json::array();
  ex["min_kv_scale"] = in.min_kv_scale;
  ex["weight_format"] = "real_quantized";
  ex["pack_method"] = in.pack_method;
  qc["export"] = std::move(ex);
  return qc;
}

std::optional<LayerQuantSpec> resolve_layer_quant_spec(const json& qc, const std::string& module,
                                                       const std::string& file) {
  const std::string root = "quantization_config";
  if (!qc.is_object())
    bad(ErrorKind::kInvalidInput, file, root, "expected an object, got " + type_name(qc), kRemedyQuark);
  auto obj_or_empty = [&](const char* key) -> const json* {
    auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) return nullptr;
    if (!it->is_object())
      bad(ErrorKind::kInvalidInput, file, join_item(root, key),
          "expected an object, got " + type_name(*it), kRemedyQuark);
    return &*it;
  };
  std::optional<LayerQuantSpec> result;
  if (const json* lq = obj_or_empty("layer_quant_config")) {
    for (const auto& [p, v] : lq->items())
      if (fnmatch(module, p)) {
        result = layer_spec_from_json(v, join_item(root, "layer_quant_config." + p), file);
        break;
      }
  }
  if (!result) {
    auto it = qc.find("global_quant_config");
    if (it == qc.end())
      bad(ErrorKind::kInvalidInput, file, join_item(root, "global_quant_config"), "missing key",
          kRemedyQuark);
    result = layer_spec_from_json(*it, join_item(root, "global_quant_config"), file);
  }
  std::optional<LayerQuantSpec> kv;
  if (const json* kq = obj_or_empty("kv_cache_quant_config")) {
    for (const auto& [p, v] : kq->items())
      if (fnmatch(module, p)) {
        kv = layer_spec_from_json(v, join_item(root, "kv_cache_quant_config." + p), file);
        break;
      }
  }
  auto ex = qc.find("exclude");
  if (ex != qc.end() && !ex->is_null()) {
    if (!ex->is_array())
      bad(ErrorKind::kInvalidInput, file, join_item(root, "exclude"),
          "expected a list, got " + type_name(*ex), kRemedyQuark);
    for (const auto& p : *ex) {
      if (!p.is_string())
        bad(ErrorKind::kInvalidInput, file, join_item(root, "exclude"),
            "expected a list of strings", kRemedyQuark);
      if (fnmatch(module, p.get<std::string>())) {
        if (kv) {
          LayerQuantSpec only_out;
          only_out.output = kv->output;
          return only_out;
        }
        return std::nullopt;
      }
    }
  }
  return result;
}

json quantized_config_json(const json& source_config, const ordered_json& qc) {
  if (!source_config.is_object())
    throw Error(ErrorKind::kInvalidInput, "config.json", "",
                std::string("the source config is not a JSON object (got ") +
                    source_config.type_name() + ")",
                "fix the source model's config.json");
  json out = source_config;
  out["quantization_config"] = json::parse(qc.dump());
  return out;
}

namespace {

// nlohmann writes doubles in [1e15, 1e16) in exponent form ("1e+15"), Python's
// repr in fixed form ("1000000000000000.0"); both use the shortest round-trip
// digits, so only that notation differs.
std::string python_float(double d) {
  std::string s = json(d).dump();
  const size_t e = s.find("e+15");
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e);
  std::string sign;
  if (!mant.empty() && mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  // mant = d.ddd, exponent 15: 16 digits before the point.
  if (digits.size() <= 16) return sign + digits + std::string(16 - digits.size(), '0') + ".0";
  return sign + digits.substr(0, 16) + "." + digits.substr(16);
}

std::string python_string(const std::string& v) {
  // ensure_ascii: non-ASCII as lowercase \uXXXX (surrogate pairs above
  // U+FFFF), like nlohmann's ensure_ascii; Python also escapes DEL.
  std::string s = json(v).dump(-1, ' ', /*ensure_ascii=*/true);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\x7f')
      out += "\\u007f";
    else
      out += c;
  }
  return out;
}

void dump_py(const json& j, int indent, std::string& out) {
  switch (j.type()) {
    case json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {  // std::map order = sort_keys
        if (!first) out += ",\n";
        first = false;
        out.append(static_cast<size_t>(indent + 2), ' ');
        out += python_string(it.key());
        out += ": ";
        dump_py(it.value(), indent + 2, out);
      }
      out += "\n";
      out.append(static_cast<size_t>(indent), ' ');
      out += "}";
      return;
    }
    case json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += "[\n";
      bool first = true;
      for (const auto& v : j) {
        if (!first) out += ",\n";
        first = false;
        out.append(static_cast<size_t>(indent + 2), ' ');
        dump_py(v, indent + 2, out);
      }
      out += "\n";
      out.append(static_cast<size_t>(indent), ' ');
      out += "]";
      return;
    }
    case json::value_t::string: out += python_string(j.get_ref<const std::string&>()); return;
    case json::value_t::number_float: out += python_float(j.get<double>()); return;
    default: out += j.dump(); return;  // null, bool, integers
  }
}

}  // namespace

std::string dump_hf_json(const json& j) {
  // json.dumps(obj, indent=2, sort_keys=True) + "\n": item separator ",",
  // key separator ": ", nested containers indented by two more spaces, empty
  // containers as {} / [], keys sorted by code point (std::map of UTF-8
  // strings sorts the same way).
  std::string out;
  dump_py(j, 0, out);
  out += '\n';
  return out;
}

}  // namespace qloom::exporter
