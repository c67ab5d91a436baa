// QuantSpec / LayerQuantSpec <-> the JSON of Quark's QTensorConfig.to_dict()
// and QLayerConfig.to_dict() (declared in quark_config.h).
#include <set>
#include <utility>

#include "qloom/export/quark_config.h"
#include "qloom/export/quark_json_util.h"
#include "qloom/quant/progressive.h"

namespace qloom::exporter {

using nlohmann::json;
using nlohmann::ordered_json;
using quant::LayerQuantSpec;
using quant::QDtype;
using quant::QScheme;
using quant::QuantSpec;
using quant::ScaleFormat;
using detail::bad;
using detail::join_item;
using detail::kRemedyQuark;
using detail::type_name;

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

// Quark's scale_format: null, "e8m0", "float32" (FP4PerGroupSpec) or "e5m3" (AmdFP4Spec).
ordered_json scale_format_json(ScaleFormat f) { return string_or_null(quant::scale_format_name(f)); }

bool get_bool(const json& obj, const char* key, const std::string& where, const std::string& file,
              bool dflt_when_null, bool allow_null) {
  const json& v = obj.at(key);
  if (v.is_null() && allow_null) return dflt_when_null;
  if (!v.is_boolean())
    bad(ErrorKind::kInvalidInput, file, join_item(where, key),
        std::string("expected a boolean") + (allow_null ? " or null" : "") + ", got " + type_name(v),
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
      {"fp8_e5m3", QDtype::kFp8E5M3},  {"fp4", QDtype::kFp4},
      {"fp6_e2m3", QDtype::kFp6E2M3},  {"fp6_e3m2", QDtype::kFp6E3M2},
  };
  for (const auto& [n, d] : kNames)
    if (s == n) return d;
  return std::nullopt;
}

QScheme qscheme_from_json(const json& j, const std::string& where, const std::string& file) {
  if (!j.contains("qscheme") || j["qscheme"].is_null())
    bad(ErrorKind::kInvalidInput, file, join_item(where, "qscheme"), "missing or null qscheme", kRemedyQuark);
  if (!j["qscheme"].is_string())
    bad(ErrorKind::kInvalidInput, file, join_item(where, "qscheme"),
        "expected a string, got " + type_name(j["qscheme"]), kRemedyQuark);
  const std::string qs = j["qscheme"].get<std::string>();
  if (qs == "per_tensor") return QScheme::kPerTensor;
  if (qs == "per_channel") return QScheme::kPerChannel;
  if (qs == "per_group") return QScheme::kPerGroup;
  bad(ErrorKind::kUnsupported, file, join_item(where, "qscheme"), "qscheme \"" + qs + "\" is not supported",
      "qloom handles per_tensor, per_channel, per_group");
}

void check_known_keys(const json& j, const std::string& where, const std::string& file) {
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
      bad(ErrorKind::kInvalidInput, file, join_item(where, k), "unknown key in a Quark tensor spec",
          "expected only QTensorConfig keys (dtype, is_dynamic, qscheme, ch_axis, group_size, "
          "block_size, symmetric, round_method, scale_type, zero_point_type, scale_format, "
          "scale_calculation_mode, mx_element_dtype, observer_cls, is_scale_quant, "
          "enable_buffer_reuse, max_input_numel); a newer Quark may need a newer qloom");
  }
}

// The fields after qscheme: axes, sizes, rounding and scale conventions.
void read_spec_tail(const json& j, const std::string& where, const std::string& file, QuantSpec& s) {
  const char* axis_key = j.contains("ch_axis") ? "ch_axis" : (j.contains("axis") ? "axis" : "ch_axis");
  auto axis = get_int_or_null(j, axis_key, where, file);
  if (!axis && s.qscheme != QScheme::kPerTensor)
    bad(ErrorKind::kInvalidInput, file, join_item(where, "ch_axis"),
        std::string("ch_axis is required for ") + (s.qscheme == QScheme::kPerGroup ? "per_group" : "per_channel"),
        kRemedyQuark);
  s.ch_axis = axis ? static_cast<int>(*axis) : -1;

  auto gs = get_int_or_null(j, "group_size", where, file);
  if (s.qscheme == QScheme::kPerGroup && (!gs || *gs <= 0))
    bad(ErrorKind::kInvalidInput, file, join_item(where, "group_size"), "per_group needs a positive group_size",
        kRemedyQuark);
  s.group_size = s.qscheme == QScheme::kPerGroup ? static_cast<int>(*gs) : 0;

  if (j.contains("block_size") && !j["block_size"].is_null())
    bad(ErrorKind::kUnsupported, file, join_item(where, "block_size"),
        "block_size (MX6 / MX9 block formats) is not supported",
        "Quark cannot export mx6 / mx9 either; choose an exportable scheme");

  if (j.contains("symmetric")) s.symmetric = get_bool(j, "symmetric", where, file, true, true);
  s.round_method = get_string_or_null(j, "round_method", where, file);
  s.scale_type = get_string_or_null(j, "scale_type", where, file);
  // Absent (amd-quark <= 0.12) reads as Quark's from_dict default, int32.
  s.zero_point_type = j.contains("zero_point_type") ? get_string_or_null(j, "zero_point_type", where, file)
                                                    : std::string("int32");
  if (!s.zero_point_type.empty() && s.zero_point_type != "int32")
    bad(ErrorKind::kUnsupported, file, join_item(where, "zero_point_type"),
        "zero_point_type \"" + s.zero_point_type + "\" is not supported", "qloom handles int32 zero points");

  const std::string sf = get_string_or_null(j, "scale_format", where, file);
  if (sf.empty()) s.scale_format = ScaleFormat::kFloat;
  else if (sf == "e8m0") s.scale_format = ScaleFormat::kE8M0;
  else if (sf == "float32") s.scale_format = ScaleFormat::kFloat32;
  else if (sf == "e5m3") s.scale_format = ScaleFormat::kE5M3;
  else
    bad(ErrorKind::kUnsupported, file, join_item(where, "scale_format"),
        "scale_format \"" + sf + "\" is not supported", "qloom handles e8m0, float32, e5m3 and null");
  s.scale_calculation_mode = get_string_or_null(j, "scale_calculation_mode", where, file);
  s.mx_element_dtype = get_string_or_null(j, "mx_element_dtype", where, file);
  if (!s.mx_element_dtype.empty())
    bad(ErrorKind::kUnsupported, file, join_item(where, "mx_element_dtype"),
        "mx_element_dtype (dtype \"mx\") is not supported", "Quark's OCP MX schemes name the element dtype directly");
  s.observer_cls = get_string_or_null(j, "observer_cls", where, file);
  if (j.contains("is_scale_quant")) s.is_scale_quant = get_bool(j, "is_scale_quant", where, file, false, true);
  if (j.contains("enable_buffer_reuse"))
    s.enable_buffer_reuse = get_bool(j, "enable_buffer_reuse", where, file, false, true);
  if (auto n = get_int_or_null(j, "max_input_numel", where, file)) s.max_input_numel = *n;
}

}  // namespace

const char* quark_format_version(QuarkFormat f) { return f == QuarkFormat::k0_12 ? "0.12.post1" : "0.13"; }

QuarkFormat parse_quark_format(const std::string& v) {
  if (v == "0.13") return QuarkFormat::k0_13;
  if (v == "0.12.post1" || v == "0.12") return QuarkFormat::k0_12;
  throw Error(ErrorKind::kUsage, "", "--quark_format_version", "unknown Quark config form '" + v + "'",
              "use 0.13 (amd-quark 0.13's form, the default) or 0.12.post1 (16-key tensor specs)");
}

ordered_json quant_spec_to_json(const QuantSpec& s, QuarkFormat f) {
  // Key order and value conventions: QTensorConfig.to_dict() in
  // quark/torch/quantization/config/config.py (amd-quark 0.13; 0.12.post1
  // lacks zero_point_type).
  ordered_json j = ordered_json::object();
  j["dtype"] = quant::quant_dtype_name(s.dtype);
  j["is_dynamic"] = s.is_dynamic;
  j["qscheme"] = qscheme_name(s.qscheme);
  // BaseQTensorConfig defaults ch_axis and group_size to None; the
  // per-tensor Spec helpers never set them, per-channel specs set only ch_axis.
  j["ch_axis"] = s.qscheme == QScheme::kPerTensor ? ordered_json(nullptr) : ordered_json(s.ch_axis);
  j["group_size"] = s.qscheme == QScheme::kPerGroup ? ordered_json(s.group_size) : ordered_json(nullptr);
  j["block_size"] = s.block_size > 0 ? ordered_json(s.block_size) : ordered_json(nullptr);
  // OCP_MXSpec passes symmetric=None, and so do FP4PerGroupSpec and
  // AmdFP4Spec (fp4 with float32 / e5m3 scales).
  j["symmetric"] = is_mx_element(s.dtype) ? ordered_json(nullptr) : ordered_json(s.symmetric);
  j["round_method"] = string_or_null(s.round_method);
  j["scale_type"] = string_or_null(s.scale_type);
  if (f == QuarkFormat::k0_13) j["zero_point_type"] = string_or_null(s.zero_point_type);
  j["scale_format"] = scale_format_json(s.scale_format);
  j["scale_calculation_mode"] = string_or_null(s.scale_calculation_mode);
  j["mx_element_dtype"] = string_or_null(s.mx_element_dtype);
  j["observer_cls"] = string_or_null(s.observer_cls);
  j["is_scale_quant"] = s.is_scale_quant;
  j["enable_buffer_reuse"] = s.enable_buffer_reuse;
  j["max_input_numel"] = s.max_input_numel;
  return j;
}

QuantSpec quant_spec_from_json(const json& j, const std::string& where, const std::string& file) {
  if (!j.is_object())
    bad(ErrorKind::kInvalidInput, file, where, "expected a tensor spec object, got " + type_name(j), kRemedyQuark);
  check_known_keys(j, where, file);
  QuantSpec s;
  if (!j.contains("dtype"))
    bad(ErrorKind::kInvalidInput, file, join_item(where, "dtype"), "missing key", kRemedyQuark);
  if (!j["dtype"].is_string())
    bad(ErrorKind::kInvalidInput, file, join_item(where, "dtype"), "expected a string, got " + type_name(j["dtype"]),
        kRemedyQuark);
  const std::string dname = j["dtype"].get<std::string>();
  auto d = qdtype_from_name(dname);
  if (!d)
    bad(ErrorKind::kUnsupported, file, join_item(where, "dtype"), "dtype \"" + dname + "\" is not supported",
        "qloom handles int8, uint8, int4, uint4, fp8_e4m3, fp8_e5m2, fp8_e5m3, fp4, fp6_e2m3, fp6_e3m2");
  s.dtype = *d;
  const char* dyn_key =
      j.contains("is_dynamic") ? "is_dynamic" : (j.contains("dynamic") ? "dynamic" : nullptr);
  if (!dyn_key)
    bad(ErrorKind::kInvalidInput, file, join_item(where, "is_dynamic"), "missing key", kRemedyQuark);
  s.is_dynamic = get_bool(j, dyn_key, where, file, false, /*allow_null=*/false);
  s.qscheme = qscheme_from_json(j, where, file);
  read_spec_tail(j, where, file, s);
  return s;
}

namespace {

// A single spec, or Quark's two-stage list [first, second] (TwoStageSpec:
// a ProgressiveSpec re-quantizes the first stage's result, a ScaleQuantSpec's
// second stage has is_scale_quant true).
ordered_json stages_to_json(const std::optional<QuantSpec>& first, const std::optional<QuantSpec>& second,
                            QuarkFormat f) {
  if (!first) return nullptr;
  if (!second) return quant_spec_to_json(*first, f);
  return ordered_json::array({quant_spec_to_json(*first, f), quant_spec_to_json(*second, f)});
}

}  // namespace

ordered_json layer_spec_to_json(const LayerQuantSpec& l, QuarkFormat f) {
  // QLayerConfig.to_dict() (quark/torch/quantization/config/config.py).
  ordered_json j = ordered_json::object();
  j["input_tensors"] = stages_to_json(l.input, l.input_stage2, f);
  j["output_tensors"] = stages_to_json(l.output, std::nullopt, f);
  j["weight"] = stages_to_json(l.weight, l.weight_stage2, f);
  j["bias"] = stages_to_json(l.bias, std::nullopt, f);
  j["target_device"] = nullptr;
  return j;
}

LayerQuantSpec layer_spec_from_json(const json& j, const std::string& where, const std::string& file) {
  if (!j.is_object())
    bad(ErrorKind::kInvalidInput, file, where, "expected a layer config object, got " + type_name(j), kRemedyQuark);
  static const std::set<std::string> kKnown = {"input_tensors", "output_tensors", "weight", "bias", "target_device"};
  for (const auto& [k, v] : j.items()) {
    (void)v;
    if (!kKnown.count(k))
      bad(ErrorKind::kInvalidInput, file, join_item(where, k), "unknown key in a Quark layer config",
          "expected input_tensors, output_tensors, weight, bias, target_device");
  }
  // Fills first (and second, for a two-stage list when `second` is given).
  auto read = [&](const char* key, std::optional<QuantSpec>& first, std::optional<QuantSpec>* second) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    const std::string item = join_item(where, key);
    if (!it->is_array()) {
      first = quant_spec_from_json(*it, item, file);
      return;
    }
    if (!second || it->size() != 2)
      bad(ErrorKind::kUnsupported, file, item,
          "a list of " + std::to_string(it->size()) + " specs is not supported here",
          "Quark writes two-stage specs ([first, second]) for weight and input_tensors only");
    first = quant_spec_from_json((*it)[0], item + "[0]", file);
    *second = quant_spec_from_json((*it)[1], item + "[1]", file);
  };
  LayerQuantSpec l;
  read("input_tensors", l.input, &l.input_stage2);
  read("output_tensors", l.output, nullptr);
  read("weight", l.weight, &l.weight_stage2);
  if (l.weight_stage2 && !l.weight_stage2->is_scale_quant && !quant::is_supported_progressive(*l.weight, *l.weight_stage2))
    bad(ErrorKind::kUnsupported, file, join_item(where, "weight"),
        std::string("progressive quantization ") + quant::quant_dtype_name(l.weight->dtype) + " -> " +
            quant::quant_dtype_name(l.weight_stage2->dtype) + " is not supported",
        "qloom reads Quark's int4_fp8 progression: static fp8_e4m3 per tensor, then static symmetric int");
  read("bias", l.bias, nullptr);
  if (j.contains("target_device") && !j["target_device"].is_null())
    bad(ErrorKind::kUnsupported, file, join_item(where, "target_device"), "target_device is not supported", "");
  return l;
}

}  // namespace qloom::exporter
