// Step 3 — config.json.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "qloom/validate/checks.h"
#include "qloom/validate/drift.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate {

namespace {

using detail::join;
using detail::json_brief;
using detail::list_items;
using detail::plural;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

constexpr const char* kQuantKey = "quantization_config";

// `v` without any "quantization_config" key, at any depth.
json strip_quantization(const json& v) {
  if (v.is_object()) {
    json out = json::object();
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it.key() != kQuantKey) out[it.key()] = strip_quantization(it.value());
    return out;
  }
  if (v.is_array()) {
    json out = json::array();
    for (const auto& e : v) out.push_back(strip_quantization(e));
    return out;
  }
  return v;
}

std::string spec_text(const json& spec) {
  if (spec.is_array()) {
    std::vector<std::string> parts;
    for (const auto& e : spec) parts.push_back(spec_text(e));
    return parts.empty() ? "none" : join(parts, " + ");
  }
  if (!spec.is_object()) return "none";
  auto str = [&](const char* k) {
    const auto it = spec.find(k);
    return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string s = str("dtype").empty() ? "?" : str("dtype");
  if (!str("qscheme").empty()) s += " " + str("qscheme");
  const auto g = spec.find("group_size");
  if (g != spec.end() && g->is_number_integer() && g->get<int64_t>() > 0)
    s += " g" + std::to_string(g->get<int64_t>());
  const auto dyn = spec.find("is_dynamic");
  if (dyn != spec.end() && dyn->is_boolean()) s += dyn->get<bool>() ? " dynamic" : " static";
  const auto sym = spec.find("symmetric");
  if (sym != spec.end() && sym->is_boolean() && !sym->get<bool>()) s += " asymmetric";
  return s;
}

// A one-line description of what a Quark quantization_config declares.
std::string scheme_summary(const json& qc, oj& data) {
  std::vector<std::string> parts;
  const auto g = qc.find("global_quant_config");
  if (g != qc.end() && g->is_object()) {
    for (const char* k : {"weight", "input_tensors", "output_tensors", "bias"}) {
      const auto it = g->find(k);
      if (it == g->end() || it->is_null()) continue;
      parts.push_back(std::string(k) + " " + spec_text(*it));
      data["global"][k] = spec_text(*it);
    }
  } else {
    parts.push_back("no global_quant_config");
  }
  const auto kv = qc.find("kv_cache_quant_config");
  if (kv != qc.end() && kv->is_object() && !kv->empty()) {
    const json& first = kv->begin().value();
    const auto out = first.is_object() ? first.find("output_tensors") : first.end();
    const std::string what =
        first.is_object() && out != first.end() ? spec_text(*out) : std::string("configured");
    parts.push_back("kv cache " + what);
    data["kv_cache"] = what;
  }
  for (const char* k : {"layer_quant_config", "layer_type_quant_config"}) {
    const auto it = qc.find(k);
    if (it != qc.end() && it->is_object() && !it->empty()) {
      parts.push_back(std::string(k) + ": " + plural(it->size(), "entry", "entries"));
      data[k] = it->size();
    }
  }
  const auto ex = qc.find("exclude");
  if (ex != qc.end() && ex->is_array()) {
    parts.push_back("exclude: " + plural(ex->size(), "pattern", "patterns"));
    data["exclude"] = ex->size();
  }
  const auto algo = qc.find("algo_config");
  if (algo != qc.end() && !algo->is_null()) {
    std::vector<std::string> names;
    auto add = [&](const json& a) {
      const auto n = a.is_object() ? a.find("name") : a.end();
      names.push_back(a.is_object() && n != a.end() && n->is_string() ? n->get<std::string>()
                                                                       : std::string("?"));
    };
    if (algo->is_array()) for (const auto& a : *algo) add(a);
    else add(*algo);
    if (!names.empty()) {
      parts.push_back("algorithms: " + join(names, ", "));
      data["algorithms"] = names;
    }
  }
  return join(parts, "; ");
}

// "mismatches: N" and one "path: source / quantized" line per real
// difference (at most max_listed), and data "mismatch_count" / "mismatches".
void report_differences(StepResult& r, const std::vector<RealDifference>& diffs, size_t max_listed) {
  std::vector<std::string> lines;
  oj mismatches = oj::array();
  for (const auto& d : diffs) {
    const std::string sv = d.source ? json_brief(*d.source) : "(absent)";
    const std::string qv = d.quantized ? json_brief(*d.quantized) : "(absent)";
    lines.push_back(d.path + ": " + sv + " / " + qv);
    oj m = oj::object();
    m["key"] = d.path;
    m["source"] = d.source ? oj(*d.source) : oj();
    m["quantized"] = d.quantized ? oj(*d.quantized) : oj();
    if (!d.source) m["only_in"] = "quantized";
    if (!d.quantized) m["only_in"] = "source";
    if (mismatches.size() < 10 * max_listed) mismatches.push_back(std::move(m));
  }
  r.details.push_back("mismatches: " + std::to_string(diffs.size()));
  const size_t shown = std::min(lines.size(), max_listed);
  for (size_t i = 0; i < shown; ++i) r.details.push_back(lines[i]);
  if (shown < lines.size())
    r.details.push_back("… and " + std::to_string(lines.size() - shown) + " more");
  r.data["mismatch_count"] = diffs.size();
  r.data["mismatches"] = std::move(mismatches);
}

}  // namespace

StepResult check_config(const CheckpointPair& pair, const ValidateOptions& opts) {
  StepResult r;
  r.number = 3;
  r.title = kConfigTitle;
  if (!pair.source()) return detail::skipped(std::move(r), "no source model given", "no_source");
  if (!pair.quantized()) {
    r.status = StepResult::kFail;
    r.summary = "the quantized config.json is missing or unreadable: " + pair.quantized_error();
    r.data["error"] = pair.quantized_error();
    return r;
  }
  const json& src = pair.source()->config();
  const json& q = pair.quantized()->config();

  const json src_stripped = strip_quantization(src);
  const json q_stripped = strip_quantization(q);
  const Comparison cmp = compare_configs(src_stripped, q_stripped);
  const auto& diffs = cmp.real;

  report_differences(r, diffs, opts.max_listed);
  r.data["benign_drift"] = detail::add_drift(r, cmp.drift, opts.max_listed);
  r.data["benign_drift_count"] = cmp.drift.size();
  r.data["ignored_key_names"] = oj::array({kQuantKey});
  r.data["keys_compared"] = src_stripped.is_object() ? src_stripped.size() : 0;

  // The Quark block itself.
  std::string quant_problem;
  const auto qc = q.find(kQuantKey);
  if (qc == q.end()) {
    quant_problem = "no quantization_config";
  } else if (!qc->is_object()) {
    quant_problem = "quantization_config is not a JSON object";
  } else {
    const auto m = qc->find("quant_method");
    const std::string method = m != qc->end() && m->is_string() ? m->get<std::string>() : "";
    r.data["quant_method"] = method;
    if (method != "quark") {
      quant_problem = "quantization_config.quant_method is " +
                      (m == qc->end() ? std::string("absent") : json_brief(*m)) +
                      ", expected \"quark\"";
    } else {
      oj scheme = oj::object();
      const std::string summary = scheme_summary(*qc, scheme);
      r.data["scheme"] = std::move(scheme);
      r.data["scheme_summary"] = summary;
      r.details.push_back("quantization_config: quant_method quark; " + summary);
    }
  }
  if (!quant_problem.empty()) {
    r.details.push_back(quant_problem);
    r.data["quantization_config_problem"] = quant_problem;
  }

  if (diffs.empty() && quant_problem.empty()) {
    r.status = StepResult::kOk;
    r.summary = (cmp.drift.empty() ? std::string("equal to the source apart from quantization_config (")
                                   : "benign drift (" + plural(cmp.drift.size(), "key", "keys") +
                                         ": " + detail::drift_keys(cmp.drift) +
                                         "), otherwise equal to the source apart from "
                                         "quantization_config (") +
                plural(src_stripped.size(), "top-level key", "top-level keys") +
                "); quant_method quark";
    return r;
  }
  r.status = StepResult::kFail;
  std::vector<std::string> problems;
  if (!diffs.empty())
    problems.push_back(plural(diffs.size(), "key differs", "keys differ") + " from the source");
  if (!quant_problem.empty()) problems.push_back(quant_problem);
  r.summary = join(problems, "; ");
  return r;
}

}  // namespace qloom::validate
