// Shared state of the intent parser's passes (internal to agent/intent).
//
// parse_intent lexes the prompt, then runs the passes in a fixed order; each
// pass marks the tokens it interprets as used so that later passes do not
// read them again (the "fp8" of "fp8 KV cache" is not the global scheme, the
// "128" of "128 samples" is not a group size):
//   model/output -> KV cache -> exclusions/overrides -> eval gap ->
//   calibration -> metric -> hardware/priority -> algorithm -> scheme ->
//   defaults.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "qloom/agent/intent.h"
#include "qloom/agent/intent_lexer.h"

namespace qloom::agent::detail {

struct ParseState {
  const IntentContext& ctx;
  std::vector<Token> tok;
  std::vector<bool> used;
  Intent out;
  std::vector<std::string> negated_schemes;  // "not fp8", "instead of int8"

  ParseState(const IntentContext& c, std::vector<Token> t) : ctx(c), tok(std::move(t)), used(tok.size(), false) {}

  size_t size() const { return tok.size(); }
  // norm of token i, "" past the end or for a used token when `unused_only`.
  const std::string& n(size_t i) const;
  bool is(size_t i, std::string_view w) const { return i < tok.size() && tok[i].norm == w; }
  bool free(size_t i) const { return i < tok.size() && !used[i]; }
  bool number(size_t i) const { return free(i) && tok[i].kind == TokKind::kNumber; }
  void use(size_t i) {
    if (i < used.size()) used[i] = true;
  }
  void use(size_t b, size_t e) {
    for (size_t i = b; i < e && i < used.size(); ++i) used[i] = true;
  }
  void note(std::string s) { out.notes.push_back(std::move(s)); }
  void ask(std::string field, std::string q);

  // Distance (in tokens) from i to the nearest token in i's clause for which
  // pred holds, or SIZE_MAX.
  size_t clause_distance(size_t i, const std::function<bool(const Token&)>& pred) const;
  // Which context token i sits in: the nearest calibration / evaluation cue
  // before it in its clause, else the nearest after it: +1 calibration,
  // -1 evaluation, 0 neither.
  int calib_or_eval(size_t i) const;
  // A correction cue ("actually", "instead", "switch", ...) in [b, e).
  bool correction_in(size_t b, size_t e) const;
  // A negation right before i ("not", "no", "instead of", "rather than",
  // "avoid", "without", "don't use").
  bool negated_before(size_t i) const;
};

// Digits -> int, saturating at 1e9 (never throws: prompts are arbitrary text).
inline int small_int(const std::string& digits) {
  if (digits.size() > 9) return 1000000000;
  int v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return v;
}

// Calibration / evaluation context words.
bool is_calib_cue(std::string_view norm);
bool is_eval_cue(std::string_view norm);

void pass_model_and_output(ParseState& st);
void pass_kv_cache(ParseState& st);
void pass_exclusions(ParseState& st);
void pass_eval_gap(ParseState& st);
void pass_calibration(ParseState& st);
void pass_metric(ParseState& st);
void pass_hardware(ParseState& st);
void pass_algorithm(ParseState& st);
void pass_scheme(ParseState& st);
void finish_defaults(ParseState& st);

// Scheme spelling helpers shared by the KV, override and scheme passes.
struct SchemeMention {
  std::string scheme;   // resolved Quark name ("" when `problem`)
  std::string family;   // "int4" (4-bit weight-only), "fp8", "8bit", "mxfp4", "int8", "other"
  bool generic = false;        // family alias without signedness ("int4", "W4A16", "4-bit", "W8A8")
  bool quark_only = false;     // a Quark scheme qloom does not implement yet
  bool negated = false;
  bool correction = false;     // introduced by a correction cue
  // The words fix the 4-bit group size: "g64", "group size 64", or a Quark
  // name that contains it ("int4_wo_128"). Otherwise the group of a generic
  // spelling ("W4A16", "4-bit") is a default the plan derives.
  bool group_stated = false;
  std::string problem;         // why it cannot be used (question text)
  std::string typo_note;       // set when the spelling was corrected
  size_t begin = 0, end = 0;   // token span (modifiers included)
  std::vector<size_t> extra;   // modifier tokens outside [begin, end)
  std::string text;            // the words as written
};
// Reads a scheme mention at token i (free tokens only), or returns false.
// `as`: read token i as if spelled so (a corrected typo).
bool read_scheme(const ParseState& st, size_t i, SchemeMention& m, std::string_view as = {});
void use_mention(ParseState& st, const SchemeMention& m);

}  // namespace qloom::agent::detail
