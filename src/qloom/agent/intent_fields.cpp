// Exclusion, eval-gap, calibration and metric passes of the intent parser.
//
// Exclusions: a layer target (lm_head / "output head" -> lm_head; attention,
// attn, self-attention -> *self_attn*; MLP / FFN -> *mlp*; experts ->
// *experts*; router / MoE gate -> *.gate; q_proj..down_proj -> *<name>;
// "first N layers" -> model.layers.<k>.*; a token with '*' as written)
// is excluded when an exclusion verb precedes it in its clause ("exclude",
// "skip", "keep", "leave", "don't quantize", "except", ...) or a
// high-precision word follows ("in bf16", "unquantized"); a scheme after it
// ("keep attention in fp8") makes a --layer_quant_scheme override instead;
// "including" / "also quantize" puts it in quantize_layers. Targets listed
// with "and"/"or" share the first one's verb.
//
// Eval gap (seed 000 §5.4, mission §7): "5%", "5 percent" -> 0.05
// (relative); "0.05" next to a gap word (gap, lose, drop, degradation,
// tolerance, accept, within, threshold, ...) -> 0.05, "absolute" when said of
// accuracy points ("lose up to 0.05 accuracy", "2 points"); a bare number
// >= 1 after a gap word is read as a percentage (with a note).
//
// Calibration: "<N> samples" / "num_calib_data N" / "calibrate on N" ->
// num_calib_data (an N next to an evaluation word is the eval limit instead);
// "seq len N" / "N tokens" -> seq_len ("2k" = 2048); a data set name or data
// file nearest to a calibration word -> dataset, nearest to an evaluation word
// -> the eval data set.
#include <cmath>
#include <regex>

#include "qloom/agent/intent_internal.h"
#include "qloom/agent/intent_lexicon.h"

namespace qloom::agent::detail {
namespace {

bool exclusion_verb(std::string_view n) {
  return in(n, {"exclude", "excluding", "excluded", "skip", "skipping", "keep", "keeping", "leave", "leaving",
                "except", "preserve", "protect", "exclude_layers", "ignore", "without"});
}
bool negation(std::string_view n) { return in(n, {"don't", "dont", "not", "never", "no", "nor"}); }

// The Quark pattern of a layer target at i, with its token length.
std::vector<std::string> target_at(const ParseState& st, size_t i, size_t& len) {
  len = 1;
  const std::string& n = st.n(i);
  const std::string& next = st.n(i + 1);
  if (in(n, {"lm_head", "lmhead"})) return {"lm_head"};
  if ((n == "lm" || n == "output") && next == "head") { len = 2; return {"lm_head"}; }
  if (in(n, {"attention", "attn", "self_attn", "self_attention", "attentions"})) {
    if (in(next, {"layers", "layer", "blocks", "block", "projections", "modules"})) len = 2;
    return {"*self_attn*"};
  }
  if (in(n, {"mlp", "mlps", "ffn", "ffns", "feed_forward", "feedforward"})) {
    if (in(next, {"layers", "layer", "blocks", "block"})) len = 2;
    return {"*mlp*"};
  }
  if (in(n, {"experts", "expert"})) return {"*experts*"};
  if (in(n, {"router", "routers", "gates"}) || (n == "moe" && next == "gate") || (n == "router" && next == "gate")) {
    if (next == "gate" || next == "gates") len = 2;
    return {"*.gate"};
  }
  if (in(n, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj"}))
    return {"*" + n};
  const std::string& text = st.tok[i].text;
  if (st.tok[i].kind == TokKind::kWord && text.find('*') != std::string::npos) return {text};
  // "mlp.down_proj", "model.layers.0.mlp": a dotted module path.
  static const std::regex dotted(R"(^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$)");
  static const std::regex module_tail(R"((proj|gate|head|experts?|attn|mlp|router|layers\.\d+)$)");
  if (st.tok[i].kind == TokKind::kWord && rx_match(text, dotted) && rx_search(text, module_tail))
    return {text.rfind("model.", 0) == 0 ? text : "*" + text};
  if (n == "first" || (n == "layer" && st.number(i + 1))) {
    size_t k = i + 1, count = 1;
    if (n == "layer") return (len = 2, std::vector<std::string>{"model.layers." + std::to_string(static_cast<long>(st.tok[i + 1].num)) + ".*"});
    if (st.number(k)) { count = static_cast<size_t>(st.tok[k].num); ++k; }
    if (!in(st.n(k), {"layer", "layers", "decoder", "blocks", "block"}) || count == 0 || count > 64) return {};
    len = k - i + 1;
    std::vector<std::string> v;
    for (size_t c = 0; c < count; ++c) v.push_back("model.layers." + std::to_string(c) + ".*");
    return v;
  }
  return {};
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  for (const auto& x : v)
    if (x == s) return;
  v.push_back(s);
}

}  // namespace

void pass_exclusions(ParseState& st) {
  Intent& out = st.out;
  size_t last_end = 0;
  int last_kind = 0;  // 0 none, 1 exclude, 2 quantize
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i)) continue;
    size_t len = 0;
    const std::vector<std::string> pats = target_at(st, i, len);
    if (pats.empty()) continue;
    int kind = 0;
    bool verb_before = false, neg_quantize = false, include = false;
    for (size_t back = 1; back <= 6 && i >= back && st.tok[i - back].clause == st.tok[i].clause; ++back) {
      const std::string& b = st.n(i - back);
      if (exclusion_verb(b)) verb_before = true;
      if (in(b, {"quantize", "quantizing", "quantise", "touch", "quantized"}) && i - back >= 1 &&
          (negation(st.n(i - back - 1)) || (i - back >= 2 && negation(st.n(i - back - 2)))))
        neg_quantize = true;
      if (in(b, {"including", "include", "also"})) include = true;
    }
    // After the target: "in bf16" / "unquantized" / "in fp8" / "too".
    bool precision_after = false;
    SchemeMention override_scheme;
    bool has_override = false;
    for (size_t j = i + len; j < i + len + 4 && st.free(j); ++j) {
      const std::string& a = st.n(j);
      if (is_high_precision_word(a)) { precision_after = true; st.use(j); if (in(st.n(j + 1), {"precision"})) st.use(j + 1); break; }
      if (read_scheme(st, j, override_scheme)) { has_override = !override_scheme.scheme.empty(); break; }
      if (in(a, {"too", "as", "well"}) && a != "as") { include = include || !verb_before; break; }
      if (!in(a, {"in", "at", "as", "with", "to", "layers", "layer", "the", "out", "of", "quantization", "precision", "weights"}))
        break;
    }
    // "... but not the lm_head", "everything except attention".
    for (size_t back = 1; back <= 2 && i >= back; ++back) {
      const std::string& b = st.n(i - back);
      if (in(b, {"not", "except", "excluding", "nor"})) neg_quantize = true;
      if (!in(b, {"the", "its", "their"})) break;
    }
    if (has_override && !neg_quantize) kind = 3;
    else if (verb_before || neg_quantize || precision_after) kind = 1;
    else if (include) kind = 2;
    else if (last_kind != 0 && i <= last_end + 3) {  // "lm_head and attention"
      bool joined = true;
      for (size_t k = last_end; k < i; ++k) joined = joined && in(st.n(k), {"and", "or", "nor", "the", "its", "all"});
      if (joined) kind = last_kind;
    }
    if (kind == 0 && pats[0].find('*') != std::string::npos && st.tok[i].text.find('*') != std::string::npos) kind = 1;
    if (kind == 0) continue;
    st.use(i, i + len);
    if (kind == 3) {
      use_mention(st, override_scheme);
      for (const auto& p : pats) out.layer_quant_scheme.value[p] = override_scheme.scheme;
      out.layer_quant_scheme.source = Source::kStated;
      out.reasons["layer_quant_scheme"] = "User asked for " + override_scheme.text + " on " + st.tok[i].text;
      kind = 1;  // a following "and mlp" would be ambiguous: treat as exclusion only with its own verb
      last_kind = 0;
      continue;
    }
    auto& list = kind == 1 ? out.exclude_layers : out.quantize_layers;
    for (const auto& p : pats) add_unique(list.value, p);
    list.source = Source::kStated;
    if (pats[0].rfind("model.layers.", 0) == 0 && pats[0] != st.tok[i].text)
      st.note("'" + st.tok[i].text + "' mapped to " + pats[0] + "...: assumes the model.layers.<N> module naming");
    last_kind = kind;
    last_end = i + len;
  }
  for (size_t i = 0; i < st.size(); ++i) {
    if (st.free(i) && st.n(i) == "last" && in(st.n(i + 1), {"layer", "layers"}) ) {
      st.use(i, i + 2);
      st.ask("exclude_layers", "Which module patterns are 'the last layers' (e.g. model.layers.31.*)? The layer count is known only after intake.");
    } else if (st.free(i) && st.n(i) == "last" && st.number(i + 1) && in(st.n(i + 2), {"layer", "layers"})) {
      st.use(i, i + 3);
      st.ask("exclude_layers", "Which module patterns are 'the last " + st.tok[i + 1].text + " layers' (e.g. model.layers.31.*)? The layer count is known only after intake.");
    }
  }
  if (!out.quantize_layers.value.empty()) {
    for (const auto& p : out.quantize_layers.value) {
      auto& ex = out.exclude_layers.value;
      for (size_t k = 0; k < ex.size(); ++k)
        if (ex[k] == p) {
          st.note("'" + p + "' is both excluded and included; the later 'quantize' statement is ignored");
          break;
        }
    }
  }
}

void pass_eval_gap(ParseState& st) {
  Intent& out = st.out;
  auto gap_word = [](const Token& t) {
    return in(t.norm, {"gap", "lose", "losing", "loss", "drop", "degrade", "degradation", "regression", "regress",
                       "tolerance", "tolerate", "accept", "acceptable", "threshold", "worse", "within", "deviation",
                       "delta", "difference", "sacrifice", "acceptable_eval_gap", "eval_gap", "eval_gap_threshold",
                       "budget", "decrease", "reduction", "hit"});
  };
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.number(i)) continue;
    const Token& t = st.tok[i];
    const size_t gap_dist = st.clause_distance(i, gap_word);
    const bool calib_ctx = st.clause_distance(i, [](const Token& x) { return is_calib_cue(x.norm) || x.norm == "samples"; }) < gap_dist;
    double v = 0;
    std::string kind = "relative";
    std::string note;
    if (t.percent) {
      if (calib_ctx) continue;
      v = t.num / 100.0;
      if (in(st.n(i + 1), {"points", "point"}) || st.n(i + 1) == "percentage") kind = "absolute";
    } else if (in(st.n(i + 1), {"points", "point", "pp", "pts"}) && gap_dist != SIZE_MAX) {
      v = t.num / 100.0;
      kind = "absolute";
      st.use(i + 1);
    } else if (t.num > 0 && t.num < 1 && gap_dist != SIZE_MAX && !calib_ctx) {
      v = t.num;
      const size_t acc = st.clause_distance(i, [](const Token& x) { return in(x.norm, {"accuracy", "absolute", "points"}); });
      if (acc != SIZE_MAX && st.clause_distance(i, [](const Token& x) { return in(x.norm, {"lose", "losing", "drop", "loss", "absolute"}); }) != SIZE_MAX)
        kind = "absolute";
    } else if (t.num >= 1 && t.num < 100 && gap_dist <= 3 && !calib_ctx && !t.kilo && i >= 1 && gap_word(st.tok[i - 1 - (in(st.n(i - 1), {"of", "is", "to"}) && i >= 2 ? 1 : 0)])) {
      v = t.num / 100.0;
      note = "eval gap '" + t.text + "' read as " + t.text + "% (" + std::to_string(v).substr(0, 5) + ")";
    } else {
      continue;
    }
    st.use(i);
    if (v >= 1.0 || v <= 0.0) {
      st.ask("eval_gap_threshold", "An accepted eval gap of " + t.text + (t.percent ? "%" : "") +
                                       " is not a fraction between 0 and 1; what gap should I accept?");
      continue;
    }
    if (out.eval_gap_threshold.value && std::fabs(*out.eval_gap_threshold.value - v) > 1e-12)
      st.note("eval_gap_threshold: the later " + t.text + (t.percent ? "%" : "") + " replaces the earlier value");
    out.eval_gap_threshold = {v, Source::kStated};
    out.eval_gap_kind = kind;
    if (!note.empty()) st.note(note);
    if (kind == "absolute")
      st.note("the accepted gap is stated in accuracy points; seed 000 §5.4 writes it as-is to "
              "eval_gap_threshold.txt and the gate compares it with relative_gap (mission §7)");
  }
}

void pass_calibration(ParseState& st) {
  Intent& out = st.out;
  auto set_u64 = [&](Sourced<uint64_t>& f, uint64_t v, const char* name) {
    if (f.source == Source::kStated && f.value != v)
      st.note(std::string(name) + ": the later " + std::to_string(v) + " replaces " + std::to_string(f.value));
    f = {v, Source::kStated};
  };
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i)) continue;
    const Token& t = st.tok[i];
    const std::string& n = t.norm;
    // seq_len: "seq len 1024", "sequence length of 2048", "--seq_len 512", "2048 tokens".
    size_t k = i;
    bool seq_key = false;
    if (in(n, {"seq_len", "seqlen", "sequence_length", "max_seq_len", "max_length", "context_length", "seq_length"})) { seq_key = true; k = i + 1; }
    else if (in(n, {"seq", "sequence", "max", "context"}) && in(st.n(i + 1), {"len", "length"})) { seq_key = true; k = i + 2; }
    if (seq_key) {
      while (k < i + 5 && st.free(k) && in(st.n(k), {"of", "to", "is", "at", "="})) ++k;
      if (st.number(k)) {
        const Token& v = st.tok[k];
        set_u64(out.seq_len, static_cast<uint64_t>(v.kilo ? v.num / 1000 * 1024 : v.num), "seq_len");
        st.use(i, k + 1);
      }
      continue;
    }
    const std::string& n1 = st.n(i + 1);
    const std::string& n2 = st.n(i + 2);
    const bool next_is_flag = i + 1 < st.size() && st.tok[i + 1].text.rfind('-', 0) == 0;
    // "num_calib_data=16, seq_len=64": the seq_len key that follows has its
    // own number, so this one is not "16 seq_len".
    const bool next_key_has_value = in(n1, {"seq_len", "seqlen", "sequence_length"}) &&
                                    (st.number(i + 2) || (in(n2, {"=", "of", "is", "to"}) && st.number(i + 3)));
    if (t.kind == TokKind::kNumber && !t.percent && !next_is_flag && !next_key_has_value &&
        (in(n1, {"token", "tokens", "tok", "seq_len", "seqlen", "sequence_length"}) ||
         (in(n1, {"seq", "sequence", "context", "max"}) && in(n2, {"len", "length"})))) {
      set_u64(out.seq_len, static_cast<uint64_t>(t.kilo ? t.num / 1000 * 1024 : t.num), "seq_len");
      st.use(i, in(n2, {"len", "length"}) ? i + 3 : i + 2);
      continue;
    }
    // Sample counts.
    if (t.kind == TokKind::kNumber && !t.percent) {
      size_t j = i + 1;
      MetricDef metric;
      while (j < i + 3 && st.free(j) &&
             (in(st.n(j), {"calibration", "calib", "random", "text", "held", "eval", "evaluation"}) || find_metric(st.n(j), metric)))
        ++j;
      bool count = in(st.n(j), {"samples", "sample", "examples", "example", "sequences", "seqs", "prompts", "texts", "documents", "docs", "problems", "questions"});
      bool key_before = false;
      for (size_t back = 1; back <= 4 && i >= back && !count; ++back) {
        const std::string& b = st.n(i - back);
        if (in(b, {"num_calib_data", "nsamples", "n_samples", "num_samples", "calibration", "calib", "calibrate", "calibrating"})) { key_before = true; break; }
        if (!in(b, {"of", "=", "to", "with", "on", "using", "set", "size", "is", "data", "samples", "count", "use"})) break;
      }
      if (!count && !key_before) continue;
      const uint64_t v = static_cast<uint64_t>(t.num);
      if (st.calib_or_eval(i) < 0) {
        out.eval_limit = {v, Source::kStated};
      } else {
        set_u64(out.num_calib_data, v, "num_calib_data");
      }
      st.use(i);
      if (count) st.use(j);
      continue;
    }
    // Data sets: "--dataset pileval", "calibrate on c4", "ppl on wikitext-2", "calib.jsonl".
    std::string cal = calib_dataset_name(n);
    const bool file = t.kind == TokKind::kPath || t.kind == TokKind::kQuoted || is_data_file(t.text);
    if (cal.empty() && !file && !eval_text_dataset_name(n).empty()) cal = eval_text_dataset_name(n);
    if (cal.empty() && !(file && is_data_file(t.text))) continue;
    const bool flag = i >= 1 && in(st.n(i - 1), {"dataset", "calib_dataset", "calibration_dataset"});
    const int side = st.calib_or_eval(i);
    const std::string value = cal.empty() ? t.text : cal;
    if (flag || side > 0) {
      if (out.dataset.source == Source::kStated && out.dataset.value != value)
        st.note("dataset: the later '" + value + "' replaces '" + out.dataset.value + "'");
      out.dataset = {value, Source::kStated};
      st.use(i);
    } else if (side < 0 || !eval_text_dataset_name(n).empty()) {
      const std::string ev = file ? t.text : eval_text_dataset_name(n);
      if (ev.empty()) continue;
      out.eval_dataset = {ev, Source::kStated};
      st.use(i);
    }
  }
}

void pass_metric(ParseState& st) {
  Intent& out = st.out;
  std::vector<std::string> others;
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i)) continue;
    const std::string& n = st.n(i);
    // Evaluation opt-out: "skip eval", "no evaluation", "don't evaluate".
    if ((in(n, {"skip", "no", "without", "skip_evaluation"}) &&
         (n == "skip_evaluation" || in(st.n(i + 1), {"eval", "evaluation", "evals", "evaluating", "accuracy"}))) ||
        (negation(n) && in(st.n(i + 1), {"evaluate", "eval", "run"}) && (st.n(i + 1) != "run" || in(st.n(i + 2), {"eval", "evaluation"})))) {
      out.eval_requested = {false, Source::kStated};
      st.use(i, i + 2);
      continue;
    }
    MetricDef m;
    size_t len = 1;
    if (n == "kl" && st.is(i + 1, "divergence")) { m = {"kld", "wikitext2", false}; len = 2; }
    else if (n == "grade" && st.is(i + 1, "school") && st.is(i + 2, "math")) { m = {"gsm8k", "gsm8k", true}; len = 3; }
    else if (n == "arc" && st.is(i + 1, "easy")) { m = {"arc_easy", "arc_easy", true}; len = 2; }
    else if (!find_metric(n, m)) continue;
    st.use(i, i + len);
    if (out.metric_name.source == Source::kStated) {
      if (out.metric_name.value != m.name) others.push_back(m.name);
      continue;
    }
    out.metric_name = {m.name, Source::kStated};
    out.metric_higher_is_better = m.higher_is_better;
    if (out.eval_dataset.source != Source::kStated) out.eval_dataset = {m.dataset, Source::kDefault};
  }
  if (out.metric_name.source != Source::kStated && out.eval_dataset.source == Source::kStated &&
      !eval_text_dataset_name(lower_ascii(out.eval_dataset.value)).empty()) {
    out.metric_name = {"ppl", Source::kInferred};
    out.metric_higher_is_better = false;
    st.note("metric: perplexity on " + out.eval_dataset.value + " (a text data set was named for evaluation)");
  }
  for (const auto& o : others) st.note("metric '" + o + "' also named; the headline metric is " + out.metric_name.value);
}

}  // namespace qloom::agent::detail
