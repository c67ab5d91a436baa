// build_quant_plan / render_plan_table (see quant_plan.h).
#include "qloom/agent/quant_plan.h"
#include "qloom/agent/eval_phase.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "qloom/agent/group_default.h"
#include "qloom/agent/model_analysis.h"
#include "qloom/agent/resource_estimate.h"
#include "qloom/core/error.h"
#include "qloom/core/format.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using oj = nlohmann::ordered_json;

struct PlanRisk {
  std::string id, severity, message, hint;
};

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string list_text(const std::vector<std::string>& v) {
  std::string s(1, '[');
  s += join(v, ", ");
  s += ']';
  return s;
}

std::string reason_of(const Intent& in, const std::string& field, const std::string& fallback) {
  auto it = in.reasons.find(field);
  return it != in.reasons.end() && !it->second.empty() ? it->second : fallback;
}

// "model.layers.3.mlp.experts.7.up_proj" -> "model.layers.*.mlp.experts.*.up_proj"
// (a Quark --exclude_layers pattern covering every layer / expert).
std::string generic_pattern(const std::string& name) {
  std::string out;
  size_t i = 0;
  while (i < name.size()) {
    if (name[i] == '.' && i + 1 < name.size() && std::isdigit(static_cast<unsigned char>(name[i + 1]))) {
      size_t j = i + 1;
      while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
      if (j == name.size() || name[j] == '.') {
        out += ".*";
        i = j;
        continue;
      }
    }
    out += name[i++];
  }
  return out;
}

bool is_int4_scheme(const std::string& s) { return s.rfind("int4_", 0) == 0 || s.rfind("uint4_", 0) == 0; }

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (!s.empty() && pos <= s.size()) {
    size_t c = s.find(',', pos);
    if (c == std::string::npos) c = s.size();
    out.push_back(s.substr(pos, c - pos));
    pos = c + 1;
  }
  return out;
}

oj none_if_empty(const std::string& s) { return s.empty() ? oj(nullptr) : oj(s); }

bool is_data_path(const std::string& d) { return d.find('/') != std::string::npos || d.find('.') != std::string::npos; }

}  // namespace

std::string scheme_layer_problem(const std::string& scheme, uint64_t out, uint64_t in) {
  const quant::SchemeDef& s = quant::get_scheme(scheme);
  if (!s.linear.weight) return "";
  // A progressive weight (int4_fp8) is stored as its last stage.
  const quant::QuantSpec& w = s.linear.weight_stage2 ? *s.linear.weight_stage2 : *s.linear.weight;
  const bool int4 = w.dtype == quant::QDtype::kInt4 || w.dtype == quant::QDtype::kUInt4;
  std::vector<std::string> why;
  if (w.qscheme == quant::QScheme::kPerGroup && w.group_size > 0 && in % uint64_t(w.group_size) != 0)
    why.push_back("in_features " + std::to_string(in) + " is not a multiple of the group size " +
                  std::to_string(w.group_size));
  if (int4 && out % 8 != 0)
    why.push_back("out_features " + std::to_string(out) + " is not a multiple of 8 (int4 packing)");
  if (int4 && w.qscheme != quant::QScheme::kPerGroup && in % 8 != 0)
    why.push_back("in_features " + std::to_string(in) + " is not a multiple of 8 (per-channel int4 packing)");
  if (w.dtype == quant::QDtype::kFp4 && in % 2 != 0)
    why.push_back("in_features " + std::to_string(in) + " is odd (fp4 packs 2 per byte)");
  return join(why, "; ");
}

nlohmann::ordered_json build_quant_plan(const Intent& in, const nlohmann::json& analysis, const PlanOptions& opt) {
  std::vector<OpenQuestion> questions = in.open_questions;
  std::vector<std::string> notes = in.notes;
  std::vector<PlanRisk> risks;
  auto ask = [&](const std::string& field, const std::string& q) {
    for (const auto& x : questions)
      if (x.field == field && x.question == q) return;
    questions.push_back({field, q});
  };

  const json& model = analysis.at("model");
  const json& targets = analysis.at("quantization_targets");
  const std::string model_type = model.at("model_type").get<std::string>();
  const bool partial = analysis.at("analysis_status") == "partial";
  const bool engine_calib = analysis.at("engine").at("calibration").get<bool>();

  // The model itself must be quantizable.
  if (analysis.at("compatibility") == "unsupported") {
    std::vector<std::string> why;
    for (const auto& r : analysis.at("risks"))
      if (r.at("id") == "incomplete_config" || r.at("id") == "already_quantized")
        why.push_back(r.at("message").get<std::string>());
    ask("model", "The model cannot be quantized as it is: " + join(why, "; ") +
                     ". Which checkpoint should I use instead?");
  }

  // ---- exclusions ----
  const std::vector<std::string> defaults = targets.at("exclude_defaults").get<std::vector<std::string>>();
  std::vector<std::string> excl, dropped;
  for (const auto& p : defaults) {
    bool drop = false;
    for (const auto& q : in.quantize_layers.value) drop = drop || p == q || quant::module_matches(p, q);
    (drop ? dropped : excl).push_back(p);
  }
  for (const auto& q : in.quantize_layers.value) {
    bool matched = false;
    for (const auto& p : dropped) matched = matched || p == q || quant::module_matches(p, q);
    if (!matched) notes.push_back("'" + q + "' is not excluded by default; it is quantized with the others");
    if (q == "lm_head" && model.at("tie_word_embeddings").get<bool>())
      notes.push_back("lm_head is tied to the input embeddings: it is not stored separately, so it stays unquantized");
  }
  for (const auto& p : in.exclude_layers.value)
    if (std::find(excl.begin(), excl.end(), p) == excl.end()) excl.push_back(p);

  std::string excl_reason = targets.at("exclude_defaults_source") == "quark_template"
                                ? "Standard (Quark template for " + model_type + "): " + list_text(defaults) +
                                      " stay" + (defaults.size() == 1 ? "s" : "") + " full precision"
                                : "No Quark template for " + (model_type.empty() ? std::string("this model") : model_type) +
                                      ": fallback [lm_head]";
  if (in.exclude_layers.source == Source::kStated || in.exclude_layers.source == Source::kInferred)
    excl_reason += "; user: " + reason_of(in, "exclude_layers", "exclude " + list_text(in.exclude_layers.value));
  if (!dropped.empty()) excl_reason += "; quantized on request: " + list_text(dropped);
  std::string excl_source =
      (in.exclude_layers.source == Source::kStated || in.quantize_layers.source == Source::kStated) ? "stated"
      : in.exclude_layers.source == Source::kInferred || in.quantize_layers.source == Source::kInferred
          ? "inferred"
          : "model";

  // ---- schemes and layer checks ----
  std::string scheme = in.quant_scheme.value;
  const quant::SchemeDef* global = scheme.empty() ? nullptr : quant::find_scheme(scheme);
  std::string scheme_reason =
      reason_of(in, "quant_scheme", scheme.empty() ? "No scheme resolved: see the open questions" : "Requested");
  std::string scheme_source = source_name(in.quant_scheme.source);
  std::string output_dir = in.output_dir.value;
  std::vector<std::pair<std::string, std::string>> overrides(in.layer_quant_scheme.value.begin(),
                                                             in.layer_quant_scheme.value.end());
  bool overrides_ok = true;
  for (const auto& [pattern, s] : overrides)
    if (!quant::find_scheme(s)) {
      overrides_ok = false;
      ask("layer_quant_scheme", "'" + s + "' (for layers matching '" + pattern +
                                    "') is not a scheme qloom implements; which of " +
                                    join(quant::scheme_names(), ", ") + " should those layers use?");
    }
  const std::string kv = in.kv_cache_dtype.value;
  const std::string algo = in.quant_algo.value;

  const std::vector<LinearModule> modules = partial ? std::vector<LinearModule>{} : expand_linear_modules(analysis);
  std::vector<bool> excluded(modules.size(), false);
  for (size_t i = 0; i < modules.size(); ++i)
    for (const auto& p : excl)
      if (quant::module_matches(p, modules[i].name)) {
        excluded[i] = true;
        break;
      }
  // Patterns the user gave that select nothing (seed 001: "the pattern
  // matches nothing silently").
  if (!partial) {
    auto matches_any = [&](const std::string& p) {
      for (const auto& m : modules)
        if (quant::module_matches(p, m.name)) return true;
      return false;
    };
    for (const auto& p : in.exclude_layers.value)
      if (!matches_any(p))
        risks.push_back({"pattern_matches_nothing", "medium",
                         "exclude pattern '" + p + "' matches no linear layer of this model",
                         "check the module names (e.g. " + (modules.empty() ? std::string("lm_head") : modules.front().name) +
                             ") and adjust the pattern"});
    for (const auto& [p, s] : overrides)
      if (!matches_any(p))
        risks.push_back({"pattern_matches_nothing", "medium",
                         "layer_quant_scheme pattern '" + p + "' matches no linear layer of this model: no override is applied",
                         "check the module names (e.g. " + (modules.empty() ? std::string("lm_head") : modules.front().name) +
                             ") and adjust the pattern"});
  }

  if (global && overrides_ok && !partial)
    if (const auto d = derive_group(in, scheme, modules, excluded, overrides)) {
      notes.push_back("quant_scheme: " + d->scheme + " instead of " + scheme + ": " + d->reason);
      if (in.output_dir.source == Source::kDefault && output_dir.ends_with("-" + scheme))
        output_dir = output_dir.substr(0, output_dir.size() - scheme.size()) + d->scheme;
      scheme_reason += "; " + d->reason;
      scheme_source = "inferred";
      scheme = d->scheme;
      global = quant::find_scheme(scheme);
    }

  oj scheme_check = nullptr;
  if (global && overrides_ok && !partial) {
    struct Problem {
      std::string pattern, scheme, reason;
      uint64_t out, in, count;
    };
    std::vector<Problem> problems;
    std::set<std::pair<uint64_t, uint64_t>> shapes;
    uint64_t checked = 0, bad = 0;
    for (size_t i = 0; i < modules.size(); ++i) {
      if (excluded[i]) continue;
      const LinearModule& m = modules[i];
      shapes.insert({m.out_features, m.in_features});
      std::string s = scheme;
      for (const auto& [p, os] : overrides)
        if (quant::module_matches(p, m.name)) {
          s = os;
          break;
        }
      ++checked;
      const std::string why = scheme_layer_problem(s, m.out_features, m.in_features);
      if (why.empty()) continue;
      ++bad;
      const std::string pat = generic_pattern(m.name);
      auto it = std::find_if(problems.begin(), problems.end(), [&](const Problem& p) {
        return p.pattern == pat && p.scheme == s && p.out == m.out_features && p.in == m.in_features;
      });
      if (it == problems.end()) problems.push_back({pat, s, why, m.out_features, m.in_features, 1});
      else ++it->count;
    }
    std::vector<std::string> fitting;
    for (const auto& name : quant::scheme_names()) {
      bool ok = true;
      for (const auto& [o, i] : shapes) ok = ok && scheme_layer_problem(name, o, i).empty();
      if (ok) fitting.push_back(name);
    }
    oj probs = oj::array();
    for (const auto& p : problems)
      probs.push_back({{"pattern", p.pattern},
                       {"scheme", p.scheme},
                       {"out_features", p.out},
                       {"in_features", p.in},
                       {"count", p.count},
                       {"reason", p.reason}});
    scheme_check = {{"fits", bad == 0},
                    {"modules_checked", checked},
                    {"modules_not_fitting", bad},
                    {"problems", probs},
                    {"fitting_schemes", fitting}};
    if (bad > 0 && bad < checked && in.exclude_unsupported.value) {
      // "keep the layers that don't fit in bf16": exclude them by pattern.
      std::vector<std::string> added;
      for (const auto& pr : problems)
        if (std::find(excl.begin(), excl.end(), pr.pattern) == excl.end()) {
          excl.push_back(pr.pattern);
          added.push_back(pr.pattern);
        }
      excl_reason += "; kept in the source dtype because " + scheme + " cannot store them (the prompt asked): " +
                     list_text(added);
      if (excl_source == "default" || excl_source == "model") excl_source = "stated";
      notes.push_back(std::to_string(bad) + " of " + std::to_string(checked) + " linear layers do not fit " + scheme +
                      " and stay in the source dtype: " + list_text(added));
      scheme_check["excluded_not_fitting"] = added;
    } else if (bad > 0) {
      // Up to two examples, with different reasons when there are several.
      std::vector<std::string> ex;
      std::set<std::string> reasons;
      for (int pass = 0; pass < 2; ++pass)
        for (const auto& pr : problems) {
          if (ex.size() == 2 || (pass == 0 && reasons.count(pr.reason))) continue;
          const std::string e = pr.pattern + " [" + std::to_string(pr.out) + ", " + std::to_string(pr.in) +
                                "]: " + pr.reason;
          if (std::find(ex.begin(), ex.end(), e) != ex.end()) continue;
          reasons.insert(pr.reason);
          ex.push_back(e);
        }
      std::string q = scheme + " does not fit " + std::to_string(bad) + " of the " + std::to_string(checked) +
                      " linear layers to quantize (" + join(ex, "; ") + (problems.size() > 2 ? "; ..." : "") + "). ";
      q += fitting.empty() ? "No qloom scheme fits every layer of this model; exclude those layers, or choose another model?"
                           : "Use a scheme that fits every layer (" + join(fitting, ", ") + "), or exclude those layers?";
      ask("quant_scheme", q);
    }
  }

  // ---- calibration ----
  const bool calib = needs_calibration(scheme, kv, algo);
  if (calib && !engine_calib && !partial) {
    const bool static_input = needs_calibration(scheme, "", "");
    const std::string field = static_input ? "quant_scheme" : !algo.empty() ? "quant_algo" : "kv_cache_dtype";
    std::vector<std::string> what;
    if (static_input) what.push_back(scheme + " (static activation scales)");
    if (!algo.empty()) what.push_back("--quant_algo " + algo);
    if (!kv.empty()) what.push_back("an fp8 KV cache");
    ask(field, join(what, " and ") + " need" + (what.size() == 1 ? "s" : "") +
                   " calibration, which runs the model in qloom's engine, but: " +
                   analysis.at("engine").at("detail").get<std::string>() +
                   ". Use a weight-only scheme without an algorithm (e.g. int4_wo_128, ptpc_fp8, mxfp4_weight_only) instead?");
  }
  for (const auto& a : split_commas(algo)) {
    const auto impl = quant::implemented_algorithms();
    if (std::find(impl.begin(), impl.end(), a) == impl.end())
      ask("quant_algo", "qloom does not implement --quant_algo " + (a.empty() ? std::string("''") : a) +
                            " yet (implemented: " + join(impl, ", ") + "); use one of those, or RTN (no algorithm)?");
    if ((a == "gptq" || a == "gptaq" || a == "qronos" || a == "awq") && global && !is_int4_scheme(scheme))
      risks.push_back({"algorithm_scheme_mismatch", "medium",
                       a + " is designed for int4 / uint4 weight-only schemes; with " + scheme + " it may not help",
                       "use int4_wo_* / uint4_wo_*, or drop the algorithm"});
    if ((a == "smoothquant" || a == "autosmoothquant") && global && !global->linear.input)
      risks.push_back({"algorithm_scheme_mismatch", "medium",
                       a + " moves activation outliers into weights; " + scheme +
                           " does not quantize activations, so it cannot help",
                       "use fp8 / int8, or drop " + a});
  }

  if (calib && in.num_calib_data.value == 0)
    ask("num_calib_data", "Calibration needs at least one sample, but num_calib_data is 0; how many samples should I use (default 128)?");
  if (calib && in.seq_len.value == 0)
    ask("seq_len", "Calibration needs sequences of at least one token, but seq_len is 0; which length should I use (default 512)?");
  if (in.eval_requested.value && in.eval_limit.value && *in.eval_limit.value == 0)
    ask("eval_limit", "Evaluation on 0 samples measures nothing; how many samples should I evaluate, or should I skip evaluation?");

  // Calibration data.
  std::string dataset = in.dataset.value;
  std::string ds_source = source_name(in.dataset.source);
  std::string ds_reason = reason_of(in, "dataset", "Calibration data");
  const std::string data_dir = opt.data_dir ? *opt.data_dir : [] {
    const char* e = std::getenv("QLOOM_DATA_DIR");
    return std::string(e ? e : "");
  }();
  if (dataset.empty() || dataset == "default") {
    dataset = "c4";
    ds_reason = "The bundled c4 sample (qloom's default calibration data)";
  } else if (dataset != "c4" && !is_data_path(dataset)) {
    std::error_code ec;
    const fs::path local = fs::path(data_dir) / "calibration" / (dataset + ".jsonl");
    if (!data_dir.empty() && fs::is_regular_file(local, ec)) {
      ds_reason += "; local copy " + local.string();
    } else if (in.dataset.source == Source::kDefault) {
      notes.push_back("calibration data: " + dataset + " is not bundled with qloom; using the bundled c4 sample");
      ds_reason = dataset + " (seed 001 default) is not bundled with qloom and no local copy exists"
                  " ($QLOOM_DATA_DIR/calibration/" + dataset + ".jsonl); the bundled c4 sample is used";
      dataset = "c4";
      ds_source = "inferred";
    } else if (calib) {
      ask("dataset", "Calibration set '" + dataset + "' is not bundled with qloom and no local copy exists (" +
                         (data_dir.empty() ? "$QLOOM_DATA_DIR" : data_dir) + "/calibration/" + dataset +
                         ".jsonl). Use the bundled c4 sample instead, or give a .jsonl / .txt file?");
    }
  }
  if (!calib && global)
    ds_reason += " (not used: " + scheme + " without an algorithm or KV-cache quantization needs no calibration)";
  if (calib && !partial && model.at("max_position_embeddings").is_number() &&
      in.seq_len.value > model.at("max_position_embeddings").get<uint64_t>())
    risks.push_back({"seq_len_exceeds_context", "medium",
                     "seq_len " + std::to_string(in.seq_len.value) + " exceeds the model's max_position_embeddings " +
                         std::to_string(model.at("max_position_embeddings").get<uint64_t>()),
                     "lower seq_len to the model's context length"});

  // ---- evaluation ----
  // The same resolution the eval phase applies (eval_phase.h).
  const std::string metric = in.metric_name.value;
  const EvalMetric em = resolve_eval_metric(metric, in.eval_dataset.value);
  const std::string task = em.unavailable.empty() ? em.task : "";
  const bool eval = in.eval_requested.value;
  if (eval && task.empty())
    risks.push_back({"eval_metric_unavailable", "medium",
                     em.unavailable + "; the eval phase will be skipped (eval_skipped.txt)",
                     "ask for ppl on wikitext-2, kld, gsm8k or hellaswag, or give the task's data set as a "
                     "local file (arc_easy, arc_challenge, piqa, winogrande, mmlu)"});

  // ---- resources ----
  oj estimate = nullptr;
  if (global && overrides_ok && !partial && (kv.empty() || kv == "fp8")) {
    ResourceRequest rr;
    rr.quant_scheme = scheme;
    rr.kv_cache_dtype = kv;
    rr.quant_algo = algo;
    rr.exclude_layers = excl;
    rr.layer_quant_scheme = overrides;
    rr.num_calib_data = in.num_calib_data.value;
    rr.seq_len = in.seq_len.value;
    estimate = estimate_resources(analysis, rr);
    const oj& pm = estimate["peak_memory"];
    if (pm["fits"].is_boolean() && !pm["fits"].get<bool>())
      risks.push_back({"insufficient_memory", "high",
                       "estimated peak memory " + pm["human"].get<std::string>() + " exceeds the usable " +
                           format_bytes(pm["usable_bytes"].get<uint64_t>()),
                       "lower num_calib_data or seq_len (calibration activations grow with both)"});
  }

  // ---- decisions ----
  oj decisions = oj::array();
  auto decide = [&](const char* name, oj value, const std::string& reason, const std::string& source) {
    decisions.push_back({{"decision", name}, {"value", std::move(value)}, {"reason", reason}, {"source", source}});
  };
  decide("global_scheme", none_if_empty(scheme), scheme_reason, scheme_source);
  decide("kv_cache_scheme", none_if_empty(kv), reason_of(in, "kv_cache_dtype", "KV cache left unquantized"),
         source_name(in.kv_cache_dtype.source));
  decide("exclude_layers", excl, excl_reason, excl_source);
  decide("layer_quant_config", oj(in.layer_quant_scheme.value),
         in.layer_quant_scheme.value.empty() ? "No per-pattern overrides"
                                             : reason_of(in, "layer_quant_scheme", "User requested per-pattern overrides"),
         source_name(in.layer_quant_scheme.source));
  decide("algorithm", none_if_empty(algo), reason_of(in, "quant_algo", algo.empty() ? "RTN baseline (fastest)" : "Requested"),
         source_name(in.quant_algo.source));
  decide("calibration_dataset", dataset, ds_reason, ds_source);
  decide("num_calib_data", in.num_calib_data.value, reason_of(in, "num_calib_data", "Standard default"),
         source_name(in.num_calib_data.source));
  decide("seq_len", in.seq_len.value, reason_of(in, "seq_len", "Standard default"), source_name(in.seq_len.source));
  decide("evaluation_intent", eval ? "compare" : "skip",
         eval ? "Score the source and the quantized model on the same samples and report the gap (seed 000 §5)"
              : reason_of(in, "eval_requested", "User asked to skip evaluation"),
         source_name(in.eval_requested.source));
  decide("evaluation_metric", metric,
         reason_of(in, "metric_name", "Headline metric") + (eval && task.empty() ? " (not available in qloom)" : ""),
         source_name(in.metric_name.source));
  decide("evaluation_dataset", in.eval_dataset.value,
         reason_of(in, "eval_dataset", "The data set of " + metric), source_name(in.eval_dataset.source));
  decide("evaluation_limit", in.eval_limit.value ? oj(*in.eval_limit.value) : oj(nullptr),
         in.eval_limit.value ? reason_of(in, "eval_limit", "User asked for a sample count")
                             : "Not stated: the eval phase fits the sample count to its time budget (mission §7)",
         source_name(in.eval_limit.source));
  decide("eval_gap_threshold",
         in.eval_gap_threshold.value ? oj(*in.eval_gap_threshold.value) : oj(nullptr),
         reason_of(in, "eval_gap_threshold", in.eval_gap_threshold.value ? "User stated the accepted gap"
                                                                         : "caller -> eval_gap_threshold.txt -> 0.03"),
         source_name(in.eval_gap_threshold.source));
  // hf_format first: the agent validates and evaluates the Quark checkpoint.
  oj formats = oj::array({"hf_format"});
  for (const auto& f : in.model_export.value)
    if (f != "hf_format") formats.push_back(f);
  decide("export_format", formats,
         in.model_export.value.empty()
             ? "Quark hf_format (vLLM / SGLang / transformers)"
             : reason_of(in, "model_export", "Requested") + "; hf_format first (validated and evaluated)",
         source_name(in.model_export.source));
  decide("output_dir", output_dir, reason_of(in, "output_dir", "Output directory"),
         source_name(in.output_dir.source));

  // ---- the artifact ----
  oj j;
  j["model"] = {{"model_path", model.at("model_path")},
                {"resolved_path", model.at("resolved_path")},
                {"model_type", model_type},
                {"analysis_ref", opt.analysis_ref}};
  j["decisions"] = decisions;
  j["quant_scheme"] = none_if_empty(scheme);
  j["kv_cache_dtype"] = none_if_empty(kv);
  j["exclude_layers"] = excl;
  j["layer_quant_scheme"] = oj(in.layer_quant_scheme.value);
  j["quant_algo"] = none_if_empty(algo);
  j["dataset"] = dataset;
  j["model_export"] = formats;
  j["num_calib_data"] = in.num_calib_data.value;
  j["seq_len"] = in.seq_len.value;
  j["output_dir"] = output_dir;
  j["eval_requested"] = eval;
  j["metric_name"] = metric;
  j["eval_task"] = none_if_empty(task);
  j["eval_dataset"] = in.eval_dataset.value;
  j["eval_limit"] = in.eval_limit.value ? oj(*in.eval_limit.value) : oj(nullptr);
  j["metric_higher_is_better"] = in.metric_higher_is_better;
  j["eval_gap_threshold"] = in.eval_gap_threshold.value ? oj(*in.eval_gap_threshold.value) : oj(nullptr);
  j["eval_gap_kind"] = in.eval_gap_kind;
  j["needs_calibration"] = calib;
  j["scheme_check"] = scheme_check;
  j["resource_estimate"] = estimate;
  j["risks"] = oj::array();
  for (const auto& r : risks)
    j["risks"].push_back({{"id", r.id}, {"severity", r.severity}, {"message", r.message}, {"recovery_hint", r.hint}});
  j["open_questions"] = oj::array();
  for (const auto& q : questions) j["open_questions"].push_back({{"field", q.field}, {"question", q.question}});
  j["notes"] = notes;
  j["requires_confirmation"] = true;
  return j;
}

std::string render_plan_table(const nlohmann::json& plan) {
  auto cell = [](const json& v) -> std::string {
    if (v.is_null()) return "null";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
  };
  struct Row {
    std::string d, v, r;
  };
  std::vector<Row> rows;
  size_t wd = std::string("decision").size(), wv = std::string("value").size();
  for (const auto& d : plan.at("decisions")) {
    rows.push_back({d.at("decision").get<std::string>(), cell(d.at("value")), d.at("reason").get<std::string>()});
    wd = std::max(wd, rows.back().d.size());
    if (rows.back().v.size() <= 40) wv = std::max(wv, rows.back().v.size());
  }
  auto pad = [](std::string s, size_t w) {
    if (s.size() < w) s.resize(w, ' ');
    return s;
  };
  std::ostringstream o;
  o << "Quantization Plan:\n";
  o << "  " << pad("decision", wd) << " | " << pad("value", wv) << " | reason\n";
  o << "  " << std::string(wd, '-') << "-+-" << std::string(wv, '-') << "-+-" << std::string(6, '-') << "\n";
  for (const auto& r : rows) o << "  " << pad(r.d, wd) << " | " << pad(r.v, wv) << " | " << r.r << "\n";
  const json& est = plan.at("resource_estimate");
  if (est.is_object() && est.at("peak_memory").at("bytes").is_number()) {
    o << "Estimated resources: peak memory " << est.at("peak_memory").at("human").get<std::string>() << ", output "
      << est.at("disk").at("human").get<std::string>();
    if (est.at("disk").at("bits_per_weight").is_number())
      o << " (" << est.at("disk").at("bits_per_weight").dump() << " bits per quantized weight)";
    o << ", time " << est.at("time").at("human").get<std::string>() << "\n";
  }
  if (!plan.at("risks").empty()) {
    o << "Risks:\n";
    for (const auto& r : plan.at("risks"))
      o << "  - " << r.at("id").get<std::string>() << " (" << r.at("severity").get<std::string>()
        << "): " << r.at("message").get<std::string>() << "\n";
  }
  if (!plan.at("open_questions").empty()) {
    o << "Open questions:\n";
    for (const auto& q : plan.at("open_questions"))
      o << "  - [" << q.at("field").get<std::string>() << "] " << q.at("question").get<std::string>() << "\n";
  }
  return o.str();
}

}  // namespace qloom::agent
