// Scheme, KV-cache and algorithm passes of the intent parser.
//
// Spellings -> Quark names (scheme_registry.h):
//   fp8 / float8 / e4m3 / W8A8 / "8-bit"              -> fp8
//   per-channel | per-token | dynamic | PTPC + fp8     -> ptpc_fp8
//   int8 / W8A8-INT8 / "8-bit integer"                 -> int8
//   int4 / W4A16 / "4-bit" [gN | group size N]         -> int4_wo_N (N = 128 unless stated; an
//                                                         unstated N is a derived default the
//                                                         plan may lower to fit every layer)
//   ... per-channel                                    -> int4_wo_per_channel
//   uint4 / asymmetric | zero-point int4               -> uint4_wo_N / uint4_wo_per_channel
//   generic 4-bit + AWQ (no signedness stated)         -> uint4_wo_N (Quark's AWQ recipe)
//   mxfp4 [weights only]                               -> mxfp4 / mxfp4_weight_only
//   W4A8 / int4 weights + fp8 activations              -> int4_fp8
//   W4A8 MXFP4 / mxfp4 weights + fp8 activations       -> mxfp4_fp8
//   MXFP6 / fp6 [e3m2]                                 -> mxfp6_e2m3 / mxfp6_e3m2
//   NVFP4 / fp4 block16 · AMD FP4 [g32 | global]       -> nvfp4 · amdfp4 / amdfp4_g32 / amdfp4_global16
//   a Quark name qloom does not implement (mx6, ...)   -> the name + "not implemented" question
//   exact Quark names and legacy Quark names (w_fp8_a_fp8, ...) as such
// A misspelled name ("int4_wo_12", "mxpf4") resolves to the nearest name by
// edit distance (ties broken by the longer common prefix); a tie that remains
// becomes a question.
#include <algorithm>
#include <regex>

#include "qloom/agent/intent_internal.h"
#include "qloom/agent/intent_lexicon.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::agent::detail {
namespace {

struct Mods {
  bool is_unsigned = false, sign_explicit = false, per_channel = false, weight_only = false, ptpc = false;
  bool to_int8 = false, to_fp8 = false;
  bool mx = false, fp8_act = false, e3m2 = false, global = false;
  int group = 128;
  bool group_stated = false;
};

bool is_quark_only(std::string_view n) {
  const auto& v = quant::quark_only_scheme_names();
  return std::find(v.begin(), v.end(), n) != v.end();
}

std::string family_of(std::string_view name) {
  if (name.rfind("int4_wo", 0) == 0 || name.rfind("uint4_wo", 0) == 0) return "int4";
  if (name == "fp8" || name == "ptpc_fp8") return "fp8";
  if (name == "int8") return "int8";
  if (name.rfind("mxfp4", 0) == 0 && name != "mxfp4_fp8") return "mxfp4";
  return "other";
}

// Base spelling at token i: sets m.scheme (exact names) or m.family (+mods).
// Returns the token count of the base spelling, 0 when none.
size_t base_spelling(const ParseState& st, size_t i, std::string_view n, SchemeMention& m, Mods& mods) {
  const Token& t = st.tok[i];
  if (t.kind == TokKind::kNumber && !t.percent && (t.num == 4 || t.num == 8) && st.free(i + 1) &&
      (st.is(i + 1, "bit") || st.is(i + 1, "bits"))) {
    m.family = t.num == 4 ? "int4" : "8bit";
    m.generic = true;
    return 2;
  }
  if (t.kind != TokKind::kWord) return 0;
  static const std::vector<std::pair<std::string_view, std::string_view>> legacy = {
      {"w_fp8_a_fp8", "fp8"},           {"w_int8_a_int8_per_tensor_sym", "int8"},
      {"w_int4_per_group_sym", "int4_wo_128"}, {"w_uint4_per_group_asym", "uint4_wo_128"},
      {"w_int4_per_channel_sym", "int4_wo_per_channel"}, {"w_mx_fp4_a_mx_fp4_sym", "mxfp4"},
      {"w_fp8_per_channel_a_fp8_per_token", "ptpc_fp8"}};
  if (in(n, {"fp8", "float8", "fp8_e4m3", "e4m3", "fp8e4m3", "fp8_e4m3fn", "float8_e4m3fn", "w8a8_fp8", "fp8_w8a8"})) {
    m.family = "fp8";
  } else if (in(n, {"ptpc", "fp8_ptpc", "ptpc_fp8"})) {
    m.family = "fp8";
    mods.ptpc = true;
  } else if (in(n, {"int8", "w8a8_int8", "int8_w8a8", "w8a8int8", "i8", "int8_static"})) {
    m.family = "int8";
  } else if (n == "w8a8") {
    m.family = "8bit";
    m.generic = true;
  } else if (in(n, {"int4", "w4a16", "int4_wo", "4bit", "4_bit", "int_4", "w4a16_int4", "int4_weight_only", "wint4", "q4"})) {
    m.family = "int4";
    m.generic = true;
  } else if (in(n, {"uint4", "uint4_wo", "w4a16_uint4", "uint_4", "w4a16_asym"})) {
    m.family = "int4";
    mods.is_unsigned = mods.sign_explicit = true;
  } else if (in(n, {"mxfp4", "mx_fp4", "ocp_mxfp4", "mxfp_4", "ocp_mx_fp4", "mx4"})) {
    m.family = "mxfp4";
  } else if (in(n, {"mxfp4_wo", "mxfp4_weights_only", "mxfp4_weight", "mxfp4_w"})) {
    m.family = "mxfp4";
    mods.weight_only = true;
  } else if (n == "fp4") {
    m.family = "mxfp4";
    m.typo_note = "'fp4' read as OCP MXFP4 (mxfp4), the FP4 scheme qloom implements";
  } else if (in(n, {"w4a8", "w4a8_fp8", "w4a8_int4", "int4_w4a8"})) {
    m.family = "w4a8";  // int4_fp8 unless "mxfp4" follows (mxfp4_fp8)
  } else if (in(n, {"w4a8_mxfp4", "mxfp4_w4a8", "w4a8_mx", "mxfp4_a8"})) {
    m.scheme = "mxfp4_fp8";
    m.family = "other";
  } else if (in(n, {"mxfp6", "fp6", "mx_fp6", "ocp_mxfp6", "mxfp_6", "mx_fp_6"})) {
    m.family = "mxfp6";  // e2m3 unless "e3m2" follows
  } else if (in(n, {"nvfp4", "nv_fp4", "nvidia_fp4", "fp4_block16", "fp4_e2m1_block16"})) {
    m.scheme = "nvfp4";
    m.family = "other";
  } else if (in(n, {"amdfp4", "amd_fp4", "amdfp4_g16"})) {
    m.family = "amdfp4";  // group 16 unless "g32" / "group 32" / "global" follows
  } else if (in(n, {"w8a16", "int8_wo", "int8_weight_only"})) {
    m.family = "other";
    m.problem = "'" + t.text + "' (int8 weight-only) is not a Quark --quant_scheme; use int8 (W8A8) or a 4-bit weight-only scheme such as int4_wo_128?";
  } else if (in(n, {"e5m2", "fp8_e5m2", "float8_e5m2"})) {
    m.family = "other";
    m.problem = "Quark's fp8 schemes use E4M3, not E5M2; use fp8 (E4M3)?";
  } else if (n == "fp4_block16_scale_e4m3") {
    m.scheme = "nvfp4";
    m.family = "other";
    m.typo_note = "'" + t.text + "' is Quark's legacy name of nvfp4; using nvfp4";
  } else if (quant::find_scheme(n)) {
    m.scheme = std::string(n);
    m.family = family_of(n);
  } else if (is_quark_only(n)) {
    m.scheme = std::string(n);
    m.family = "other";
    m.quark_only = true;
  } else if (auto it = std::find_if(legacy.begin(), legacy.end(), [&](auto& p) { return p.first == n; });
             it != legacy.end()) {
    m.scheme = std::string(it->second);
    m.family = family_of(m.scheme);
    m.typo_note = "'" + t.text + "' is a legacy Quark scheme name; using " + m.scheme;
  } else {
    static const std::regex glued(R"(^(u?int4|w4a16)(?:_wo)?_?gs?_?(\d+)$)");
    std::smatch g;
    const std::string s(n);
    if (!rx_match(s, g, glued)) return 0;
    m.family = "int4";
    mods.is_unsigned = g[1].str()[0] == 'u';
    mods.sign_explicit = mods.is_unsigned;
    m.generic = !mods.is_unsigned;
    mods.group = small_int(g[2].str());
    mods.group_stated = true;
  }
  return 1;
}

// Reads "group size 64" / "g64" / "gs64" / "group of 64" at j; returns tokens read.
size_t read_group(const ParseState& st, size_t j, int& group) {
  static const std::regex g_re(R"(^(?:gs?|group_?size_?|group)(\d+)$)");
  std::smatch g;
  const std::string& n = st.n(j);
  if (rx_match(n, g, g_re)) {
    group = small_int(g[1].str());
    return 1;
  }
  if (!in(n, {"group", "groups", "group_size", "groupsize", "gs", "per_group"})) return 0;
  size_t k = j + 1;
  while (k < st.size() && k < j + 4 && st.free(k) && in(st.n(k), {"size", "of", "is", "_size"})) ++k;
  if (!st.number(k) || st.tok[k].percent) return 0;
  group = static_cast<int>(st.tok[k].num);
  return k - j + 1;
}

}  // namespace

bool read_scheme(const ParseState& st, size_t i, SchemeMention& m, std::string_view as) {
  if (!st.free(i)) return false;
  m = SchemeMention{};
  Mods mods;
  const size_t base = base_spelling(st, i, as.empty() ? std::string_view(st.tok[i].norm) : as, m, mods);
  if (base == 0) return false;
  std::vector<size_t> idx;
  for (size_t k = i; k < i + base; ++k) idx.push_back(k);
  const bool explicit_name = !m.scheme.empty() || !m.problem.empty();
  m.group_stated = explicit_name;
  if (!explicit_name) {
    // Modifiers before: "asymmetric int4", "per-channel FP8", "weight-only mxfp4".
    for (size_t back = 1; back <= 3 && i >= back; ++back) {
      const size_t j = i - back;
      if (!st.free(j)) break;
      const std::string& n = st.n(j);
      if (in(n, {"a", "an", "the"})) continue;
      if (in(n, {"asymmetric", "asym", "unsigned", "asymmetrical"})) mods.is_unsigned = mods.sign_explicit = true;
      else if (in(n, {"symmetric", "sym", "signed"})) mods.sign_explicit = true;
      else if (in(n, {"per_channel", "channelwise", "channel_wise", "per_channel_"})) mods.per_channel = true;
      else if (n == "channel" && st.is(j - 1, "per") && j >= 1) { mods.per_channel = true; idx.push_back(j - 1); }
      else if (in(n, {"weight_only", "weights_only"})) mods.weight_only = true;
      else if (in(n, {"dynamic", "per_token"})) mods.ptpc = true;
      else if (in(n, {"static", "per_tensor", "per_group", "groupwise", "group_wise"})) {}
      else break;
      idx.push_back(j);
    }
    // Modifiers after: "int4 g64", "W4A16 with group size 64", "FP8 per-channel",
    // "mxfp4 for weights only", "8-bit integer".
    size_t j = i + base;
    for (size_t steps = 0; steps < 6 && st.free(j); ++steps) {
      const std::string& n = st.n(j);
      int group = 0;
      size_t used = 0;
      if (m.family == "int4" && (used = read_group(st, j, group)) > 0) {
        mods.group = group;
        mods.group_stated = true;
      } else if (in(n, {"per_channel", "channelwise", "channel_wise"})) {
        mods.per_channel = true;
        used = 1;
      } else if (n == "per" && st.is(j + 1, "channel")) {
        mods.per_channel = true;
        used = 2;
      } else if (n == "per" && st.is(j + 1, "token")) {
        mods.ptpc = true;
        used = 2;
      } else if ((n == "weights" || n == "weight") && st.is(j + 1, "only")) {
        mods.weight_only = true;
        used = 2;
      } else if (in(n, {"weight_only", "weights_only", "wo"})) {
        mods.weight_only = true;
        used = 1;
      } else if (m.family == "int4" && in(n, {"asymmetric", "asym", "zero_point", "unsigned", "uint4"})) {
        mods.is_unsigned = mods.sign_explicit = true;
        used = 1;
      } else if (m.family == "int4" && n == "zero" && (st.is(j + 1, "point") || st.is(j + 1, "points"))) {
        mods.is_unsigned = mods.sign_explicit = true;
        used = 2;
      } else if (m.family == "int4" && in(n, {"symmetric", "sym", "signed"})) {
        mods.sign_explicit = true;
        used = 1;
      } else if (m.family == "int4" && in(n, {"int4", "w4a16", "per_group", "groupwise", "group_wise"})) {
        used = 1;
      } else if ((m.family == "fp8" || m.family == "8bit") && in(n, {"ptpc", "per_token", "dynamic"})) {
        mods.ptpc = true;
        used = 1;
      } else if ((m.family == "fp8" || m.family == "8bit") && in(n, {"w8a8", "e4m3", "per_tensor", "static"})) {
        used = 1;
      } else if (m.family == "8bit" && in(n, {"int8", "int", "integer", "integers"})) {
        mods.to_int8 = true;
        used = 1;
      } else if (m.family == "8bit" && in(n, {"fp8", "float", "floating", "float8"})) {
        mods.to_fp8 = true;
        used = 1;
      } else if (m.family == "int8" && in(n, {"w8a8", "per_tensor", "static"})) {
        used = 1;
      } else if (m.family == "mxfp4" && in(n, {"ocp", "mx"})) {
        used = 1;
      } else if (m.family == "w4a8" && in(n, {"mxfp4", "mx_fp4", "fp4", "mx"})) {
        mods.mx = true;
        used = 1;
      } else if (m.family == "w4a8" && n == "int4") {
        used = 1;
      } else if ((m.family == "w4a8" || m.family == "mxfp4") && n == "fp8" &&
                 (st.is(j + 1, "activations") || st.is(j + 1, "activation"))) {
        mods.fp8_act = true;  // "mxfp4 weights, fp8 activations" (not "mxfp4 with an fp8 KV cache")
        used = 2;
      } else if (m.family == "mxfp4" && in(n, {"w4a8", "a8", "fp8_activations"})) {
        mods.fp8_act = true;  // "MXFP4 W4A8"
        used = 1;
      } else if (m.family == "mxfp6" && in(n, {"e3m2", "fp6_e3m2"})) {
        mods.e3m2 = true;
        used = 1;
      } else if (m.family == "mxfp6" && in(n, {"e2m3", "fp6_e2m3", "ocp", "mx"})) {
        used = 1;
      } else if (m.family == "amdfp4" && (n == "global" || n == "global_scale")) {
        mods.global = true;
        used = n == "global" && (st.is(j + 1, "scale") || st.is(j + 1, "scales")) ? 2 : 1;
      } else if (m.family == "amdfp4" && (used = read_group(st, j, group)) > 0) {
        mods.group = group;
        mods.group_stated = true;
      } else if (m.family == "amdfp4" && in(n, {"e5m3"})) {
        used = 1;
      } else if (in(n, {"with", "and", "using", "a", "an", "the", "of", "for", "on", "just", "quantization", "scheme",
                        "weights", "weight", "format"})) {
        ++j;
        continue;
      } else {
        break;
      }
      for (size_t k = j; k < j + used; ++k) idx.push_back(k);
      j += used;
    }
    // Resolve the family to a Quark name.
    if (m.family == "int4") {
      if (mods.sign_explicit) m.generic = false;
      const std::string sign = mods.is_unsigned ? "uint4" : "int4";
      if (mods.per_channel) {
        m.scheme = sign + "_wo_per_channel";
      } else if (mods.group == 32 || mods.group == 64 || mods.group == 128) {
        m.scheme = sign + "_wo_" + std::to_string(mods.group);
        m.group_stated = mods.group_stated;
      } else {
        m.problem = "group size " + std::to_string(mods.group) +
                    " is not offered by Quark's 4-bit schemes (32, 64, 128, or per-channel); which one should I use?";
      }
    } else if (m.family == "fp8") {
      m.scheme = mods.ptpc || mods.per_channel ? "ptpc_fp8" : "fp8";
    } else if (m.family == "8bit") {
      if (mods.to_int8) { m.scheme = "int8"; m.family = "int8"; m.generic = false; }
      else { m.scheme = mods.ptpc || mods.per_channel ? "ptpc_fp8" : "fp8"; m.generic = !mods.to_fp8; }
      if (mods.to_fp8) m.family = "fp8";
    } else if (m.family == "int8") {
      m.scheme = "int8";
    } else if (m.family == "mxfp4") {
      m.scheme = mods.fp8_act ? "mxfp4_fp8" : mods.weight_only ? "mxfp4_weight_only" : "mxfp4";
    } else if (m.family == "w4a8") {
      m.scheme = mods.mx ? "mxfp4_fp8" : "int4_fp8";
    } else if (m.family == "mxfp6") {
      m.scheme = mods.e3m2 ? "mxfp6_e3m2" : "mxfp6_e2m3";
    } else if (m.family == "amdfp4") {
      const int g = mods.group_stated ? mods.group : 16;
      if (g != 16 && g != 32)
        m.problem = "AMD FP4 takes group size 16 or 32, not " + std::to_string(g) + "; which one should I use?";
      else if (mods.global)
        m.scheme = "amdfp4_global" + std::to_string(g);
      else
        m.scheme = g == 32 ? "amdfp4_g32" : "amdfp4";
    }
  }
  // A Quark scheme qloom does not implement becomes a question at resolution.
  if (!m.scheme.empty() && m.problem.empty()) m.quark_only = quant::find_scheme(m.scheme) == nullptr;
  std::sort(idx.begin(), idx.end());
  m.begin = idx.front();
  m.end = idx.back() + 1;
  m.extra = idx;
  for (size_t k : idx) {
    if (!m.text.empty()) m.text += ' ';
    m.text += st.tok[k].text;
  }
  return true;
}

void use_mention(ParseState& st, const SchemeMention& m) {
  for (size_t k : m.extra) st.use(k);
}

// ---- KV cache -------------------------------------------------------------------

void pass_kv_cache(ParseState& st) {
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st.free(i)) continue;
    const std::string& n = st.n(i);
    size_t end = i + 1;
    if (n == "kv" || n == "k/v") {
      if (st.is(i + 1, "cache") || st.is(i + 1, "caches")) end = i + 2;
    } else if (!in(n, {"kv_cache", "kvcache", "kv_cache_dtype", "kv_caches", "kv_cache_scheme"})) {
      continue;
    }
    std::string dtype;
    bool have = false, negated = false;
    // Before: "fp8 KV cache", "without quantizing the KV cache".
    for (size_t back = 1; back <= 4 && i >= back && !have; ++back) {
      const size_t j = i - back;
      if (!st.free(j)) break;
      const std::string& b = st.n(j);
      SchemeMention m;
      if (in(b, {"no", "without", "not", "don't", "dont", "never", "skip"})) { negated = true; break; }
      if (read_scheme(st, j, m) && m.end == j + 1) {
        dtype = m.scheme.empty() ? b : m.scheme;
        have = true;
        st.use(j);
        break;
      }
      if (!in(b, {"the", "a", "an", "quantize", "quantizing", "quantized", "with", "plus", "and", "also", "an"})) break;
    }
    // After: "KV cache in fp8", "--kv_cache_dtype fp8", "KV cache unquantized".
    for (size_t j = end; j < end + 4 && st.free(j) && !have && !negated; ++j) {
      const std::string& a = st.n(j);
      SchemeMention m;
      if (is_high_precision_word(a)) { negated = true; st.use(j); break; }
      if (read_scheme(st, j, m) && m.end == j + 1) {
        dtype = m.scheme.empty() ? a : m.scheme;
        have = true;
        st.use(j);
        break;
      }
      if (!in(a, {"in", "to", "as", "at", "with", "using", "dtype", "quantized", "quantization", "the", "of", "set",
                  "scheme", "also", "too"}))
        break;
    }
    st.use(i, end);
    if (negated) {
      st.out.kv_cache_dtype = {"", Source::kStated};
      st.out.reasons["kv_cache_dtype"] = "User asked to leave the KV cache unquantized";
    } else if (!have) {
      st.out.kv_cache_dtype = {"fp8", Source::kInferred};
      st.out.reasons["kv_cache_dtype"] = "User asked for KV-cache quantization; fp8 is the only --kv_cache_dtype";
    } else if (dtype == "fp8" || dtype == "ptpc_fp8") {
      st.out.kv_cache_dtype = {"fp8", Source::kStated};
      st.out.reasons["kv_cache_dtype"] = "User requested an FP8 KV cache";
    } else {
      st.ask("kv_cache_dtype", "a '" + dtype + "' KV cache is not offered (--kv_cache_dtype supports only fp8); use fp8, or leave the KV cache unquantized?");
      st.out.kv_cache_dtype = {"", Source::kMissing};
    }
  }
}

}  // namespace qloom::agent::detail
