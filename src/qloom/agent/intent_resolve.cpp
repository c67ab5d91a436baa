// Algorithm and scheme resolution of the intent parser.
//
// Rules:
//   - Mentions are read in prompt order. A later mention that differs from
//     the current choice replaces it when a correction cue introduces it
//     ("actually", "instead", "switch to", "make it", ...), with a note;
//     without one, the prompt is ambiguous and an open question is asked
//     (seed 000 §4: do not guess). A generic family word refined by a
//     specific one ("W4A16 ... uint4_wo_64", "W8A8 int8") is no conflict.
//   - Negated mentions ("not fp8", "instead of int8", "without gptq") are
//     dropped (and a negated default is asked about).
//   - No scheme stated: AWQ -> uint4_wo_128, GPTQ -> int4_wo_128 (inferred);
//     else the recommendation-table row of a stated priority or a hardware
//     hint (inferred); else fp8 (default: seed 001's best-accuracy row).
#include <algorithm>
#include <regex>

#include "qloom/agent/intent_internal.h"
#include "qloom/agent/intent_lexicon.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent::detail {
namespace {

// Adjacent transposition ("gtpq") or edit distance <= limit.
bool close_to(std::string_view a, std::string_view b, size_t limit) {
  if (a.size() == b.size()) {
    size_t diff = 0, first = 0;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k] != b[k]) { if (diff++ == 0) first = k; }
    if (diff == 2 && first + 1 < a.size() && a[first] == b[first + 1] && a[first + 1] == b[first]) return true;
  }
  return quant::edit_distance(a, b) <= limit;
}

size_t common_prefix(std::string_view a, std::string_view b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return k;
}

// Scheme-looking word: letters + digits starting like a scheme name.
bool scheme_shaped(const Token& t) {
  if (t.kind != TokKind::kWord || t.norm.size() < 3) return false;
  static const std::regex re(R"(^(u?in?t|uint|unit|fp|f8|mx|xm|mf|nvfp|amdfp|ptpc|pt|w\d|nf|q\d)[a-z0-9_]*$)");
  bool digit = false;
  for (char c : t.norm) digit = digit || (c >= '0' && c <= '9');
  HardwareDef hw;
  MetricDef metric;
  return digit && rx_match(t.norm, re) && !is_high_precision_word(t.norm) && !find_hardware(t.norm, hw) &&
         !find_metric(t.norm, metric) && !is_model_family_word(t.norm) && !in(t.norm, {"int16", "int32", "fp16", "fp32"});
}

// Nearest spelling to a misspelled scheme word: registry names, Quark-only
// names and the common aliases. `best` empty: none close enough; several
// equally close names are returned in `ties`.
void nearest_scheme(std::string_view n, std::string& best, std::vector<std::string>& ties) {
  std::vector<std::string> cands = quant::scheme_names();
  for (const auto& q : quant::quark_only_scheme_names()) cands.push_back(q);
  for (const char* a : {"int4", "uint4", "fp8", "int8", "w4a16", "w8a8", "mxfp4", "w4a8"}) cands.emplace_back(a);
  const size_t limit = n.size() <= 4 ? 1 : n.size() <= 8 ? 2 : 3;
  size_t best_d = limit + 1, best_p = 0;
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  for (const auto& c : cands) {
    const size_t d = close_to(n, c, 1) && quant::edit_distance(n, c) > 1 ? 1 : quant::edit_distance(n, c);
    if (d > limit) continue;
    const size_t p = common_prefix(n, c);
    if (d < best_d || (d == best_d && p > best_p)) {
      best_d = d;
      best_p = p;
      ties = {c};
    } else if (d == best_d && p == best_p) {
      ties.push_back(c);
    }
  }
  best = ties.size() == 1 ? ties[0] : std::string();
}

std::string quoted_list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) {
    if (k) s += k + 1 == v.size() ? " or " : ", ";
    s += v[k];
  }
  return s;
}

std::string implemented_list() {
  std::string s;
  for (const auto& n : quant::scheme_names()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

bool same_family(const SchemeMention& a, const SchemeMention& b) {
  auto f = [](const std::string& x) { return x == "8bit" ? std::string("fp8|int8") : x; };
  return a.family == b.family || f(a.family).find(b.family) != std::string::npos ||
         f(b.family).find(a.family) != std::string::npos;
}

struct AlgoMention {
  std::string algo;  // "gptq" | "awq" | "smoothquant" | "" (RTN, stated)
  size_t begin, end;
  bool negated, correction;
  std::string text;
};

}  // namespace

namespace {

// Quark's --quant_algo name spelled at token i ("" = RTN stated), with the
// number of tokens read; false when the token names no algorithm.
bool algo_spelling(const ParseState& st, size_t i, std::string& algo, size_t& len, std::string& typo) {
  const std::string& n = st.n(i);
  len = 1;
  if (in(n, {"gptq", "awq", "smoothquant", "gptaq", "qronos", "autosmoothquant", "rotation"})) algo = n;
  else if (n == "smooth_quant" || (n == "smooth" && st.is(i + 1, "quant"))) { algo = "smoothquant"; len = n == "smooth" ? 2 : 1; }
  else if (in(n, {"auto_smoothquant", "auto_smooth_quant", "autosmooth"})) algo = "autosmoothquant";
  else if (n == "auto" && st.is(i + 1, "smoothquant")) { algo = "autosmoothquant"; len = 2; }
  else if (in(n, {"quarot", "rotate", "rotated", "rotating", "rotations", "hadamard"})) algo = "rotation";
  else if (in(n, {"rtn", "round_to_nearest"})) algo = "none";
  else if (n == "round" && st.is(i + 1, "to") && st.is(i + 2, "nearest")) { algo = "none"; len = 3; }
  else if (n == "no" && (st.is(i + 1, "algorithm") || st.is(i + 1, "calibration_algorithm"))) { algo = "none"; len = 2; }
  else {
    for (const char* a : {"gptq", "awq", "smoothquant"})
      if (n.size() >= 3 && close_to(n, a, n.size() >= 8 ? 2 : n.size() >= 4 ? 1 : 0) && n != a && n != "gate") {
        algo = a;
        typo = "'" + st.tok[i].text + "' read as " + a;
      }
    return !algo.empty();
  }
  return true;
}

// Rotation is a pre-pass Quark composes with one calibrated algorithm
// ("rotate then GPTQ" -> rotation,gptq); any other pair is a conflict.
std::string compose(const std::string& a, const std::string& b) {
  if ((a.empty() && b == "rotation") || (b.empty() && a == "rotation")) return "rotation";  // "rotation, RTN"
  if (a == "rotation" && !b.empty() && b != "rotation") return "rotation," + b;
  if (b == "rotation" && !a.empty() && a != "rotation") return "rotation," + a;
  return {};
}

}  // namespace

void pass_algorithm(ParseState& st) {
  std::vector<AlgoMention> found;
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i) || st.tok[i].kind != TokKind::kWord) continue;
    std::string algo, typo;
    size_t len = 1;
    if (!algo_spelling(st, i, algo, len, typo)) continue;
    AlgoMention m{algo == "none" ? "" : algo, i, i + len, false, false, st.tok[i].text};
    m.negated = algo != "none" && st.negated_before(i);
    m.correction = st.correction_in(found.empty() ? (i > 5 ? i - 5 : 0) : found.back().end, i) ||
                   st.is(i + len, "instead");
    if (!typo.empty()) st.note(typo);
    st.use(i, i + len);
    found.push_back(m);
  }
  std::string chosen, chosen_text, a, b;
  bool any = false, conflict = false;
  for (const auto& m : found) {
    if (m.negated) {
      st.note("'" + m.text + "' is negated in the prompt; not used");
      continue;
    }
    if (any && (m.algo == chosen || (!m.algo.empty() && ("," + chosen + ",").find("," + m.algo + ",") != std::string::npos)))
      continue;
    if (any && !m.correction) {
      if (const std::string both = compose(chosen, m.algo); !both.empty()) {
        chosen = both;
        chosen_text += " + " + m.text;
        continue;
      }
      conflict = true;
      a = chosen_text;
      b = m.text;
    } else if (any) {
      st.note("quant_algo: '" + m.text + "' replaces the earlier '" + chosen_text + "' (correction in the prompt)");
      conflict = false;
    }
    chosen = m.algo;
    chosen_text = m.text;
    any = true;
  }
  if (conflict) {
    st.ask("quant_algo", "The prompt names both " + a + " and " + b + "; which algorithm should I use?");
    st.out.quant_algo = {"", Source::kMissing};
  } else if (any) {
    st.out.quant_algo = {chosen, Source::kStated};
    st.out.reasons["quant_algo"] = chosen.empty() ? "User asked for plain RTN" : "User requested " + chosen;
  } else if (!found.empty()) {
    st.out.quant_algo = {"", Source::kStated};
    st.out.reasons["quant_algo"] = "User ruled out the named algorithm; RTN";
  }
}

void pass_scheme(ParseState& st) {
  std::vector<SchemeMention> found;
  std::vector<std::string> unknown;
  size_t prev_end = 0;
  for (size_t i = 0; i < st.size(); ++i) {
    SchemeMention m;
    if (!read_scheme(st, i, m)) {
      if (!st.free(i) || !scheme_shaped(st.tok[i])) continue;
      std::string best;
      std::vector<std::string> ties;
      nearest_scheme(st.tok[i].norm, best, ties);
      if (ties.empty()) {
        unknown.push_back(st.tok[i].text);
        st.use(i);
        continue;
      }
      if (best.empty()) {
        m.begin = i;
        m.end = i + 1;
        m.extra = {i};
        m.text = st.tok[i].text;
        m.family = "other";
        m.problem = "'" + st.tok[i].text + "' is not a Quark scheme; did you mean " + quoted_list(ties) + "?";
      } else {
        read_scheme(st, i, m, best);
        m.typo_note = "'" + st.tok[i].text + "' is not a Quark scheme name; did you mean " + best + "? Using " +
                      (m.scheme.empty() ? best : m.scheme);
      }
    }
    m.negated = st.negated_before(m.begin);
    const size_t from = found.empty() ? (m.begin > 5 ? m.begin - 5 : 0) : prev_end;
    m.correction = st.correction_in(from, m.begin) || st.is(m.end, "instead") ||
                   (st.is(m.end, "would") && st.is(m.end + 1, "be") && st.is(m.end + 2, "better"));
    use_mention(st, m);
    prev_end = m.end;
    i = m.end - 1;
    found.push_back(std::move(m));
  }

  const SchemeMention* win = nullptr;
  bool conflict = false;
  std::string a, b;
  for (const auto& m : found) {
    if (m.negated) {
      st.negated_schemes.push_back(m.scheme);
      st.note("'" + m.text + "' is negated in the prompt; not used as the scheme");
      continue;
    }
    if (!win) { win = &m; continue; }
    if (m.scheme == win->scheme && m.problem.empty() && win->problem.empty()) {
      if (win->generic && !m.generic) win = &m;
      continue;
    }
    if (same_family(*win, m) && m.problem.empty() && win->problem.empty() && !m.correction) {
      if (win->generic && !m.generic) { win = &m; continue; }
      if (m.generic && !win->generic) continue;
    }
    if (m.correction) {
      st.note("quant_scheme: '" + m.text + "' replaces the earlier '" + win->text + "' (correction in the prompt)");
      conflict = false;
    } else {
      conflict = true;
      a = win->text + (win->scheme.empty() ? "" : " (" + win->scheme + ")");
      b = m.text + (m.scheme.empty() ? "" : " (" + m.scheme + ")");
    }
    win = &m;
  }

  Intent& out = st.out;
  if (conflict) {
    st.ask("quant_scheme", "The prompt names both " + a + " and " + b + "; which scheme should I use?");
    out.quant_scheme = {"", Source::kMissing};
  } else if (win && !win->problem.empty()) {
    st.ask("quant_scheme", win->problem);
    out.quant_scheme = {"", Source::kMissing};
  } else if (win) {
    out.quant_scheme = {win->scheme, win->typo_note.empty() ? Source::kStated : Source::kInferred};
    out.reasons["quant_scheme"] = "User requested " + win->text;
    out.group_size_stated = win->group_stated;
    if (!win->typo_note.empty()) st.note(win->typo_note);
    if (win->quark_only)
      st.ask("quant_scheme", "Quark scheme '" + win->scheme + "' is not implemented in qloom yet; which of " +
                                 implemented_list() + " should I use instead?");
    const std::string& s = out.quant_scheme.value;
    if (win->generic && win->family == "int4" && s.rfind("int4_wo_", 0) == 0 && out.quant_algo.value == "awq") {
      out.quant_scheme = {"u" + s, Source::kInferred};
      st.note("AWQ 4-bit: using uint4 (asymmetric, with zero points), as Quark's AWQ recipe does; "
              "say 'symmetric int4' to keep int4");
      out.reasons["quant_scheme"] = "User requested " + win->text + " with AWQ (Quark's AWQ recipe: uint4)";
    }
  } else if (!unknown.empty()) {
    st.ask("quant_scheme", "'" + unknown.front() + "' is not a quantization scheme I know; which of " +
                               implemented_list() + " should I use?");
    out.quant_scheme = {"", Source::kMissing};
  } else {
    const std::string& algo = out.quant_algo.value;
    const Recommendation* rec = find_recommendation(out.priority.value);
    if (algo == "awq" || algo == "gptq") {
      out.quant_scheme = {algo == "awq" ? "uint4_wo_128" : "int4_wo_128", Source::kInferred};
      out.reasons["quant_scheme"] = algo == "awq" ? "AWQ without a scheme: uint4_wo_128 (Quark's AWQ recipe)"
                                                  : "GPTQ without a scheme: int4_wo_128 (W4A16, group 128)";
    } else if (rec) {
      out.quant_scheme = {rec->scheme, Source::kInferred};
      out.reasons["quant_scheme"] = rec->reason;
      if (!rec->algo.empty() && out.quant_algo.source == Source::kDefault) {
        out.quant_algo = {rec->algo, Source::kInferred};
        out.reasons["quant_algo"] = rec->reason;
      }
    } else {
      out.quant_scheme = {"fp8", Source::kDefault};
      out.reasons["quant_scheme"] =
          "No scheme, priority or hardware stated: fp8 (seed 001 recommendation table, best accuracy)";
    }
    const auto& neg = st.negated_schemes;
    if (std::find(neg.begin(), neg.end(), out.quant_scheme.value) != neg.end()) {
      st.ask("quant_scheme", "The prompt rules out " + out.quant_scheme.value + "; which scheme should I use instead?");
      out.quant_scheme = {"", Source::kMissing};
    }
  }

  // A group size stated apart from the scheme ("... and use a group size of 64").
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i)) continue;
    static const std::regex g_re(R"(^(?:gs?|group_?size_?)(\d+)$)");
    std::smatch g;
    int group = 0;
    size_t len = 0;
    if (rx_match(st.tok[i].norm, g, g_re)) { group = small_int(g[1].str()); len = 1; }
    else if (in(st.n(i), {"group", "group_size", "groupsize"})) {
      size_t k = i + 1;
      while (k < i + 4 && st.free(k) && in(st.n(k), {"size", "of", "is"})) ++k;
      if (st.number(k)) { group = static_cast<int>(st.tok[k].num); len = k - i + 1; }
    }
    if (len == 0) continue;
    st.use(i, i + len);
    std::string& s = out.quant_scheme.value;
    const size_t wo = s.find("_wo_");
    if (wo == std::string::npos || s.ends_with("per_channel")) {
      st.note("group size " + std::to_string(group) + " ignored: " + (s.empty() ? "no scheme" : s) + " has no groups");
    } else if (group == 32 || group == 64 || group == 128) {
      s = s.substr(0, wo + 4) + std::to_string(group);
      out.reasons["quant_scheme"] += ", group size " + std::to_string(group);
      out.group_size_stated = true;
    } else {
      st.ask("quant_scheme", "group size " + std::to_string(group) +
                                 " is not offered by Quark's 4-bit schemes (32, 64, 128, or per-channel); which one should I use?");
    }
  }
}

}  // namespace qloom::agent::detail
