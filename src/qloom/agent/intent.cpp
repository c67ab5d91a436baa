// parse_intent: runs the passes (intent_internal.h) and fills the defaults of
// seed 001's decision table and seed 000 §4/§5; to_json for session_context.
#include "qloom/agent/intent.h"

#include <algorithm>
#include <filesystem>

#include "qloom/agent/intent_internal.h"
#include "qloom/agent/intent_lexicon.h"

namespace qloom::agent {
namespace detail {

const std::string& ParseState::n(size_t i) const {
  static const std::string empty;
  return i < tok.size() ? tok[i].norm : empty;
}

void ParseState::ask(std::string field, std::string q) {
  for (const auto& oq : out.open_questions)
    if (oq.field == field && oq.question == q) return;
  out.open_questions.push_back({std::move(field), std::move(q)});
}

size_t ParseState::clause_distance(size_t i, const std::function<bool(const Token&)>& pred) const {
  size_t best = SIZE_MAX;
  for (size_t k = 0; k < tok.size(); ++k) {
    if (k == i || tok[k].clause != tok[i].clause || !pred(tok[k])) continue;
    best = std::min(best, k > i ? k - i : i - k);
  }
  return best;
}

int ParseState::calib_or_eval(size_t i) const {
  auto kind = [&](size_t k) { return is_calib_cue(tok[k].norm) ? 1 : is_eval_cue(tok[k].norm) ? -1 : 0; };
  for (size_t k = i; k-- > 0 && tok[k].clause == tok[i].clause;)
    if (kind(k) != 0) return kind(k);
  for (size_t k = i + 1; k < tok.size() && tok[k].clause == tok[i].clause; ++k)
    if (kind(k) != 0) return kind(k);
  return 0;
}

bool ParseState::correction_in(size_t b, size_t e) const {
  for (size_t k = b; k < e && k < tok.size(); ++k)
    if (in(tok[k].norm, {"actually", "instead", "rather", "correction", "scratch", "wait", "change", "switch",
                         "switching", "make", "prefer", "nope", "oops", "sorry", "second", "update", "nah", "changed",
                         "hmm", "better", "no", "correct", "fix"}))
      return true;
  return false;
}

bool ParseState::negated_before(size_t i) const {
  auto at = [&](size_t back) -> const std::string& {
    static const std::string empty;
    return i >= back && tok[i - back].clause == tok[i].clause ? tok[i - back].norm : empty;
  };
  const std::string &b1 = at(1), &b2 = at(2), &b3 = at(3);
  if (in(b1, {"not", "no", "non", "avoid", "without", "never", "except", "nor", "skip"})) return true;
  if ((b2 == "instead" && b1 == "of") || (b2 == "rather" && b1 == "than") || (b2 == "other" && b1 == "than"))
    return true;
  if (in(b2, {"not", "don't", "dont", "avoid", "never", "no"}) && in(b1, {"use", "to", "the", "a", "an", "using", "with", "want"}))
    return true;
  return in(b3, {"don't", "dont", "not"}) && in(b2, {"use", "want", "do"}) && in(b1, {"the", "a", "an", "any"});
}

bool is_calib_cue(std::string_view n) {
  return in(n, {"calib", "calibrate", "calibration", "calibrating", "calibrated", "num_calib_data", "calib_data",
                "calibration_dataset", "calib_dataset"});
}

bool is_eval_cue(std::string_view n) {
  return in(n, {"eval", "evaluate", "evaluation", "evaluating", "evaluated", "measure", "report", "score", "benchmark",
                "ppl", "perplexity", "test", "metric", "gsm8k", "mmlu", "accuracy", "kld", "hellaswag", "check",
                "judge", "judged", "arc", "arc_easy", "arc_challenge", "piqa", "winogrande"});
}

namespace {

std::string default_output_name(const Intent& in) {
  std::string base;
  if (in.model_kind == "demo") base = in.model_path.empty() ? "demo" : in.model_path;
  else base = in.model.value.empty() ? "model" : in.model.value;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (const size_t slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
  for (char& c : base)
    if (c == ' ') c = '-';
  base += '-';
  base += in.quant_scheme.value.empty() ? "quantized" : in.quant_scheme.value;
  return base;
}

}  // namespace

void finish_defaults(ParseState& st) {
  Intent& o = st.out;
  if (o.model.value.empty() && !o.has_question("model")) {
    o.model.source = Source::kMissing;
    st.ask("model", "Which model should I quantize? Give a Hugging Face id (org/name, e.g. Qwen/Qwen2.5-0.5B), a "
                    "local model directory, or 'the bundled demo model'.");
  }
  if (o.quant_algo.source == Source::kDefault) o.reasons["quant_algo"] = "RTN baseline (fastest)";
  if (o.kv_cache_dtype.source == Source::kDefault) {
    const bool fp8 = o.quant_scheme.value == "fp8" || o.quant_scheme.value == "ptpc_fp8";
    o.kv_cache_dtype.value = fp8 ? "fp8" : "";
    o.reasons["kv_cache_dtype"] = fp8 ? "Recommended for FP8 inference (seed 001 decision table)"
                                      : "KV cache left unquantized unless asked";
  }
  if (o.exclude_layers.source == Source::kDefault)
    o.reasons["exclude_layers"] = "Model template defaults (lm_head, MoE routers), resolved at intake";
  if (o.dataset.source == Source::kDefault) {
    o.dataset.value = "pileval";
    o.reasons["dataset"] = "Fast default (seed 001 decision table)";
  }
  if (o.num_calib_data.source == Source::kDefault) {
    o.num_calib_data.value = 128;
    o.reasons["num_calib_data"] = "Standard default (seed 001 decision table)";
  }
  if (o.seq_len.source == Source::kDefault) {
    o.seq_len.value = 512;
    o.reasons["seq_len"] = "Standard default (seed 001 decision table)";
  }
  if (o.output_dir.source == Source::kDefault) {
    const std::string name = default_output_name(o);
    o.output_dir.value = st.ctx.output_root.empty() ? name : (std::filesystem::path(st.ctx.output_root) / name).string();
    o.reasons["output_dir"] = "Default: <model>-<scheme> under the workspace";
  }
  if (o.metric_name.source == Source::kDefault) {
    o.metric_name.value = "gsm8k";
    o.metric_higher_is_better = true;
    o.reasons["metric_name"] = "Default headline metric (seed 000 §5.2)";
  }
  if (o.eval_dataset.value.empty()) o.eval_dataset = {o.metric_name.value == "ppl" || o.metric_name.value == "kld" ? "wikitext2" : o.metric_name.value, Source::kDefault};
  if (o.eval_requested.source == Source::kDefault) o.eval_requested.value = true;
  if (!o.eval_gap_threshold.value)
    o.reasons["eval_gap_threshold"] = "Not stated: caller -> eval_gap_threshold.txt -> 0.03 (seed 000 §2)";
  if (o.priority.source == Source::kDefault) o.priority.value = "";
}

}  // namespace detail

const char* source_name(Source s) {
  switch (s) {
    case Source::kStated: return "stated";
    case Source::kDefault: return "default";
    case Source::kInferred: return "inferred";
    case Source::kMissing: return "missing";
  }
  return "default";
}

bool Intent::has_question(std::string_view field) const {
  for (const auto& q : open_questions)
    if (q.field == field) return true;
  return false;
}

Intent parse_intent(std::string_view prompt, const IntentContext& ctx) {
  detail::ParseState st(ctx, detail::lex(prompt));
  st.out.user_prompt = std::string(prompt);
  detail::pass_model_and_output(st);
  detail::pass_kv_cache(st);
  detail::pass_exclusions(st);
  detail::pass_eval_gap(st);
  detail::pass_calibration(st);
  detail::pass_metric(st);
  detail::pass_hardware(st);
  detail::pass_algorithm(st);
  detail::pass_scheme(st);
  detail::finish_defaults(st);
  // "keep the layers that don't fit in bf16" / "exclude unsupported layers".
  std::string low(prompt);
  for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* phrase : {"don't fit", "dont fit", "do not fit", "doesn't fit", "does not fit", "don\u2019t fit",
                             "can't be stored", "cannot be stored", "exclude_unsupported", "unsupported layers",
                             "layers that don't fit", "unfit layers"})
    if (low.find(phrase) != std::string::npos) {
      st.out.exclude_unsupported = {true, Source::kStated};
      st.out.reasons["exclude_unsupported"] = "The prompt keeps layers the scheme cannot store in the source dtype";
      break;
    }
  return std::move(st.out);
}

Intent apply_intent_change(const Intent& base, std::string_view change, const IntentContext& ctx) {
  std::string text = base.user_prompt;
  text += "\nActually, ";
  text += change;
  return parse_intent(text, ctx);
}

nlohmann::ordered_json to_json(const Intent& in) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json src;
  auto put = [&](const char* key, const auto& field) {
    j[key] = field.value;
    src[key] = source_name(field.source);
  };
  j["user_prompt"] = in.user_prompt;
  put("model", in.model);
  j["model_kind"] = in.model_kind;
  j["model_path"] = in.model_path;
  put("quant_scheme", in.quant_scheme);
  put("kv_cache_dtype", in.kv_cache_dtype);
  put("quant_algo", in.quant_algo);
  put("exclude_layers", in.exclude_layers);
  put("quantize_layers", in.quantize_layers);
  put("exclude_unsupported", in.exclude_unsupported);
  put("layer_quant_scheme", in.layer_quant_scheme);
  put("dataset", in.dataset);
  put("num_calib_data", in.num_calib_data);
  put("seq_len", in.seq_len);
  put("model_export", in.model_export);
  put("output_dir", in.output_dir);
  put("hardware", in.hardware);
  put("priority", in.priority);
  j["eval_gap_threshold"] = in.eval_gap_threshold.value ? nlohmann::ordered_json(*in.eval_gap_threshold.value) : nullptr;
  src["eval_gap_threshold"] = source_name(in.eval_gap_threshold.source);
  j["eval_gap_kind"] = in.eval_gap_kind;
  put("metric_name", in.metric_name);
  put("eval_dataset", in.eval_dataset);
  j["metric_higher_is_better"] = in.metric_higher_is_better;
  put("eval_requested", in.eval_requested);
  j["eval_limit"] = in.eval_limit.value ? nlohmann::ordered_json(*in.eval_limit.value) : nullptr;
  src["eval_limit"] = source_name(in.eval_limit.source);
  j["sources"] = src;
  j["reasons"] = in.reasons;
  j["open_questions"] = nlohmann::ordered_json::array();
  for (const auto& q : in.open_questions) j["open_questions"].push_back({{"field", q.field}, {"question", q.question}});
  j["notes"] = in.notes;
  return j;
}

}  // namespace qloom::agent
