// Tokenizer of agent prompts (internal to agent/intent).
//
// Contract:
//   - Whitespace separates tokens; "..." / `...` / '...' (and curly quotes)
//     make one token of their content, spaces included (output dirs with
//     spaces). An apostrophe inside a word ("don't") is not a quote.
//   - Surrounding brackets and trailing , ; : . ! ? are stripped; , ; . ! ?,
//     a newline, a lone dash and "but" end a clause (Token::clause counts).
//   - A chunk with '/' is one token: kPath (starts with / ./ ../ ~/ or has
//     several '/'), kHubId (org/name; huggingface.co / hf.co URLs reduced to
//     it), else split at '/' ("fp8/int8" -> two words).
//   - Other chunks split at '+', ',', '=' (key=value) and into number + unit
//     ("2048-token" -> 2048 "token", "4-bit" -> 4 "bit"). Numbers: "128",
//     "0.05", ".05", "2k" (kilo), "5%" (percent; "5 %" / "5 percent" too),
//     and the words one..ten; values saturate at 1e9.
//   - norm = lowercase, '-' -> '_', leading "--" removed, curly apostrophe -> '.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "qloom/core/strings.h"

namespace qloom::agent::detail {

enum class TokKind { kWord, kNumber, kPath, kHubId, kQuoted };

struct Token {
  std::string text;  // as written (quotes and stripped punctuation removed)
  std::string norm;  // matching form (see above)
  TokKind kind = TokKind::kWord;
  double num = 0;        // kNumber
  bool percent = false;  // kNumber followed by % / percent
  bool kilo = false;     // kNumber with a k suffix (num already multiplied by 1000)
  bool quoted = false;
  size_t clause = 0;
};

std::vector<Token> lex(std::string_view prompt);

}  // namespace qloom::agent::detail
